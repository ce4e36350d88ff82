package store_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

// running submits a build, claims it for w and acknowledges it.
func (f *fixture) running(w store.WorkerAuth) *api.Job {
	f.t.Helper()
	f.submit(store.NewBuild{})
	j := f.claim(w)
	f.ack(w, j)
	return j
}

// runningBuild is a store with one one-build Android worker running one
// acknowledged build.
func runningBuild(t *testing.T) (*fixture, store.WorkerAuth, *api.Job) {
	t.Helper()
	f := newStore(t)
	w := f.register("", android(""))
	return f, w, f.running(w)
}

// snapshot is what a refused transition must leave alone.
type snapshot struct {
	build  string
	events int
}

func (f *fixture) snapshot(id string) snapshot {
	f.t.Helper()
	var s snapshot
	err := f.s.Pool().QueryRow(f.ctx, `SELECT (SELECT row_to_json(b)::text FROM builds b WHERE id = $1)
			|| COALESCE((SELECT json_agg(a ORDER BY a.number)::text FROM build_attempts a WHERE build_id = $1), ''),
		(SELECT count(*) FROM events)`, id).Scan(&s.build, &s.events)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// unchanged fails when build id or the audit log changed since before.
func (f *fixture) unchanged(what, id string, before snapshot) {
	f.t.Helper()
	if after := f.snapshot(id); after != before {
		f.t.Fatalf("%s changed state:\nbefore %+v\nafter  %+v", what, before, after)
	}
}

// Every compare-and-set on (build, attempt, lease) refuses a stale or
// foreign triple with ErrLeaseLost (the handlers' 409) and changes nothing.
func TestStaleLeasesChangeNothing(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	w := f.register("w1", android(""))
	j := f.running(w)
	other := f.register("w2", android(""))
	hb := func(w store.WorkerAuth, build, attempt, lease string) error {
		_, err := f.s.Heartbeat(f.ctx, w, api.HeartbeatRequest{BuildID: build, AttemptID: attempt, LeaseToken: lease, Phase: "stale"})
		return err
	}
	done := func(w store.WorkerAuth, build, attempt, lease string) error {
		committed := false
		_, err := f.s.Complete(f.ctx, w, store.Result{BuildID: build, AttemptID: attempt, LeaseToken: lease, Success: true,
			Artifact: &store.PendingArtifact{Name: "stale.apk", Commit: func() error { committed = true; return nil }}})
		if committed {
			t.Errorf("a refused result moved its artifact into place")
		}
		return err
	}
	for name, op := range map[string]func(store.WorkerAuth, string, string, string) error{"heartbeat": hb, "result": done,
		"release": func(w store.WorkerAuth, build, attempt, lease string) error {
			_, err := f.s.Complete(f.ctx, w, store.Result{BuildID: build, AttemptID: attempt, LeaseToken: lease, ErrorCode: api.CodeReleased})
			return err
		},
		"lease check": func(w store.WorkerAuth, build, attempt, lease string) error {
			return f.s.CheckLease(f.ctx, w, build, attempt, lease)
		},
	} {
		for _, c := range []struct {
			what                  string
			w                     store.WorkerAuth
			build, attempt, lease string
		}{
			{"a wrong lease token", w, j.ID, j.AttemptID, "fa_lt_not-the-lease"},
			{"another attempt's id", w, j.ID, store.NewID(), j.LeaseToken},
			{"another build's id", w, store.NewID(), j.AttemptID, j.LeaseToken},
			{"another worker", other, j.ID, j.AttemptID, j.LeaseToken},
			{"a malformed id", w, "../x", j.AttemptID, j.LeaseToken},
		} {
			before := f.snapshot(j.ID)
			wantErr(t, name+" with "+c.what, op(c.w, c.build, c.attempt, c.lease), store.ErrLeaseLost)
			f.unchanged(name+" with "+c.what, j.ID, before)
		}
	}
	// A new instance of the same worker (a restart) releases the build
	// without consuming the attempt; the old instance's lease is dead.
	w2 := f.register("w1", android(""))
	if b := f.build(j.ID); b.Status != api.StatusPending || b.Attempts != 0 || b.RunAfter != nil {
		t.Fatalf("the build of a re-registered worker: %+v", b)
	}
	before := f.snapshot(j.ID)
	wantErr(t, "the old instance's heartbeat", hb(w, j.ID, j.AttemptID, j.LeaseToken), store.ErrLeaseLost)
	wantErr(t, "the old instance's result", done(w, j.ID, j.AttemptID, j.LeaseToken), store.ErrLeaseLost)
	f.unchanged("the old instance", j.ID, before)
	if j2 := f.claim(w2); j2.ID != j.ID || j2.AttemptID == j.AttemptID {
		t.Fatalf("the new instance got %+v", j2)
	}
}

// A heartbeat with the right triple renews the lease, moves assigned to
// building once, and records phase and progress.
func TestHeartbeatRenewsTheLease(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	w := f.register("", android(""))
	f.submit(store.NewBuild{})
	j := f.claim(w)
	f.exec(`UPDATE builds SET lease_expires_at = now() + interval '1 second' WHERE id = $1`, j.ID)
	p := 40
	resp, err := f.s.Heartbeat(f.ctx, w, api.HeartbeatRequest{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken, Phase: "gradle", Progress: &p})
	if err != nil {
		t.Fatal(err)
	}
	b := f.build(j.ID)
	if b.Status != api.StatusBuilding || b.Phase != "gradle" || b.Progress == nil || *b.Progress != 40 || b.StartedAt == nil || resp.CancelRequested {
		t.Fatalf("after the first heartbeat: %+v %+v", b, resp)
	}
	var left float64
	if err := f.s.Pool().QueryRow(f.ctx, `SELECT extract(epoch FROM lease_expires_at - now()) FROM builds WHERE id = $1`, j.ID).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if ttl := f.s.Config().LeaseTTL.Seconds(); left < ttl-5 || left > ttl {
		t.Fatalf("the lease runs %.0fs more, want the lease TTL %.0fs", left, ttl)
	}
	if a := b.AttemptHistory; len(a) != 1 || a[0].Status != "running" {
		t.Fatalf("attempts: %+v", a)
	}
	p = 101
	_, err = f.s.Heartbeat(f.ctx, w, api.HeartbeatRequest{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken, Progress: &p})
	wantErr(t, "progress 101", err, store.ErrInvalid)
}

// A result with the right triple ends the build once; a repeat gets the
// first answer back and changes nothing.
func TestResultIsRecordedOnce(t *testing.T) {
	t.Parallel()
	f, w, j := runningBuild(t)
	committed := 0
	r := store.Result{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken, Success: true,
		Artifact: &store.PendingArtifact{Name: "app.apk", Size: 3, SHA256: cacheKey("apk"), Commit: func() error { committed++; return nil }}}
	resp, err := f.s.Complete(f.ctx, w, r)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != api.StatusCompleted || resp.Duplicate || resp.Artifact == nil || committed != 1 {
		t.Fatalf("the result: %+v (file committed %d times)", resp, committed)
	}
	b := f.build(j.ID)
	if b.Status != api.StatusCompleted || b.CompletedAt == nil || len(b.Artifacts) != 1 || b.Artifacts[0].Name != "app.apk" {
		t.Fatalf("the completed build: %+v", b)
	}
	before := f.snapshot(j.ID)
	again, err := f.s.Complete(f.ctx, w, store.Result{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken, ErrorMessage: "late failure"})
	if err != nil || !again.Duplicate || again.Status != api.StatusCompleted {
		t.Fatalf("a repeated result: %+v, %v", again, err)
	}
	f.unchanged("a repeated result", j.ID, before)
	if committed != 1 {
		t.Fatalf("the repeat committed a file")
	}
	var done int
	if err := f.s.Pool().QueryRow(f.ctx, `SELECT builds_completed FROM workers WHERE id = $1`, w.WorkerID).Scan(&done); err != nil || done != 1 {
		t.Fatalf("the worker's completed count: %d, %v", done, err)
	}
}

// A failure ends the build failed with the worker's code; a failure coded
// cancelled ends it cancelled.
func TestFailureEndsTheBuild(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	w := f.register("", api.Capabilities{MaxConcurrentBuilds: 2})
	j := f.running(w)
	resp, err := f.s.Complete(f.ctx, w, store.Result{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken,
		ErrorCode: "gradle_failed", ErrorMessage: "compile error\x00 in MainActivity"})
	if err != nil || resp.Status != api.StatusFailed {
		t.Fatalf("a failure: %+v, %v", resp, err)
	}
	b := f.build(j.ID)
	if b.Status != api.StatusFailed || b.ErrorCode == nil || *b.ErrorCode != "gradle_failed" || b.ErrorMessage == nil || *b.ErrorMessage != "compile error in MainActivity" {
		t.Fatalf("the failed build: %+v", b)
	}
	j = f.running(w)
	if resp, err := f.s.Complete(f.ctx, w, store.Result{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken,
		ErrorCode: api.CodeCancelled}); err != nil || resp.Status != api.StatusCancelled {
		t.Fatalf("a cancelled result: %+v, %v", resp, err)
	}
}

// Cancel: a pending build at once; a running one by request, which the
// worker hears and which wins over its success; an ended one is a
// conflict; twice is nothing.
func TestCancel(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	pending := f.submit(store.NewBuild{})
	resp, err := f.s.Cancel(f.ctx, pending.ID)
	if err != nil || resp.Status != api.StatusCancelled {
		t.Fatalf("cancelling a pending build: %+v, %v", resp, err)
	}
	before := f.snapshot(pending.ID)
	if resp, err := f.s.Cancel(f.ctx, pending.ID); err != nil || resp.Status != api.StatusCancelled {
		t.Fatalf("cancelling twice: %+v, %v", resp, err)
	}
	f.unchanged("a second cancel", pending.ID, before)
	_, err = f.s.Cancel(f.ctx, store.NewID())
	wantErr(t, "cancelling an unknown build", err, store.ErrNotFound)

	w := f.register("", android(""))
	j := f.running(w)
	resp, err = f.s.Cancel(f.ctx, j.ID)
	if err != nil || resp.Status != api.StatusBuilding || !resp.CancelRequested {
		t.Fatalf("cancelling a running build: %+v, %v", resp, err)
	}
	hb, err := f.s.Heartbeat(f.ctx, w, api.HeartbeatRequest{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken})
	if err != nil || !hb.CancelRequested {
		t.Fatalf("the heartbeat after a cancel: %+v, %v", hb, err)
	}
	if cs, err := f.s.CancelState(f.ctx, w, j.ID); err != nil || !cs.CancelRequested {
		t.Fatalf("the cancel watch: %+v, %v", cs, err)
	}
	committed := false
	res, err := f.s.Complete(f.ctx, w, store.Result{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken, Success: true,
		Artifact: &store.PendingArtifact{Name: "app.apk", Commit: func() error { committed = true; return nil }}})
	if err != nil || res.Status != api.StatusCancelled || res.Artifact != nil || committed {
		t.Fatalf("a success after the cancel: %+v, %v (artifact committed: %v)", res, err, committed)
	}
	if b := f.build(j.ID); b.Status != api.StatusCancelled || len(b.Artifacts) != 0 || !strings.Contains(*b.ErrorMessage, "cancel arrived before") {
		t.Fatalf("the build cancelled before its success: %+v", b)
	}
	_, err = f.s.Cancel(f.ctx, f.running(w).ID)
	if err != nil {
		t.Fatal(err)
	}

	done := f.submit(store.NewBuild{})
	w2 := f.register("", android(""))
	j2 := f.claim(w2)
	if j2.ID != done.ID {
		t.Fatalf("claimed %s, want %s", j2.ID, done.ID)
	}
	if _, err := f.s.Complete(f.ctx, w2, store.Result{BuildID: j2.ID, AttemptID: j2.AttemptID, LeaseToken: j2.LeaseToken, Success: true}); err != nil {
		t.Fatal(err)
	}
	before = f.snapshot(done.ID)
	_, err = f.s.Cancel(f.ctx, done.ID)
	wantErr(t, "cancelling a completed build", err, store.ErrConflict)
	f.unchanged("cancelling a completed build", done.ID, before)
}

// A result for an attempt that lost its build to a cancel is refused: the
// lease expired, the sweep found the cancel and ended the build.
func TestResultAfterCancelIsRefused(t *testing.T) {
	t.Parallel()
	f, w, j := runningBuild(t)
	if _, err := f.s.Cancel(f.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	f.expire(j.ID)
	f.sweep()
	if b := f.build(j.ID); b.Status != api.StatusCancelled {
		t.Fatalf("a cancel-requested build whose lease expired: %s", b.Status)
	}
	before := f.snapshot(j.ID)
	_, err := f.s.Complete(f.ctx, w, store.Result{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken, Success: true})
	wantErr(t, "a result after the cancel ended the build", err, store.ErrLeaseLost)
	f.unchanged("a result after the cancel", j.ID, before)
}

// A hand-back (drain) returns the build at once without using an attempt;
// a retryable failure uses one and backs off; the next claim is a new
// attempt whose predecessor's lease is dead; a non-retryable code ends it.
func TestRequeueAndRetry(t *testing.T) {
	t.Parallel()
	f, w, j := runningBuild(t)
	resp, err := f.s.Complete(f.ctx, w, store.Result{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken, ErrorCode: api.CodeReleased})
	if err != nil || !resp.Requeued || resp.Status != api.StatusPending {
		t.Fatalf("a hand-back: %+v, %v", resp, err)
	}
	b := f.build(j.ID)
	if b.Status != api.StatusPending || b.Attempts != 0 || b.RunAfter != nil || b.WorkerID != nil {
		t.Fatalf("a handed-back build: %+v", b)
	}
	if a := b.AttemptHistory; len(a) != 1 || a[0].Status != "released" {
		t.Fatalf("the handed-back attempt: %+v", a)
	}

	j2 := f.claim(w)
	f.ack(w, j2)
	if j2.ID != j.ID || j2.AttemptID == j.AttemptID {
		t.Fatalf("the second claim: %+v", j2)
	}
	resp, err = f.s.Complete(f.ctx, w, store.Result{BuildID: j2.ID, AttemptID: j2.AttemptID, LeaseToken: j2.LeaseToken,
		Retryable: true, ErrorCode: "vm_boot", ErrorMessage: "the VM did not boot"})
	if err != nil || !resp.Requeued || resp.Status != api.StatusPending {
		t.Fatalf("a retryable failure: %+v, %v", resp, err)
	}
	b = f.build(j.ID)
	if b.Status != api.StatusPending || b.Attempts != 1 || b.RunAfter == nil {
		t.Fatalf("after a retryable failure: %+v", b)
	}
	if got := f.backoff(j2.AttemptID); got != 2 {
		t.Fatalf("backoff after the first counted attempt: %vs, want 2s", got)
	}
	if res := f.poll(w); res.Job != nil {
		t.Fatalf("a build in its backoff was claimed: %+v", res.Job)
	}
	f.exec(`UPDATE builds SET run_after = now() WHERE id = $1`, j.ID)
	j3 := f.claim(w)
	if j3.ID != j.ID || j3.AttemptID == j2.AttemptID {
		t.Fatalf("the retry: %+v", j3)
	}
	b = f.build(j.ID)
	if a := b.AttemptHistory; len(a) != 3 || a[2].Number != 3 || a[1].Status != "failed" || a[2].ID != j3.AttemptID {
		t.Fatalf("attempt history: %+v", a)
	}
	before := f.snapshot(j.ID)
	_, err = f.s.Heartbeat(f.ctx, w, api.HeartbeatRequest{BuildID: j2.ID, AttemptID: j2.AttemptID, LeaseToken: j2.LeaseToken})
	wantErr(t, "the failed attempt's heartbeat", err, store.ErrLeaseLost)
	f.unchanged("the failed attempt's heartbeat", j.ID, before)
}

// backoff is the delay a requeue of attempt gave its build: run_after
// minus the attempt's end, both written by the same statement.
func (f *fixture) backoff(attempt string) float64 {
	f.t.Helper()
	var secs float64
	err := f.s.Pool().QueryRow(f.ctx, `SELECT extract(epoch FROM b.run_after - a.ended_at)::float8
		FROM build_attempts a JOIN builds b ON b.id = a.build_id WHERE a.id = $1`, attempt).Scan(&secs)
	if err != nil {
		f.t.Fatal(err)
	}
	return secs
}

// Retryable failures exhaust the build's attempts: a dead letter.
func TestRetryableFailuresDeadLetter(t *testing.T) {
	t.Parallel()
	f := newStore(t, func(c *store.Config) { c.MaxAttempts = 2 })
	w := f.register("", android(""))
	b := f.submit(store.NewBuild{})
	for i := range 2 {
		f.exec(`UPDATE builds SET run_after = now() WHERE id = $1`, b.ID)
		j := f.claim(w)
		f.ack(w, j)
		resp, err := f.s.Complete(f.ctx, w, store.Result{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken,
			Retryable: true, ErrorMessage: "flaky"})
		if err != nil {
			t.Fatal(err)
		}
		if want := []api.BuildStatus{api.StatusPending, api.StatusFailed}[i]; resp.Status != want || resp.Requeued != (i == 0) {
			t.Fatalf("attempt %d's retryable failure: %+v, want %s", i+1, resp, want)
		}
	}
	got := f.build(b.ID)
	if got.Status != api.StatusFailed || *got.ErrorCode != "max_attempts" || *got.ErrorMessage != "gave up after 2 attempts; last: flaky" {
		t.Fatalf("the dead letter: %+v", got)
	}
}

// Unregistering hands the instance's builds back at once, unconsumed; its
// leases die with it.
func TestUnregisterReleasesWithoutConsumingAttempts(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	w := f.register("", api.Capabilities{MaxConcurrentBuilds: 2})
	j1, j2 := f.running(w), f.running(w)
	n, err := f.s.Unregister(f.ctx, w)
	if err != nil || n != 2 {
		t.Fatalf("unregister: %d, %v", n, err)
	}
	for _, j := range []*api.Job{j1, j2} {
		if b := f.build(j.ID); b.Status != api.StatusPending || b.Attempts != 0 || b.RunAfter != nil || b.AttemptHistory[0].Status != "released" {
			t.Fatalf("a build handed back by unregistering: %+v", b)
		}
		_, err := f.s.Heartbeat(f.ctx, w, api.HeartbeatRequest{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken})
		wantErr(t, "the unregistered instance's heartbeat", err, store.ErrLeaseLost)
	}
	_, err = f.s.AuthenticateWorker(f.ctx, f.tokens[w.WorkerID], f.key)
	wantErr(t, "the unregistered worker's token", err, store.ErrUnauthorized)
}

// A hand-back after the VM fetched the build's credentials is not free: it
// uses an attempt with backoff, is audited on the worker, and enough of
// them within the window raise the worker's needs-attention state.
func TestReleaseAfterCredentialsIsConsumed(t *testing.T) {
	t.Parallel()
	f := newStore(t, func(c *store.Config) { c.ReleaseAttentionCount = 2 })
	w := f.register("", android(""))
	for i := range 2 {
		j := f.running(w)
		if err := f.s.TakeSecret(f.ctx, j.ID, j.AttemptID, store.SecretCerts); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "a second take in one attempt", f.s.TakeSecret(f.ctx, j.ID, j.AttemptID, store.SecretCerts), store.ErrGone)
		resp, err := f.s.Complete(f.ctx, w, store.Result{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken, ErrorCode: api.CodeReleased})
		if err != nil || resp.Status != api.StatusPending {
			t.Fatalf("the hand-back: %+v, %v", resp, err)
		}
		if b := f.build(j.ID); b.Attempts != 1 || b.RunAfter == nil {
			t.Fatalf("a hand-back after a credentials fetch: %+v", b)
		}
		wk, err := f.s.GetWorker(f.ctx, w.WorkerID)
		if err != nil || wk.NeedsAttention != (i == 1) {
			t.Fatalf("after %d hand-backs the worker's attention: %+v, %v", i+1, wk, err)
		}
	}
	if got := types(f.events(), w.WorkerID); !slices.Equal(got, []string{"worker.registered", "worker.released_after_credentials",
		"worker.released_after_credentials", "worker.needs_attention"}) {
		t.Fatalf("the worker's events %v", got)
	}
}

// A completion says whether the build still holds certificates or
// credentials, which is when the caller kicks the reaper: a build that
// holds none, or whose secrets are already deleted, costs it nothing.
func TestCompleteSaysWhetherSecretsAreLeft(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	if err := f.s.SetPool(f.ctx, api.Pool{Name: "vault", Trusted: true}); err != nil {
		t.Fatal(err)
	}
	w := f.register("", android("vault"))
	for _, nb := range []store.NewBuild{{}, {HasCerts: true}, {HasCredentials: true}} {
		b := f.submit(nb)
		j := f.claim(w)
		f.ack(w, j)
		r := store.Result{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken, Success: true}
		c, err := f.s.Complete(f.ctx, w, r)
		if err != nil {
			t.Fatal(err)
		}
		want := nb.HasCerts || nb.HasCredentials
		if j.ID != b.ID || c.Status != api.StatusCompleted || c.SecretsLeft != want {
			t.Fatalf("%+v: completion %+v, want SecretsLeft %v", nb, c, want)
		}
		if !want {
			continue
		}
		if err := f.s.MarkCertsDeleted(f.ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		if c, err := f.s.Complete(f.ctx, w, r); err != nil || !c.Duplicate || c.SecretsLeft {
			t.Fatalf("%+v: the repeat after the secrets were deleted: %+v, %v", nb, c, err)
		}
	}
}
