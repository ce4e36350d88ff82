package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
)

// TestViewSaysWhetherTheVMWasAWarmSpare: build:view names the latest
// attempt's VM, a warm spare or not, and how long its VM phase took.
func TestViewSaysWhetherTheVMWasAWarmSpare(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.worker("android")
	id := jsonOf[[]map[string]any](t, e.mustRun(0, nil, "build", project(t, map[string]string{}), "--platform", "android", "--json", "--no-wait"))[0]["id"].(string)
	if r := e.mustRun(0, nil, "build:view", id); strings.Contains(r.stdout, "VM") {
		t.Fatalf("a queued build names a VM:\n%s", r.stdout)
	}
	j := w.claim()
	if _, err := w.c.Heartbeat(context.Background(), w.token, api.HeartbeatRequest{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken,
		VM: &api.AttemptVM{Spare: api.SpareHit, PhaseSeconds: 0.8}}); err != nil {
		t.Fatal(err)
	}
	if r := e.mustRun(0, nil, "build:view", id); !strings.Contains(r.stdout, "VM         a warm spare; the VM phase took 800ms") {
		t.Fatalf("build:view does not say the VM was a warm spare:\n%s", r.stdout)
	}
}
