package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

// TestWarmSparesAreVisible: a worker's warm spare, reported with its
// pauses, is in GET /api/workers; an attempt's VM, reported with its
// heartbeat, is in its build's attempt history (the first report kept) and
// counted once in the metrics, a hit and a miss.
func TestWarmSparesAreVisible(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w := e.register("mac", api.Capabilities{Platforms: []string{"android"}, MaxConcurrentBuilds: 2})
	spare := func() *api.WorkerSpare { return e.listedWorker(w.id).Spare }
	report := func(sp *api.WorkerSpare) error {
		_, err := e.worker.ReportPause(ctx, w.token, api.WorkerPauseReport{Spare: sp})
		return err
	}
	if sp := spare(); sp != nil {
		t.Fatalf("a worker that reported no spare shows one: %+v", sp)
	}
	since := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)
	if err := report(&api.WorkerSpare{State: api.SpareSuspended, Since: since, Hits: 3, Misses: 1}); err != nil {
		t.Fatal(err)
	}
	if sp := spare(); sp == nil || sp.State != api.SpareSuspended || !sp.Since.Equal(since) || sp.Hits != 3 || sp.Misses != 1 || sp.Reason != "" {
		t.Fatalf("the suspended spare reported: %+v", sp)
	}
	if err := report(&api.WorkerSpare{State: api.SpareFailed, Reason: "tart clone: the template is gone", Hits: 3, Misses: 2}); err != nil {
		t.Fatal(err)
	}
	if sp := spare(); sp == nil || sp.State != api.SpareFailed || sp.Reason != "tart clone: the template is gone" || sp.Misses != 2 {
		t.Fatalf("the failed spare reported: %+v", sp)
	}
	if err := report(nil); err != nil {
		t.Fatal(err)
	}
	if sp := spare(); sp != nil {
		t.Fatalf("a worker that keeps no spare any more shows one: %+v", sp)
	}
	wantStatus(t, report(&api.WorkerSpare{State: "asleep"}), http.StatusUnprocessableEntity)
	wantStatus(t, report(&api.WorkerSpare{State: api.SpareReady, Hits: -1}), http.StatusUnprocessableEntity)

	admin := map[string]string{api.HeaderAPIKey: e.adminKey}
	m, _ := e.scrape(admin)
	for _, result := range []string{api.SpareHit, api.SpareMiss} {
		if v := metricValue(m, "freeagent_warm_spare_claims_total", "result", result); v != 0 {
			t.Fatalf("spare %ss before any build: %v", result, v)
		}
	}
	heartbeat := func(j *api.Job, vm *api.AttemptVM) error {
		_, err := e.worker.Heartbeat(ctx, w.token, api.HeartbeatRequest{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken, VM: vm})
		return err
	}
	e.submit("android")
	e.submit("android")
	onSpare := w.poll(0)
	if onSpare == nil {
		t.Fatal("no claim")
	}
	// The acknowledgement, before the VM is ready (and before the next
	// poll, which would hand the unacknowledged job out again).
	if err := heartbeat(onSpare, nil); err != nil {
		t.Fatal(err)
	}
	onFresh := w.poll(0)
	if onFresh == nil || onFresh.ID == onSpare.ID {
		t.Fatalf("second claim: %+v", onFresh)
	}
	for _, hb := range []struct {
		j  *api.Job
		vm *api.AttemptVM
	}{
		{onSpare, &api.AttemptVM{Spare: api.SpareHit, PhaseSeconds: 0.8}},
		{onSpare, &api.AttemptVM{Spare: api.SpareMiss, PhaseSeconds: 41}}, // not what the first said: ignored
		{onFresh, &api.AttemptVM{Spare: api.SpareMiss, PhaseSeconds: 40.5}},
		{onFresh, &api.AttemptVM{Spare: api.SpareMiss, PhaseSeconds: 40.5}}, // repeated: counted once
	} {
		if err := heartbeat(hb.j, hb.vm); err != nil {
			t.Fatal(err)
		}
	}
	for j, want := range map[*api.Job]api.AttemptVM{onSpare: {Spare: api.SpareHit, PhaseSeconds: 0.8}, onFresh: {Spare: api.SpareMiss, PhaseSeconds: 40.5}} {
		b := e.build(j.ID)
		if len(b.AttemptHistory) != 1 || b.AttemptHistory[0].VM == nil || *b.AttemptHistory[0].VM != want {
			t.Fatalf("build %s's attempt: %+v, want VM %+v", j.ID, b.AttemptHistory, want)
		}
	}
	m, _ = e.scrape(admin)
	for series, want := range map[[2]string]float64{
		{"freeagent_warm_spare_claims_total", api.SpareHit}:  1,
		{"freeagent_warm_spare_claims_total", api.SpareMiss}: 1,
	} {
		if v := metricValue(m, series[0], "result", series[1]); v != want {
			t.Fatalf("%s{result=%q}: %v, want %v", series[0], series[1], v, want)
		}
	}
	for vm, sum := range map[string]float64{"warm_spare": 0.8, "fresh": 40.5} {
		if v := metricValue(m, "freeagent_vm_phase_duration_seconds", "vm", vm); v != 1 {
			t.Fatalf("VM phases of a %s VM observed: %v, want 1", vm, v)
		}
		for _, s := range m["freeagent_vm_phase_duration_seconds"].GetMetric() {
			if s.GetLabel()[0].GetValue() == vm && s.GetHistogram().GetSampleSum() != sum {
				t.Fatalf("the %s VM phase: %v s, want %v", vm, s.GetHistogram().GetSampleSum(), sum)
			}
		}
	}

	// A report no agent sends is refused, naming the field.
	wantStatus(t, heartbeat(onFresh, &api.AttemptVM{Spare: "maybe"}), http.StatusUnprocessableEntity)
	wantStatus(t, heartbeat(onFresh, &api.AttemptVM{PhaseSeconds: -1}), http.StatusUnprocessableEntity)
	wantStatus(t, heartbeat(onFresh, &api.AttemptVM{PhaseSeconds: 2 * api.MaxVMPhase.Seconds()}), http.StatusUnprocessableEntity)
}
