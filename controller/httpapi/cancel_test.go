package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/store"
)

// running submits a build and has a new worker claim and start it.
func (e *env) running(name string) (*workerSession, *api.Job) {
	e.t.Helper()
	w := e.register(name, api.Capabilities{Platforms: []string{"android"}, MaxConcurrentBuilds: 1})
	sub, _ := e.submit("android")
	job := w.poll(0)
	if job == nil || job.ID != sub.ID {
		e.t.Fatalf("worker got %+v, want %s", job, sub.ID)
	}
	if _, err := w.heartbeat(job); err != nil {
		e.t.Fatal(err)
	}
	return w, job
}

// TestCancelWatchWakesAtOnce: the worker's cancel watch answers when the
// developer cancels, woken by the change notification. The long polls'
// backstop and the watch's wait are an hour, so only the notification can
// answer it.
func TestCancelWatchWakesAtOnce(t *testing.T) {
	e := newEnv(t, func(_ *store.Config, l *httpapi.Limits) { l.PollBackstop, l.PollMaxWait = time.Hour, time.Hour })
	ctx := context.Background()
	w, job := e.running("mac")
	// Nothing pending: a zero wait answers at once with no cancel.
	got, err := e.worker.WatchCancel(ctx, w.token, job.ID, 0)
	if err != nil || got.CancelRequested || got.Status != api.StatusBuilding {
		t.Fatalf("watch without a cancel: %+v %v", got, err)
	}
	answer := make(chan api.CancelWatchResponse, 1)
	errs := make(chan error, 1)
	go func() {
		// The watch may wait an hour: only the cancel's notification can
		// answer it before this generous deadline.
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		r, err := e.worker.WatchCancel(wctx, w.token, job.ID, time.Hour)
		answer <- r
		errs <- err
	}()
	time.Sleep(200 * time.Millisecond) // let the watch park (were it not, its first read would see the cancel)
	if _, err := e.developer.Cancel(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	r := <-answer
	if err := <-errs; err != nil || !r.CancelRequested || r.Status != api.StatusBuilding {
		t.Fatalf("the watch answered %+v %v", r, err)
	}
	// Another worker may not watch this build; a malformed id is no build.
	other := e.register("other", api.Capabilities{Platforms: []string{"android"}, MaxConcurrentBuilds: 1})
	_, err = e.worker.WatchCancel(ctx, other.token, job.ID, 0)
	wantStatus(t, err, http.StatusNotFound)
	_, err = e.worker.WatchCancel(ctx, w.token, "../x", 0)
	wantStatus(t, err, http.StatusNotFound)
	// The developer's key is no worker token.
	_, err = e.worker.WatchCancel(ctx, "not-a-token", job.ID, 0)
	wantStatus(t, err, http.StatusUnauthorized)
}

// TestCancelRaces orders a cancel and a worker's result both ways.
func TestCancelRaces(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	// Cancel first, then the worker reports a success (it finished before
	// it heard): the cancel wins and the artifact is not kept.
	w, job := e.running("mac-1")
	if c, err := e.developer.Cancel(ctx, job.ID); err != nil || c.Status != api.StatusBuilding || !c.CancelRequested {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	res, err := w.complete(job, api.Result{Success: true, FileName: "app.apk", File: bytes.NewReader([]byte("APK"))})
	if err != nil || res.Status != api.StatusCancelled {
		t.Fatalf("a success after the cancel: %+v %v", res, err)
	}
	b := e.build(job.ID)
	if b.Status != api.StatusCancelled || len(b.Artifacts) != 0 || b.ErrorCode == nil || *b.ErrorCode != api.CodeCancelled {
		t.Fatalf("cancelled build: %+v", b)
	}
	// The repeat of the report gets the first answer.
	if res, err := w.complete(job, api.Result{Success: true}); err != nil || res.Status != api.StatusCancelled || !res.Duplicate {
		t.Fatalf("repeated report: %+v %v", res, err)
	}

	// Cancel first, then a retryable failure: cancelled, not queued again.
	w2, job2 := e.running("mac-2")
	if _, err := e.developer.Cancel(ctx, job2.ID); err != nil {
		t.Fatal(err)
	}
	if res, err := w2.complete(job2, api.Result{Retryable: true, ErrorCode: "vm_exited", ErrorMessage: "the VM stopped"}); err != nil ||
		res.Status != api.StatusCancelled || res.Requeued {
		t.Fatalf("a retryable failure after the cancel: %+v %v", res, err)
	}

	// The worker reports first, then the cancel: 409, "already completed".
	w3, job3 := e.running("mac-3")
	if res, err := w3.complete(job3, api.Result{Success: true}); err != nil || res.Status != api.StatusCompleted {
		t.Fatalf("complete: %+v %v", res, err)
	}
	_, err = e.developer.Cancel(ctx, job3.ID)
	wantStatus(t, err, http.StatusConflict)
	if !strings.Contains(err.Error(), "already completed") {
		t.Errorf("a late cancel says %q", err)
	}
	if b := e.build(job3.ID); b.Status != api.StatusCompleted {
		t.Errorf("a late cancel changed the build: %s", b.Status)
	}
}
