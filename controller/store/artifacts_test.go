package store_test

import (
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

// upload records an artifact for attempt j as its VM would, and reports
// whether the file was moved into place.
func (f *fixture) upload(j *api.Job, name string) (committed bool, err error) {
	f.t.Helper()
	err = f.s.AddArtifact(f.ctx, j.ID, j.AttemptID, &store.PendingArtifact{Name: name, Size: int64(len(name)), SHA256: cacheKey(name),
		Commit: func() error { committed = true; return nil }}, 0)
	return committed, err
}

// Artifacts belong to their attempt: an abandoned attempt's never show on
// the build, a live attempt's show once it ends the build, and an ended
// attempt cannot add any.
func TestArtifactsBelongToTheirAttempt(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	w := f.register("", android(""))
	first := f.running(w)
	if ok, err := f.upload(first, "app.apk"); err != nil || !ok {
		t.Fatalf("the first attempt's upload: %v (committed %v)", err, ok)
	}
	if b := f.build(first.ID); len(b.Artifacts) != 0 {
		t.Fatalf("a running attempt's artifact shows: %+v", b.Artifacts)
	}
	_, err := f.s.Artifact(f.ctx, first.ID, "app.apk")
	wantErr(t, "a running attempt's artifact", err, store.ErrNotFound)

	// The first attempt is abandoned (its lease runs out); the second ends the build.
	f.expire(first.ID)
	f.sweep()
	f.exec(`UPDATE builds SET run_after = now() WHERE id = $1`, first.ID)
	second := f.claim(w)
	f.ack(w, second)
	if ok, err := f.upload(first, "late.apk"); err == nil || ok {
		t.Fatalf("the abandoned attempt uploaded after its end: %v (committed %v)", err, ok)
	} else {
		wantErr(t, "the abandoned attempt's upload", err, store.ErrLeaseLost)
	}
	if ok, err := f.upload(second, "app-debug.apk"); err != nil || !ok {
		t.Fatalf("the second attempt's upload: %v", err)
	}
	if _, err := f.s.Complete(f.ctx, w, store.Result{BuildID: second.ID, AttemptID: second.AttemptID, LeaseToken: second.LeaseToken, Success: true}); err != nil {
		t.Fatal(err)
	}
	b := f.build(first.ID)
	if len(b.Artifacts) != 1 || b.Artifacts[0].Name != "app-debug.apk" {
		t.Fatalf("the build shows %+v, want only the second attempt's artifact", b.Artifacts)
	}
	_, err = f.s.Artifact(f.ctx, first.ID, "app.apk")
	wantErr(t, "the abandoned attempt's artifact", err, store.ErrNotFound)
	a, err := f.s.Artifact(f.ctx, first.ID, "app-debug.apk")
	if err != nil || a.AttemptID != second.AttemptID || a.SHA256 != cacheKey("app-debug.apk") {
		t.Fatalf("the build's artifact: %+v, %v", a, err)
	}
	list, err := f.s.ListBuilds(f.ctx, store.ListFilter{Scope: store.Scope{All: true}})
	if err != nil || len(list.Builds) != 1 || len(list.Builds[0].Artifacts) != 1 || list.Builds[0].Artifacts[0].Name != "app-debug.apk" {
		t.Fatalf("the build list's artifacts: %+v, %v", list.Builds, err)
	}
	// A repeated upload whose answer was lost still finds its own record.
	if a, err := f.s.AttemptArtifact(f.ctx, first.ID, first.AttemptID, "app.apk"); err != nil || a.Name != "app.apk" {
		t.Fatalf("the first attempt's own record: %+v, %v", a, err)
	}
}

// An attempt holds at most maxPerAttempt artifacts; uploading a name again
// replaces it.
func TestArtifactsPerAttemptAreBounded(t *testing.T) {
	t.Parallel()
	f, _, j := runningBuild(t)
	add := func(name string) error {
		return f.s.AddArtifact(f.ctx, j.ID, j.AttemptID, &store.PendingArtifact{Name: name, SHA256: cacheKey(name), Commit: func() error { return nil }}, 2)
	}
	for _, name := range []string{"a.apk", "b.apk", "a.apk"} {
		if err := add(name); err != nil {
			t.Fatalf("upload %s: %v", name, err)
		}
	}
	wantErr(t, "a third artifact", add("c.apk"), store.ErrTooLarge)
}
