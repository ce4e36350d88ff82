package httpapi_test

import (
	"context"
	"slices"
	"testing"

	"github.com/freeagent-build/freeagent/api"
)

// seal seals every final event, as the background sealer would.
func (e *env) seal() {
	e.t.Helper()
	if _, err := e.store.SealEvents(context.Background()); err != nil {
		e.t.Fatalf("seal events: %v", err)
	}
}

// allEvents pages through GET /api/events.
func (e *env) allEvents() []api.Event {
	e.t.Helper()
	var out []api.Event
	var since int64
	for {
		page, err := e.admin.Events(context.Background(), since, 1000)
		if err != nil {
			e.t.Fatalf("list events: %v", err)
		}
		out = append(out, page.Events...)
		if len(page.Events) < 1000 {
			return out
		}
		since = page.NextSince
	}
}

// eventTypesOf returns the event types of one entity, in chain order.
func eventTypesOf(evs []api.Event, id string) []string {
	var types []string
	for _, ev := range evs {
		if ev.EntityID == id {
			types = append(types, ev.EventType)
		}
	}
	return types
}

// requireConsistentLog checks the chain and that replaying it gives the tables' states.
func (e *env) requireConsistentLog() {
	e.t.Helper()
	e.seal()
	v, err := e.admin.VerifyEvents(context.Background())
	if err != nil || !v.Valid {
		e.t.Fatalf("verify: %+v %v", v, err)
	}
	replayed, diffs, err := e.store.ReplayEvents(context.Background())
	if err != nil || len(diffs) > 0 || replayed == 0 {
		e.t.Fatalf("replay of %d events: %v, differences %+v", replayed, err, diffs)
	}
}

// The audit log over HTTP: only sealed events are listed, in chain order,
// a page at a time, to admins only, and verify reports an edited row. What
// each transition writes, sealing and tamper detection in depth are
// controller/store's tests (events_test.go).
func TestAuditLogRecordsLifecycleAndDetectsTampering(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w := e.register("w", api.Capabilities{})
	done, _ := e.submit("ios")
	job := w.poll(0)
	w.heartbeat(job)
	if _, err := w.complete(job, api.Result{Success: true}); err != nil {
		t.Fatal(err)
	}
	// Not listed before it is sealed, listed in order after. (The
	// controller's own start may be sealed already: it seals as it starts.)
	if evs := slices.DeleteFunc(e.allEvents(), func(ev api.Event) bool { return ev.EntityType == "controller" }); len(evs) != 0 {
		t.Fatalf("unsealed events listed: %+v", evs)
	}
	e.requireConsistentLog()
	evs := e.allEvents()
	for i, ev := range evs {
		if ev.Sequence != int64(i+1) || ev.EventHash == "" || (i > 0 && ev.PreviousHash != evs[i-1].EventHash) {
			t.Fatalf("event %d badly chained: %+v", i, ev)
		}
	}
	if got, want := eventTypesOf(evs, done.ID), []string{"build.submitted", "build.assigned", "build.building", "build.completed"}; !slices.Equal(got, want) {
		t.Fatalf("completed build's events %v, want %v", got, want)
	}
	// Paging: since skips what was read.
	page, err := e.admin.Events(ctx, 2, 2)
	if err != nil || len(page.Events) != 2 || page.Events[0].Sequence != 3 || page.NextSince != 4 {
		t.Fatalf("page after 2: %+v %v", page, err)
	}
	// Developers cannot read the audit log.
	if _, err := e.developer.Events(ctx, 0, 10); api.StatusOf(err) != 403 {
		t.Fatalf("developer reading events: %v", err)
	}

	// Edit one event's payload behind the controller's back.
	const tampered = 3
	if _, err := e.store.Pool().Exec(ctx, `UPDATE events SET payload = '{"platform":"ios","status":"completed"}'
		WHERE ord = (SELECT ord FROM event_chain WHERE sequence = $1)`, tampered); err != nil {
		t.Fatal(err)
	}
	v, err := e.admin.VerifyEvents(ctx)
	if err != nil || v.Valid || v.FirstBrokenSequence == nil || *v.FirstBrokenSequence != tampered || v.Checked != tampered-1 {
		t.Fatalf("verify after tampering with sequence %d: %+v %v", tampered, v, err)
	}
}
