package store_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

// types lists the event types of entity id, in log order.
func types(evs []event, id string) []string {
	var out []string
	for _, e := range evs {
		if e.ID == id {
			out = append(out, e.Type)
		}
	}
	return out
}

// Every transition writes its event with it; a refused transition writes
// none, and a transaction that fails writes neither its row nor its event.
func TestTransitionsWriteTheirEvents(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	w := f.register("w", android(""))
	j := f.running(w)
	if _, err := f.s.Heartbeat(f.ctx, w, api.HeartbeatRequest{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken, Phase: "gradle"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Cancel(f.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Complete(f.ctx, w, store.Result{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken, Success: true}); err != nil {
		t.Fatal(err)
	}
	retried := f.running(w)
	if _, err := f.s.Complete(f.ctx, w, store.Result{BuildID: retried.ID, AttemptID: retried.AttemptID, LeaseToken: retried.LeaseToken,
		Retryable: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.SetWorkerPaused(f.ctx, w.WorkerID, true); err != nil {
		t.Fatal(err)
	}
	dropped := f.submit(store.NewBuild{})
	if _, err := f.s.Cancel(f.ctx, dropped.ID); err != nil {
		t.Fatal(err)
	}
	evs := f.events()
	if got, want := types(evs, dropped.ID), []string{"build.submitted", "build.cancelled"}; !slices.Equal(got, want) {
		t.Fatalf("a build cancelled while pending: events %v, want %v", got, want)
	}
	if got, want := types(evs, j.ID), []string{"build.submitted", "build.assigned", "build.building", "build.cancel_requested", "build.cancelled"}; !slices.Equal(got, want) {
		t.Fatalf("a cancelled build's events %v, want %v", got, want)
	}
	if got, want := types(evs, retried.ID), []string{"build.submitted", "build.assigned", "build.building", "build.requeued"}; !slices.Equal(got, want) {
		t.Fatalf("a retried build's events %v, want %v", got, want)
	}
	if got, want := types(evs, w.WorkerID), []string{"worker.registered", "worker.paused"}; !slices.Equal(got, want) {
		t.Fatalf("the worker's events %v, want %v", got, want)
	}
	assigned := evs[slices.IndexFunc(evs, func(e event) bool { return e.Type == "build.assigned" })]
	if assigned.Payload["worker_id"] != w.WorkerID || assigned.Payload["attempt_id"] != j.AttemptID || assigned.Payload["status"] != "assigned" ||
		assigned.Payload["platform"] != api.PlatformAndroid {
		t.Fatalf("the assigned event's payload: %+v", assigned.Payload)
	}
	requeued := evs[slices.IndexFunc(evs, func(e event) bool { return e.Type == "build.requeued" })]
	if requeued.Type != "build.requeued" || requeued.Payload["status"] != "pending" || requeued.Payload["attempt_consumed"] != true {
		t.Fatalf("the requeue's event: %+v", requeued)
	}

	// Refused: no event.
	n := len(evs)
	_, err := f.s.Heartbeat(f.ctx, w, api.HeartbeatRequest{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken})
	wantErr(t, "a heartbeat of an ended attempt", err, store.ErrLeaseLost)
	// Rolled back: the build's file could not be stored.
	id := store.NewID()
	_, err = f.s.Submit(f.ctx, store.NewBuild{ID: id, Platform: api.PlatformIOS, SourceFormat: "zip", Commit: func() error { return errors.New("disk full") }})
	if err == nil {
		t.Fatal("a submit whose files failed to commit succeeded")
	}
	if evs := f.events(); len(evs) != n {
		t.Fatalf("refused and failed transitions wrote events: %+v", evs[n:])
	}
	_, err = f.s.GetBuild(f.ctx, id)
	wantErr(t, "the build whose files failed", err, store.ErrNotFound)
}

// sealedLog is a store whose log holds a worker's registration and one
// completed build, sealed.
func sealedLog(t *testing.T) (*fixture, int) {
	t.Helper()
	f := newStore(t)
	w := f.register("w", android(""))
	j := f.running(w)
	if _, err := f.s.Complete(f.ctx, w, store.Result{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken, Success: true}); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.s.Events(f.ctx, 0, 100); len(got) != 0 {
		t.Fatalf("unsealed events listed: %+v", got)
	}
	written := len(f.events())
	n, err := f.s.SealEvents(f.ctx)
	if err != nil || n != written {
		t.Fatalf("sealed %d of %d events: %v", n, written, err)
	}
	return f, written
}

// Sealing chains the events in order, once.
func TestSealChainsEvents(t *testing.T) {
	t.Parallel()
	f, written := sealedLog(t)
	if n, err := f.s.SealEvents(f.ctx); err != nil || n != 0 {
		t.Fatalf("sealing again: %d, %v", n, err)
	}
	evs, err := f.s.Events(f.ctx, 0, 100)
	if err != nil || len(evs) != written {
		t.Fatalf("events: %d, %v", len(evs), err)
	}
	for i, e := range evs {
		if e.Sequence != int64(i+1) || len(e.EventHash) != 64 || (i == 0) != (e.PreviousHash == "") ||
			(i > 0 && e.PreviousHash != evs[i-1].EventHash) || e.SourceControllerID != "test-controller" {
			t.Fatalf("event %d badly chained: %+v", i, e)
		}
	}
	if page, _ := f.s.Events(f.ctx, 2, 2); len(page) != 2 || page[0].Sequence != 3 {
		t.Fatalf("the page after sequence 2: %+v", page)
	}
	if head, err := f.s.LastSequence(f.ctx); err != nil || head != int64(written) {
		t.Fatalf("last sequence %d, %v", head, err)
	}
	if v, err := f.s.VerifyEvents(f.ctx); err != nil || !v.Valid || v.Checked != int64(written) {
		t.Fatalf("verify: %+v, %v", v, err)
	}
}

// Verify recomputes the chain and names the first sequence that was
// edited, unlinked or dropped.
func TestVerifyDetectsTampering(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		what, tamper, reason string
		broken               int64
	}{
		{"an edited payload", `UPDATE events SET payload = '{"platform":"android","status":"failed"}'
			WHERE ord = (SELECT ord FROM event_chain WHERE sequence = 3)`, "event_hash does not match the event's contents", 3},
		{"an edited type", `UPDATE events SET event_type = 'build.cancelled' WHERE ord = (SELECT ord FROM event_chain WHERE sequence = 3)`,
			"event_hash does not match the event's contents", 3},
		{"an edited timestamp", `UPDATE events SET created_at = created_at - interval '1 microsecond'
			WHERE ord = (SELECT ord FROM event_chain WHERE sequence = 3)`, "event_hash does not match the event's contents", 3},
		{"a broken link", `UPDATE event_chain SET previous_hash = repeat('0', 64) WHERE sequence = 3`,
			"previous_hash does not match the event before", 3},
		{"a dropped event", `DELETE FROM event_chain WHERE sequence = 3`, "sequence 4 follows 2", 4},
	} {
		t.Run(c.what, func(t *testing.T) {
			t.Parallel()
			f, _ := sealedLog(t)
			f.exec(c.tamper)
			v, err := f.s.VerifyEvents(f.ctx)
			if err != nil || v.Valid || v.FirstBrokenSequence == nil || *v.FirstBrokenSequence != c.broken || v.Checked != 2 || v.Reason != c.reason {
				t.Fatalf("verify after %s: %+v, %v", c.what, v, err)
			}
		})
	}
}

// Replaying the log (events replay --check) rebuilds every build's and
// worker's status; a table changed behind the log's back shows as a
// difference.
func TestReplayReproducesState(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	w := f.register("w", api.Capabilities{MaxConcurrentBuilds: 4})
	done := f.running(w)
	if _, err := f.s.Complete(f.ctx, w, store.Result{BuildID: done.ID, AttemptID: done.AttemptID, LeaseToken: done.LeaseToken, Success: true}); err != nil {
		t.Fatal(err)
	}
	expired := f.running(w)
	f.expire(expired.ID)
	f.sweep()
	cancelled := f.submit(store.NewBuild{})
	if _, err := f.s.Cancel(f.ctx, cancelled.ID); err != nil {
		t.Fatal(err)
	}
	f.submit(store.NewBuild{})
	f.running(w)
	if _, err := f.s.SetWorkerPaused(f.ctx, w.WorkerID, true); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.SealEvents(f.ctx); err != nil { // sealed or not, replay reads them all
		t.Fatal(err)
	}
	f.register("late", android(""))
	replayed, diffs, err := f.s.ReplayEvents(f.ctx)
	if err != nil || len(diffs) != 0 || replayed != int64(len(f.events())) {
		t.Fatalf("replay of %d events (%d written): %+v, %v", replayed, len(f.events()), diffs, err)
	}

	f.exec(`UPDATE builds SET status = 'completed' WHERE id = $1`, cancelled.ID)
	ghost := store.NewID()
	f.exec(`INSERT INTO builds (id, status, platform, profile, priority, token_hash, source_size, source_sha256, source_format, timeout_seconds, max_attempts)
		SELECT $1, 'pending', platform, profile, priority, sha256(token_hash), source_size, source_sha256, source_format, timeout_seconds, max_attempts
		FROM builds WHERE id = $2`, ghost, cancelled.ID)
	_, diffs, err = f.s.ReplayEvents(f.ctx)
	want := []store.Difference{
		{EntityType: "build", EntityID: cancelled.ID, FromEvents: "cancelled", InTable: "completed"},
		{EntityType: "build", EntityID: ghost, InTable: "pending"},
	}
	slices.SortFunc(want, func(a, b store.Difference) int { return strings.Compare(a.EntityID, b.EntityID) })
	if err != nil || !slices.Equal(diffs, want) {
		t.Fatalf("replay after editing the tables: %+v, %v; want %+v", diffs, err, want)
	}
}

// Sealing while writers commit: every event is sealed once, in an order in
// which each build's events follow its transitions, and the chain verifies.
func TestSealUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	const workers, builds = 6, 40
	for range builds {
		f.submit(store.NewBuild{})
	}
	stop := make(chan struct{})
	sealErr := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				sealErr <- nil
				return
			default:
			}
			if _, err := f.s.SealEvents(f.ctx); err != nil {
				sealErr <- err
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range workers {
		w := f.register("", api.Capabilities{MaxConcurrentBuilds: 64})
		wg.Go(func() {
			for {
				res, err := f.s.Poll(f.ctx, w)
				if err != nil || res.Job == nil {
					if err != nil {
						t.Error(err)
					}
					return
				}
				j := res.Job
				if _, err := f.s.Heartbeat(f.ctx, w, api.HeartbeatRequest{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken}); err != nil {
					t.Error(err)
					return
				}
				if _, err := f.s.Complete(f.ctx, w, store.Result{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken, Success: true}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-sealErr; err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.SealEvents(f.ctx); err != nil {
		t.Fatal(err)
	}
	v, err := f.s.VerifyEvents(f.ctx)
	written := len(f.events())
	if err != nil || !v.Valid || v.Checked != int64(written) {
		t.Fatalf("verify: %+v, %v (%d events written)", v, err, written)
	}
	evs, err := f.s.Events(f.ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	byBuild := map[string][]string{}
	for _, e := range evs {
		if e.EntityType == "build" {
			byBuild[e.EntityID] = append(byBuild[e.EntityID], e.EventType)
		}
	}
	want := []string{"build.submitted", "build.assigned", "build.building", "build.completed"}
	if len(byBuild) != builds {
		t.Fatalf("%d builds in the sealed log, want %d", len(byBuild), builds)
	}
	for id, got := range byBuild {
		if !slices.Equal(got, want) {
			t.Fatalf("build %s's sealed events %v, want %v", id, got, want)
		}
	}
}
