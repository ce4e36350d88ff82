//go:build unix

package agent_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/agent"
	"github.com/freeagent-build/freeagent/agent/hostsignals"
	"github.com/freeagent-build/freeagent/api"
)

// fakeClock is the schedule's clock, set by the test.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// TestHostRulesHoldBuildsBack: an agent whose host signals (the
// FREEAGENT_HOST_SIGNALS file) or schedule (a fake clock) say no takes no
// build and tells the controller why (GET /api/workers); when the
// condition clears it takes the waiting build within 10 s, with the
// production check interval (5 s). A build that runs when a pause begins
// goes on; "stop now" hands it back without costing an attempt.
func TestHostRulesHoldBuildsBack(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := startController(t)
	dev := &api.Client{BaseURL: c.url, APIKey: c.devKey}
	admin := &api.Client{BaseURL: c.url, APIKey: c.adminKey}
	signals := filepath.Join(t.TempDir(), "signals.json")
	write := func(json string) {
		t.Helper()
		if err := os.WriteFile(signals, []byte(json), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	schedule, err := hostsignals.ParseSchedule("Mon-Fri 22:00-07:00, Sat-Sun 00:00-24:00")
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Date(2026, 11, 23, 23, 0, 0, 0, time.Local)} // Monday night: open
	gate := &hostsignals.Gate{Reader: hostsignals.File{Path: signals}, Now: clock.Now, Log: c.log,
		Rules: hostsignals.Rules{NoBuildsOnBattery: true, IdleMinutes: hostsignals.IdleAuto, Schedule: schedule}}
	write(`{"on_battery": true, "battery_percent": 90}`)
	d := heldDriver{started: make(chan string, 1), release: make(chan struct{})}
	a, err := agent.New(agent.Config{ControllerURL: c.url, APIKey: c.workerKey, WorkDir: t.TempDir(),
		PollWait: time.Second, Host: gate}, d, c.log)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	// waitReason waits until the controller shows the worker held back
	// by the host for reason ("" when it takes builds).
	waitReason := func(reason string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		var last api.WorkerList
		for time.Now().Before(deadline) {
			last, err = admin.ListWorkers(ctx)
			if err == nil && len(last.Workers) == 1 && last.Workers[0].HostPauseReason == reason &&
				(reason == "" || last.Workers[0].PauseKind == api.PauseHost && last.Workers[0].PauseReason == reason) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("GET /api/workers never showed the host pause %q: %+v %v", reason, last, err)
	}
	submit := func() string {
		t.Helper()
		resp, err := dev.Submit(ctx, api.SubmitRequest{Platform: "android", Source: bytes.NewReader(fixture(t, "true"))})
		if err != nil {
			t.Fatal(err)
		}
		return resp.ID
	}
	// heldBack: the build is still waiting once the agent has checked the
	// host again after the controller learnt of the pause.
	heldBack := func(id, reason string) {
		t.Helper()
		waitReason(reason)
		if st := a.Status(); st.State != agent.StatePaused || st.HostPause != reason {
			t.Fatalf("the agent's status: %+v, want paused for %q", st, reason)
		}
		select {
		case name := <-d.started:
			t.Fatalf("a build started (%s) while the host said %q", name, reason)
		default:
		}
		if b, err := dev.GetBuild(ctx, id); err != nil || b.Status != api.StatusPending {
			t.Fatalf("build %+v, %v: want pending while %q", b, err, reason)
		}
	}
	// takenWithin10s: the condition cleared now; the waiting build reaches the driver within 10 s.
	takenWithin10s := func(what string) {
		t.Helper()
		cleared := time.Now()
		select {
		case <-d.started:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the waiting build was not taken within 10 s", what)
		}
		t.Logf("%s: taken %v after the condition cleared", what, time.Since(cleared).Round(time.Millisecond))
	}
	release := func(id string) {
		t.Helper()
		d.release <- struct{}{}
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if b, _ := dev.GetBuild(ctx, id); b.Status.Terminal() && len(a.Status().Builds) == 0 {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("build %s did not end", id)
	}

	// On battery.
	id := submit()
	heldBack(id, "on battery")
	write(`{"on_battery": false, "battery_percent": 90, "idle_seconds": 3600}`)
	takenWithin10s("battery")
	waitReason("")
	release(id)

	// The owner at the keyboard of a laptop (a battery: the idle rule is on by default).
	write(`{"battery_percent": 90, "idle_seconds": 20}`)
	waitReason("you are using this Mac")
	id = submit()
	heldBack(id, "you are using this Mac")
	write(`{"battery_percent": 90, "idle_seconds": 900}`)
	takenWithin10s("idle")
	release(id)

	// Outside the schedule: Tuesday noon.
	clock.set(time.Date(2026, 11, 24, 12, 0, 0, 0, time.Local))
	waitReason("outside schedule 22:00–07:00")
	id = submit()
	heldBack(id, "outside schedule 22:00–07:00")
	clock.set(time.Date(2026, 11, 24, 22, 0, 0, 0, time.Local))
	takenWithin10s("schedule")

	// A pause while building: the build goes on; "stop now" hands it back
	// at no cost, and the paused worker does not take it again.
	write(`{"on_battery": true}`)
	waitReason("on battery")
	if bs := a.Status().Builds; len(bs) != 1 || bs[0].ID != id {
		t.Fatalf("the running build did not go on under the pause: %+v", bs)
	}
	a.StopBuilds()
	deadline := time.Now().Add(20 * time.Second)
	var b api.Build
	for time.Now().Before(deadline) {
		if b, err = dev.GetBuild(ctx, id); err == nil && b.Status == api.StatusPending {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if b.Status != api.StatusPending || b.Attempts != 0 {
		t.Fatalf("after stop now: %+v, want pending with no attempt used", b)
	}
	if bs := a.Status().Builds; len(bs) != 0 {
		t.Fatalf("still running after stop now: %+v", bs)
	}
	write(`{}`)
	takenWithin10s("after stop now")
	release(id)

	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}
