package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/store"
)

func shortLease(d time.Duration) envOption {
	return func(c *store.Config, _ *httpapi.Limits) { c.LeaseTTL = d }
}

// sweep runs the reaper once, as the periodic loop would.
func (e *env) sweep() store.SweepReport {
	e.t.Helper()
	r, err := e.store.Sweep(context.Background())
	if err != nil {
		e.t.Fatalf("sweep: %v", err)
	}
	return r
}

// backdate moves a build's backoff into the past so it is claimable now.
func (e *env) claimableNow(id string) {
	e.t.Helper()
	if _, err := e.store.Pool().Exec(context.Background(), `UPDATE builds SET run_after = now() WHERE id = $1`, id); err != nil {
		e.t.Fatal(err)
	}
}

// expireLease makes a build's lease run out now, as time would.
func (e *env) expireLease(id string) {
	e.t.Helper()
	if _, err := e.store.Pool().Exec(context.Background(), `UPDATE builds SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, id); err != nil {
		e.t.Fatal(err)
	}
}

// The HTTP side of a stale attempt: its heartbeat and its result upload
// (with a file) are 409s and change nothing. The requeue, its backoff and
// every other stale triple are controller/store's tests.
func TestStaleAttemptAfterRequeueChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.register("a", api.Capabilities{})
	b := e.register("b", api.Capabilities{})
	sub, _ := e.submit("android")
	jobA := a.poll(0)
	if _, err := a.heartbeat(jobA); err != nil {
		t.Fatal(err)
	}
	e.expireLease(sub.ID)
	if r := e.sweep(); r.LeasesExpired != 1 {
		t.Fatalf("sweep: %+v", r)
	}
	e.claimableNow(sub.ID)
	jobB := b.poll(0)
	if jobB == nil || jobB.ID != sub.ID || jobB.AttemptID == jobA.AttemptID {
		t.Fatalf("second worker's job: %+v", jobB)
	}
	// The first worker wakes up and reports: rejected, nothing changes.
	_, err := a.heartbeat(jobA)
	wantStatus(t, err, http.StatusConflict)
	_, err = a.complete(jobA, api.Result{Success: true, FileName: "app.apk", File: bytes.NewReader([]byte("stale"))})
	wantStatus(t, err, http.StatusConflict)
	if bl := e.build(sub.ID); bl.Status != api.StatusAssigned || len(bl.Artifacts) != 0 || *bl.WorkerID != b.id {
		t.Fatalf("stale completion changed the build: %+v", bl)
	}
	if _, err := b.heartbeat(jobB); err != nil {
		t.Fatal(err)
	}
	if res, err := b.complete(jobB, api.Result{Success: true}); err != nil || res.Status != api.StatusCompleted {
		t.Fatalf("real completion: %+v %v", res, err)
	}
}

func TestDuplicateCompletionSameAnswerOneChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.register("w", api.Capabilities{})
	sub, _ := e.submit("ios")
	job := w.poll(0)
	w.heartbeat(job)
	first, err := w.complete(job, api.Result{Success: true, FileName: "App.ipa", File: bytes.NewReader([]byte("ipa-1"))})
	if err != nil {
		t.Fatal(err)
	}
	second, err := w.complete(job, api.Result{Success: true, FileName: "App.ipa", File: bytes.NewReader([]byte("ipa-2"))})
	if err != nil {
		t.Fatal(err)
	}
	if !second.Duplicate || second.Status != first.Status || second.Artifact.SHA256 != first.Artifact.SHA256 {
		t.Fatalf("repeat answer %+v differs from first %+v", second, first)
	}
	if b := e.build(sub.ID); b.Artifacts[0].SHA256 != sha([]byte("ipa-1")) {
		t.Fatal("the repeat replaced the artifact")
	}
}

func TestLostPollResponseIsRedelivered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.register("w", api.Capabilities{MaxConcurrentBuilds: 2})
	sub, _ := e.submit("android")
	e.submit("android")
	lost := w.poll(0) // the answer "never arrives"
	again := w.poll(0)
	if again == nil || again.ID != lost.ID || again.AttemptID != lost.AttemptID || again.LeaseToken == lost.LeaseToken || again.OTP == lost.OTP {
		t.Fatalf("redelivery: first %+v, again %+v", lost, again)
	}
	// The lost credentials are dead; the redelivered ones work.
	_, err := w.heartbeat(lost)
	wantStatus(t, err, http.StatusConflict)
	_, err = (&api.Client{BaseURL: e.URL}).VMAuth(context.Background(), sub.ID, lost.OTP)
	wantStatus(t, err, http.StatusUnauthorized)
	if _, err := w.heartbeat(again); err != nil {
		t.Fatal(err)
	}
	// Acknowledged: the next poll hands out the other build, not this one.
	if next := w.poll(0); next == nil || next.ID == sub.ID {
		t.Fatalf("after ack: %+v", next)
	}
	if b := e.build(sub.ID); b.Attempts != 1 {
		t.Fatalf("redelivery consumed an attempt: %d", b.Attempts)
	}
}

func TestWorkerTokenRotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *store.Config, _ *httpapi.Limits) { c.TokenRotateAfter = store.Off; c.TokenTTL = 2 * time.Second })
	ctx := context.Background()
	w := e.register("w", api.Capabilities{})
	a := w.token
	resp, err := e.worker.Poll(ctx, a, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := resp.AccessToken
	if b == a || !resp.TokenExpiresAt.After(time.Now()) {
		t.Fatalf("token not rotated: %+v", resp.TokenGrant)
	}
	// The previous token still works while the new one is unused (the
	// answer carrying it may have been lost), and keeps being offered.
	resp, err = e.worker.Poll(ctx, a, 0)
	if err != nil || resp.AccessToken != a {
		t.Fatalf("previous token before the new one is used: %+v %v", resp.TokenGrant, err)
	}
	// First use of the new token retires the previous one.
	if _, err := e.worker.Poll(ctx, b, 0); err != nil {
		t.Fatal(err)
	}
	_, err = e.worker.Poll(ctx, a, 0)
	wantStatus(t, err, http.StatusUnauthorized)
	// An expired token is refused; re-registering gets a fresh one.
	time.Sleep(2100 * time.Millisecond)
	_, err = e.worker.Poll(ctx, b, 0)
	wantStatus(t, err, http.StatusUnauthorized)
	_, err = e.worker.Poll(ctx, "fwt_garbage", 0)
	wantStatus(t, err, http.StatusUnauthorized)
}

func TestUnregisterAndReregisterReleaseWithoutConsumingAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w := e.register("w", api.Capabilities{MaxConcurrentBuilds: 2})
	s1, _ := e.submit("ios")
	s2, _ := e.submit("ios")
	j1 := w.poll(0)
	w.heartbeat(j1)
	j2 := w.poll(0)
	w.heartbeat(j2)
	out, err := e.worker.Unregister(ctx, w.token)
	if err != nil || out.BuildsReassigned != 2 {
		t.Fatalf("unregister: %+v %v", out, err)
	}
	for _, id := range []string{s1.ID, s2.ID} {
		if b := e.build(id); b.Status != api.StatusPending || b.Attempts != 0 || b.RunAfter != nil {
			t.Fatalf("released build %s: status %s attempts %d run_after %v", id, b.Status, b.Attempts, b.RunAfter)
		}
	}
	_, err = e.worker.Poll(ctx, w.token, 0)
	wantStatus(t, err, http.StatusUnauthorized)

	// Re-registering the same id starts a new instance; the old one's lease goes back.
	reg, err := e.worker.Register(ctx, api.RegisterRequest{ID: w.id, Name: "w", Capabilities: api.Capabilities{}})
	if err != nil || reg.Status != "re-registered" {
		t.Fatalf("re-register: %+v %v", reg, err)
	}
	w.token = reg.AccessToken
	j := w.poll(0)
	w.heartbeat(j)
	reg, err = e.worker.Register(ctx, api.RegisterRequest{ID: w.id, Name: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if b := e.build(j.ID); b.Status != api.StatusPending || b.Attempts != 0 {
		t.Fatalf("after re-register: %s attempts %d", b.Status, b.Attempts)
	}
	_, err = w.heartbeat(j) // the old instance's token is gone
	wantStatus(t, err, http.StatusUnauthorized)
	w.token = reg.AccessToken
	_, err = w.heartbeat(j) // and so is its lease, even for the new instance
	wantStatus(t, err, http.StatusConflict)
}

func TestControllerRestartMidBuildLosesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w := e.register("w", api.Capabilities{})
	sub, src := e.submit("android")
	job := w.poll(0)
	w.heartbeat(job)
	vm := &api.Client{BaseURL: e.URL}
	auth, err := vm.VMAuth(ctx, sub.ID, job.OTP)
	if err != nil {
		t.Fatal(err)
	}
	vm.AppendLog(ctx, sub.ID, auth.VMToken, 0, []byte("before restart\n"))

	e.restart()
	vm.BaseURL = e.URL

	if _, err := w.heartbeat(job); err != nil {
		t.Fatalf("heartbeat after restart: %v", err)
	}
	resp, err := vm.Source(ctx, sub.ID, auth.VMToken, "")
	if err != nil {
		t.Fatalf("source after restart: %v", err)
	}
	resp.Body.Close()
	if resp.Header.Get(api.HeaderChecksum) != sha(src) {
		t.Fatal("source changed across restart")
	}
	if n, err := vm.AppendLog(ctx, sub.ID, auth.VMToken, 15, []byte("after restart\n")); err != nil || n != 29 {
		t.Fatalf("log after restart: %d %v", n, err)
	}
	res, err := w.complete(job, api.Result{Success: true, FileName: "a.apk", File: bytes.NewReader([]byte("apk"))})
	if err != nil || res.Status != api.StatusCompleted {
		t.Fatalf("complete after restart: %+v %v", res, err)
	}
	logs, _ := e.developer.ReadLogs(ctx, sub.ID, 0)
	if string(logs.Data) != "before restart\nafter restart\n" {
		t.Fatalf("log: %q", logs.Data)
	}
}

func TestCancelPendingAndRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	pending, _ := e.submit("android")
	out, err := e.developer.Cancel(ctx, pending.ID)
	if err != nil || out.Status != api.StatusCancelled {
		t.Fatalf("cancel pending: %+v %v", out, err)
	}
	if again, err := e.developer.Cancel(ctx, pending.ID); err != nil || again.Status != api.StatusCancelled {
		t.Fatalf("cancel twice: %+v %v", again, err)
	}
	w := e.register("w", api.Capabilities{})
	if job := w.poll(0); job != nil {
		t.Fatalf("a cancelled build was handed out: %+v", job)
	}
	running, _ := e.submit("android")
	job := w.poll(0)
	w.heartbeat(job)
	owner := &api.Client{BaseURL: e.URL, BuildToken: running.AccessToken}
	out, err = owner.Cancel(ctx, running.ID)
	if err != nil || out.Status != api.StatusBuilding || !out.CancelRequested {
		t.Fatalf("cancel running: %+v %v", out, err)
	}
	hb, err := w.heartbeat(job)
	if err != nil || !hb.CancelRequested {
		t.Fatalf("heartbeat must carry the cancel: %+v %v", hb, err)
	}
	res, err := w.complete(job, api.Result{Success: false, ErrorCode: "cancelled", ErrorMessage: "VM stopped"})
	if err != nil || res.Status != api.StatusCancelled {
		t.Fatalf("report after cancel: %+v %v", res, err)
	}
	_, err = e.developer.Cancel(ctx, running.ID)
	if err != nil {
		t.Fatalf("cancel of a cancelled build: %v", err)
	}
	done, _ := e.submit("android")
	j := w.poll(0)
	w.heartbeat(j)
	w.complete(j, api.Result{Success: true})
	_, err = e.developer.Cancel(ctx, done.ID)
	wantStatus(t, err, http.StatusConflict)
}

func TestRetryAndIdempotentSubmit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	src := controllertest.Project(t, map[string]string{"app.json": "{}"})
	req := func() api.SubmitRequest {
		return api.SubmitRequest{Platform: "android", Source: bytes.NewReader(src), IdempotencyKey: "submit-42"}
	}
	first, err := e.developer.Submit(ctx, req())
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.developer.Submit(ctx, req())
	if err != nil || second.ID != first.ID {
		t.Fatalf("retried submit made another build: %+v %v", second, err)
	}
	var n int
	e.store.Pool().QueryRow(ctx, `SELECT count(*) FROM builds`).Scan(&n)
	if n != 1 {
		t.Fatalf("%d builds after a retried submit", n)
	}
	// The token from the latest answer works.
	if _, err := (&api.Client{BaseURL: e.URL, BuildToken: second.AccessToken}).GetBuild(ctx, first.ID); err != nil {
		t.Fatal(err)
	}

	_, err = e.developer.Retry(ctx, first.ID)
	wantStatus(t, err, http.StatusConflict) // still pending
	w := e.register("w", api.Capabilities{})
	job := w.poll(0)
	w.heartbeat(job)
	w.complete(job, api.Result{Success: false, ErrorMessage: "gradle failed"})
	if b := e.build(first.ID); b.Status != api.StatusFailed || *b.ErrorMessage != "gradle failed" {
		t.Fatalf("failed build: %+v", b)
	}
	// A build token creates no build: a retry needs a developer key.
	_, err = (&api.Client{BaseURL: e.URL, BuildToken: second.AccessToken}).Retry(ctx, first.ID)
	wantStatus(t, err, http.StatusForbidden)
	retry, err := e.developer.Retry(ctx, first.ID)
	if err != nil || retry.ID == first.ID || retry.Status != api.StatusPending || retry.AccessToken == "" {
		t.Fatalf("retry: %+v %v", retry, err)
	}
	b := e.build(retry.ID)
	if b.RetryOf == nil || *b.RetryOf != first.ID || b.Attempts != 0 {
		t.Fatalf("retry build: %+v", b)
	}
	job = w.poll(0)
	if job == nil || job.ID != retry.ID {
		t.Fatalf("retry not queued: %+v", job)
	}
	auth, err := (&api.Client{BaseURL: e.URL}).VMAuth(ctx, retry.ID, job.OTP)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&api.Client{BaseURL: e.URL}).Source(ctx, retry.ID, auth.VMToken, "")
	if err != nil || resp.Header.Get(api.HeaderChecksum) != sha(src) {
		t.Fatalf("retry source: %v", err)
	}
	resp.Body.Close()
}

// TestTwoControllersWakeEachOther: a build submitted to one controller
// process reaches a worker long-polling another on the same database.
func TestTwoControllersWakeEachOther(t *testing.T) {
	t.Parallel()
	a := newEnv(t)
	b := a.replica(func(l *httpapi.Limits) { l.PollBackstop = time.Minute }) // only a notification can wake it in time
	w := b.register("w", api.Capabilities{})
	got := make(chan time.Time, 1)
	go func() {
		resp, err := b.worker.Poll(context.Background(), w.token, 20*time.Second)
		if err != nil || resp.Job == nil {
			t.Errorf("poll on B: %+v %v", resp, err)
		}
		got <- time.Now()
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	a.submit("ios")
	select {
	case at := <-got:
		if d := at.Sub(start); d > time.Second {
			t.Fatalf("pickup across controllers took %v", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the worker on controller B was not woken")
	}
}

func TestDrainHandsBuildBackAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.register("w", api.Capabilities{})
	sub, _ := e.submit("android")
	job := w.poll(0)
	w.heartbeat(job)
	res, err := w.complete(job, api.Result{Success: false, ErrorCode: api.CodeReleased, ErrorMessage: "worker draining"})
	if err != nil || !res.Requeued || res.Status != api.StatusPending {
		t.Fatalf("release: %+v %v", res, err)
	}
	b := e.build(sub.ID)
	if b.Status != api.StatusPending || b.Attempts != 0 || b.RunAfter != nil || b.AttemptHistory[0].Status != "released" {
		t.Fatalf("released build: %+v", b)
	}
	// A retryable failure, by contrast, consumes the attempt and backs off.
	e.claimableNow(sub.ID)
	job = w.poll(0)
	w.heartbeat(job)
	res, err = w.complete(job, api.Result{Success: false, Retryable: true, ErrorCode: "vm_boot_failed", ErrorMessage: "VM never signalled ready"})
	if err != nil || !res.Requeued {
		t.Fatalf("retryable failure: %+v %v", res, err)
	}
	if b := e.build(sub.ID); b.Attempts != 1 || b.RunAfter == nil {
		t.Fatalf("after a retryable failure: attempts %d run_after %v", b.Attempts, b.RunAfter)
	}
}

func TestQueuePositionsFollowPriorityAndAge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	submit := func(priority int) api.SubmitResponse {
		resp, err := e.developer.Submit(ctx, api.SubmitRequest{Platform: "ios", Priority: &priority,
			Source: bytes.NewReader(controllertest.Project(t, map[string]string{"a": "b"}))})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	a, b, urgent := submit(2), submit(2), submit(0)
	for _, c := range []struct {
		got  *int
		want int
	}{{a.QueuePosition, 1}, {b.QueuePosition, 2}, {urgent.QueuePosition, 1}} {
		if c.got == nil || *c.got != c.want {
			t.Fatalf("position at submit: got %v, want %d", c.got, c.want)
		}
	}
	for id, want := range map[string]int{urgent.ID: 1, a.ID: 2, b.ID: 3} {
		if got := e.build(id).QueuePosition; got == nil || *got != want {
			t.Fatalf("build %s: position %v, want %d", id, got, want)
		}
	}
	w := e.register("w", api.Capabilities{})
	if job := w.poll(0); job == nil || job.ID != urgent.ID {
		t.Fatalf("the priority-0 build must be claimed first, got %+v", job)
	}
	if got := e.build(b.ID).QueuePosition; got == nil || *got != 2 {
		t.Fatalf("after a claim: position %v, want 2", got)
	}
}

// A worker that cannot take a build (paused, or at capacity) must not take
// the one wake-up a new build sends: the worker with room gets the build at
// once, not at its next backstop re-check.
func TestWorkersWithoutRoomDoNotSwallowWakeUps(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(_ *store.Config, l *httpapi.Limits) { l.PollBackstop = time.Minute })
	ctx := context.Background()
	full := e.register("full", api.Capabilities{MaxConcurrentBuilds: 1})
	e.submit("android")
	held := full.poll(0)
	full.heartbeat(held)
	paused := e.register("paused", api.Capabilities{})
	if err := e.admin.PauseWorker(ctx, paused.id); err != nil {
		t.Fatal(err)
	}
	free := e.register("free", api.Capabilities{})
	waitFor := func(w *workerSession) chan *api.Job {
		got := make(chan *api.Job, 1)
		go func() {
			resp, err := e.worker.Poll(ctx, w.token, 3*time.Second)
			if err != nil {
				t.Error(err)
			}
			got <- resp.Job
		}()
		time.Sleep(200 * time.Millisecond) // in line, in this order
		return got
	}
	fullGot, pausedGot := waitFor(full), waitFor(paused)
	freeGot := waitFor(free)
	start := time.Now()
	sub, _ := e.submit("android")
	select {
	case j := <-freeGot:
		if j == nil || j.ID != sub.ID {
			t.Fatalf("the free worker got %+v, want build %s", j, sub.ID)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("the free worker got the build after %v", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the free worker was not woken: a worker without room took the wake-up")
	}
	if j := <-fullGot; j != nil {
		t.Fatalf("the full worker got %+v", j)
	}
	if j := <-pausedGot; j != nil {
		t.Fatalf("the paused worker got %+v", j)
	}
}

// TestDeclinedWakeUpReachesAWorkerThatFits: a build is announced to the
// first worker in line; one that cannot take it (too few cores here;
// another pool or trust alike) hands the wake-up on, so the worker that
// can is woken. The re-read and the polls' ends are an hour away: only the
// wake-up can reach it within the minute the test gives it.
func TestDeclinedWakeUpReachesAWorkerThatFits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(_ *store.Config, l *httpapi.Limits) { l.PollBackstop, l.PollMaxWait = time.Hour, time.Hour })
	small := e.register("small", api.Capabilities{CPUCores: 4})
	big := e.register("big", api.Capabilities{CPUCores: 16})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	poll := func(w *workerSession, done chan<- *api.Job) {
		resp, err := e.worker.Poll(ctx, w.token, time.Hour)
		if err != nil && ctx.Err() == nil {
			t.Errorf("poll: %v", err)
		}
		done <- resp.Job
	}
	smallDone, bigDone := make(chan *api.Job, 1), make(chan *api.Job, 1)
	go poll(small, smallDone)
	// Only so that the small worker is first in line and the big one parked
	// (which makes this test tell the old hub from the new): the build
	// reaches the big one whatever the order.
	time.Sleep(300 * time.Millisecond)
	go poll(big, bigDone)
	time.Sleep(300 * time.Millisecond)
	spec := androidSpec("big-app", "preview")
	spec.Requires = &api.Requirements{CPUCores: 16}
	sub, err := e.submitSpec(spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case j := <-bigDone:
		if j == nil || j.ID != sub.ID {
			t.Fatalf("the worker with 16 cores got %+v, want build %s", j, sub.ID)
		}
	case <-time.After(time.Minute):
		t.Fatal("the worker with 16 cores was never woken for the build that needs them")
	}
	cancel()
	if j := <-smallDone; j != nil {
		t.Fatalf("the small worker got %s", j.ID)
	}
}
