package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
)

// The worker's own pauses (its owner's, its host's) and the admin's are
// three fields: each is set and cleared by who set it, and the summary
// names the first that holds the worker.
func TestPausesAreSeparate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w := e.register("laptop", api.Capabilities{})
	get := func() api.Worker { return e.listedWorker(w.id) }
	report := func(r api.WorkerPauseReport) {
		t.Helper()
		if _, err := e.worker.ReportPause(ctx, w.token, r); err != nil {
			t.Fatal(err)
		}
	}
	if wk := get(); wk.PauseKind != "" || wk.PauseReason != "" {
		t.Fatalf("a fresh worker is paused: %+v", wk)
	}
	report(api.WorkerPauseReport{HostReason: "on battery"})
	if wk := get(); wk.PauseKind != api.PauseHost || wk.PauseReason != "on battery" || wk.HostPauseReason != "on battery" || wk.Paused || wk.OwnerPaused {
		t.Fatalf("host pause: %+v", wk)
	}
	if err := e.admin.PauseWorker(ctx, w.id); err != nil {
		t.Fatal(err)
	}
	report(api.WorkerPauseReport{OwnerPaused: true, HostReason: "on battery"})
	if wk := get(); wk.PauseKind != api.PauseAdmin || !wk.Paused || !wk.OwnerPaused || wk.HostPauseReason != "on battery" {
		t.Fatalf("all three: %+v", wk)
	}
	// The worker's report does not clear the admin's pause, nor the admin's resume the worker's.
	report(api.WorkerPauseReport{HostReason: "on battery"})
	if err := e.admin.ResumeWorker(ctx, w.id); err != nil {
		t.Fatal(err)
	}
	if wk := get(); wk.Paused || wk.OwnerPaused || wk.PauseKind != api.PauseHost {
		t.Fatalf("after the admin's resume: %+v", wk)
	}
	report(api.WorkerPauseReport{})
	if wk := get(); wk.PauseKind != "" || wk.HostPauseReason != "" {
		t.Fatalf("cleared: %+v", wk)
	}

	// Bounded, text only, and the worker's token only.
	_, err := e.worker.ReportPause(ctx, w.token, api.WorkerPauseReport{HostReason: strings.Repeat("x", api.MaxHostPauseReason+1)})
	if api.StatusOf(err) != http.StatusBadRequest && api.StatusOf(err) != http.StatusUnprocessableEntity {
		t.Fatalf("an overlong reason: %v", err)
	}
	if _, err := e.worker.ReportPause(ctx, "fa_wt_not-a-token", api.WorkerPauseReport{}); api.StatusOf(err) != http.StatusUnauthorized {
		t.Fatalf("a bad token: %v", err)
	}
}
