package dashboard_test

import (
	"context"
	"testing"

	"github.com/freeagent-build/freeagent/api"
)

// TestPagesShowWarmSpares: the workers page shows each worker's warm spare
// as it last reported it (state, why, hits); the build page says of each
// attempt whether its VM was a warm spare and how long the VM phase took.
func TestPagesShowWarmSpares(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	ctx := context.Background()
	mac := f.register("spare-mac", api.Capabilities{Platforms: []string{"android"}})
	f.register("plain-mac", api.Capabilities{})
	spare := &api.WorkerSpare{State: api.SpareSuspended, Hits: 2, Misses: 1}
	if _, err := f.worker.ReportPause(ctx, mac.token, api.WorkerPauseReport{Spare: spare}); err != nil {
		t.Fatal(err)
	}
	admin := f.browser()
	admin.mustLogin(f.adminKey)
	wantContains(t, admin.get("/workers"), `<th scope="col">Warm spare</th>`,
		`<span class="status s-spare-suspended">suspended</span><br><small>2 of 3 builds on a spare</small>`, "none kept")
	spare.State, spare.Reason = api.SpareNone, "two builds run: both VM slots are in use"
	if _, err := f.worker.ReportPause(ctx, mac.token, api.WorkerPauseReport{Spare: spare}); err != nil {
		t.Fatal(err)
	}
	wantContains(t, admin.get("/workers"), `<span class="status s-spare-none">none</span><br><small>two builds run: both VM slots are in use</small>`)

	sub := f.submit("android")
	j := mac.poll()
	if j == nil || j.ID != sub.ID {
		t.Fatalf("claim: %+v", j)
	}
	if _, err := f.worker.Heartbeat(ctx, mac.token, api.HeartbeatRequest{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken,
		VM: &api.AttemptVM{Spare: api.SpareHit, PhaseSeconds: 0.8}}); err != nil {
		t.Fatal(err)
	}
	wantContains(t, admin.get("/builds/"+sub.ID), `<span class="vm">VM: a warm spare; the VM phase took 800ms</span>`)
}
