package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

// expire makes build id's lease run out.
func (f *fixture) expire(id string) {
	f.t.Helper()
	f.exec(`UPDATE builds SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, id)
}

// Each expired lease uses an attempt and backs off min(MaxBackoff,
// 2^attempts) seconds; the last attempt's expiry is a dead letter.
func TestSweepRequeuesExpiredLeasesWithBackoff(t *testing.T) {
	t.Parallel()
	f := newStore(t, func(c *store.Config) { c.MaxAttempts, c.MaxBackoff = 4, 5*time.Second })
	w := f.register("", android(""))
	b := f.submit(store.NewBuild{})
	for i, want := range []float64{2, 4, 5} { // 2^1, 2^2, then the cap instead of 2^3
		f.exec(`UPDATE builds SET run_after = now() WHERE id = $1`, b.ID)
		j := f.claim(w)
		if i%2 == 1 {
			f.ack(w, j) // assigned or building, a lease runs out the same way
		}
		f.expire(j.ID)
		r := f.sweep()
		if r.LeasesExpired != 1 || r.Requeued != 1 || r.DeadLettered != 0 {
			t.Fatalf("sweep %d: %+v", i+1, r)
		}
		got := f.build(b.ID)
		if got.Status != api.StatusPending || got.Attempts != i+1 || got.WorkerID != nil || got.RunAfter == nil {
			t.Fatalf("after expiry %d: %+v", i+1, got)
		}
		if d := f.backoff(j.AttemptID); d != want {
			t.Fatalf("backoff after expiry %d: %vs, want %vs", i+1, d, want)
		}
		if a := got.AttemptHistory[i]; a.Status != "expired" || a.ErrorCode == nil || *a.ErrorCode != "lease_expired" {
			t.Fatalf("the expired attempt: %+v", a)
		}
		if res := f.poll(w); res.Job != nil {
			t.Fatalf("claimed during its backoff: %+v", res.Job)
		}
		_, err := f.s.Heartbeat(f.ctx, w, api.HeartbeatRequest{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken})
		wantErr(t, "the expired attempt's heartbeat", err, store.ErrLeaseLost)
	}
	f.exec(`UPDATE builds SET run_after = now() WHERE id = $1`, b.ID)
	f.expire(f.claim(w).ID)
	r := f.sweep()
	if r.LeasesExpired != 1 || r.Requeued != 0 || r.DeadLettered != 1 {
		t.Fatalf("the last sweep: %+v", r)
	}
	got := f.build(b.ID)
	if got.Status != api.StatusFailed || *got.ErrorCode != "max_attempts" ||
		*got.ErrorMessage != "gave up after 4 attempts; last: the worker stopped renewing its lease" || got.CompletedAt == nil {
		t.Fatalf("the dead letter: %+v", got)
	}
	if res := f.poll(w); res.Job != nil {
		t.Fatalf("a dead letter was claimed: %+v", res.Job)
	}
	// Idempotent: nothing is left to do.
	if r := f.sweep(); r != (store.SweepReport{Ran: true}) {
		t.Fatalf("a second sweep: %+v", r)
	}
}

// A live lease is left alone.
func TestSweepLeavesLiveLeases(t *testing.T) {
	t.Parallel()
	f, _, j := runningBuild(t)
	before := f.snapshot(j.ID)
	if r := f.sweep(); r != (store.SweepReport{Ran: true}) {
		t.Fatalf("a sweep with a live lease: %+v", r)
	}
	f.unchanged("a sweep with a live lease", j.ID, before)
}

// A worker silent for WorkerOfflineAfter goes offline and its builds go
// back to the queue, each using an attempt.
func TestSweepRequeuesSilentWorkers(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	silent := f.register("silent", api.Capabilities{MaxConcurrentBuilds: 2})
	alive := f.register("alive", android(""))
	j1, j2 := f.running(silent), f.running(silent)
	j3 := f.running(alive)
	f.exec(`UPDATE workers SET last_seen_at = now() - $2::interval - interval '1 second' WHERE id = $1`,
		silent.WorkerID, f.s.Config().WorkerOfflineAfter)
	r := f.sweep()
	if r.WorkersOffline != 1 || r.Requeued != 2 || r.LeasesExpired != 0 {
		t.Fatalf("the sweep: %+v", r)
	}
	for _, j := range []*api.Job{j1, j2} {
		b := f.build(j.ID)
		if b.Status != api.StatusPending || b.Attempts != 1 || *b.AttemptHistory[0].ErrorCode != "worker_offline" {
			t.Fatalf("a silent worker's build: %+v", b)
		}
	}
	if b := f.build(j3.ID); b.Status != api.StatusBuilding {
		t.Fatalf("the live worker's build: %s", b.Status)
	}
	wk, err := f.s.GetWorker(f.ctx, silent.WorkerID)
	if err != nil || wk.Status != "offline" {
		t.Fatalf("the silent worker: %+v, %v", wk, err)
	}
	// It comes back within its token's life: online again, and the log
	// says so, so a replay agrees with the table.
	if _, err := f.s.AuthenticateWorker(f.ctx, f.tokens[silent.WorkerID], f.key); err != nil {
		t.Fatal(err)
	}
	if wk, err := f.s.GetWorker(f.ctx, silent.WorkerID); err != nil || wk.Status != "online" {
		t.Fatalf("the worker back: %+v, %v", wk, err)
	}
	if got, want := types(f.events(), silent.WorkerID), []string{"worker.registered", "worker.offline", "worker.online"}; !slices.Equal(got, want) {
		t.Fatalf("the worker's events %v, want %v", got, want)
	}
	if _, diffs, err := f.s.ReplayEvents(f.ctx); err != nil || len(diffs) != 0 {
		t.Fatalf("replay: %+v, %v", diffs, err)
	}
}

// A build that outlived its timeout by the grace period fails; one inside
// it runs on.
func TestSweepTimesOutBuilds(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	w := f.register("", api.Capabilities{MaxConcurrentBuilds: 2})
	f.submit(store.NewBuild{Timeout: time.Hour})
	over := f.claim(w)
	f.ack(w, over)
	f.submit(store.NewBuild{Timeout: time.Hour})
	within := f.claim(w)
	f.ack(w, within)
	grace := f.s.Config().TimeoutGrace
	f.exec(`UPDATE build_attempts SET started_at = now() - interval '1 hour' - $2::interval - interval '1 second' WHERE id = $1`, over.AttemptID, grace)
	f.exec(`UPDATE build_attempts SET started_at = now() - interval '1 hour' - $2::interval + interval '10 seconds' WHERE id = $1`, within.AttemptID, grace)
	if r := f.sweep(); r.TimedOut != 1 || r.Requeued != 0 {
		t.Fatalf("the sweep: %+v", r)
	}
	b := f.build(over.ID)
	if b.Status != api.StatusFailed || *b.ErrorCode != "timeout" || *b.ErrorMessage != "the build exceeded its timeout of 3600 seconds" ||
		b.AttemptHistory[0].Status != "timed_out" {
		t.Fatalf("the timed-out build: %+v", b)
	}
	if b := f.build(within.ID); b.Status != api.StatusBuilding {
		t.Fatalf("the build within its timeout: %s", b.Status)
	}
	_, err := f.s.Complete(f.ctx, w, store.Result{BuildID: over.ID, AttemptID: over.AttemptID, LeaseToken: over.LeaseToken, Success: true})
	wantErr(t, "a result after the timeout", err, store.ErrLeaseLost)
}

// One replica sweeps at a time: a sweep while another holds the lock does
// nothing.
func TestSweepTakesTurns(t *testing.T) {
	t.Parallel()
	f, _, j := runningBuild(t)
	f.expire(j.ID)
	tx, err := f.s.Pool().Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(f.ctx)                                                           //nolint:errcheck
	if _, err := tx.Exec(f.ctx, `SELECT pg_advisory_xact_lock(7201002)`); err != nil { // store's reaperLock
		t.Fatal(err)
	}
	if r, err := f.s.Sweep(f.ctx); err != nil || r != (store.SweepReport{}) {
		t.Fatalf("a sweep while another replica sweeps: %+v, %v", r, err)
	}
	if err := tx.Rollback(f.ctx); err != nil {
		t.Fatal(err)
	}
	if r := f.sweep(); r.LeasesExpired != 1 {
		t.Fatalf("the sweep after the lock was released: %+v", r)
	}
}
