package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

// A paused worker reads as paused in `expo-build workers`, with why and
// how to resume it; resumed, it reads as its connection again.
func TestWorkersShowsPaused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.worker("android")
	admin := map[string]string{"EXPO_CONTROLLER_API_KEY": e.adminKey}
	list := jsonOf[api.WorkerList](t, e.mustRun(0, admin, "workers", "--json"))
	if len(list.Workers) != 1 {
		t.Fatalf("workers: %+v", list)
	}
	id := list.Workers[0].ID
	if r := e.mustRun(0, admin, "workers"); strings.Contains(r.stdout, "paused") {
		t.Fatalf("a running worker reads as paused:\n%s", r)
	}
	if err := e.admin.PauseWorker(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	r := e.mustRun(0, admin, "workers")
	for _, want := range []string{"paused (online)", "test-mac (" + id + ") is paused by an admin", "/api/workers/" + id + "/resume"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("workers does not say %q:\n%s", want, r)
		}
	}
	if ws := jsonOf[api.WorkerList](t, e.mustRun(0, admin, "workers", "--json")); !ws.Workers[0].Paused {
		t.Errorf("workers --json: not paused: %+v", ws.Workers[0])
	}
	if err := e.admin.ResumeWorker(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if r := e.mustRun(0, admin, "workers"); strings.Contains(r.stdout, "paused") {
		t.Errorf("a resumed worker reads as paused:\n%s", r)
	}
}

func TestWorkersTableNeedsAttention(t *testing.T) {
	now := time.Now()
	out := workersTable([]api.Worker{
		{ID: "w_1", Name: "mac-1", Status: "online", LastSeenAt: now, NeedsAttention: true, AttentionReason: "handed back 3 builds after fetching their signing credentials or secrets within 1h0m0s"},
		{ID: "w_2", Name: "mac-2", Status: "offline", Paused: true, NeedsAttention: true, LastSeenAt: now},
		{ID: "w_3", Name: "mac-3", Status: "online", LastSeenAt: now},
		{ID: "w_4", Name: "mac-4", Status: "online", LastSeenAt: now, OwnerPaused: true},
		{ID: "w_5", Name: "mac-5", Status: "online", LastSeenAt: now, HostPauseReason: "on battery"},
	}, now)
	for _, want := range []string{"online, needs attention", "mac-1 (w_1) needs attention: handed back 3 builds", "/api/workers/w_1/acknowledge",
		"paused (offline), needs attention", "mac-2 (w_2) is paused by an admin", "mac-2 (w_2) needs attention: no reason recorded",
		"mac-4 (w_4) is paused by the Mac's owner", "paused: on battery (online)", "mac-5 (w_5) is holding builds back by its owner's rules: on battery"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "w_3)") {
		t.Errorf("a worker with nothing to say has a note:\n%s", out)
	}
}
