package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/agent/hostcheck"
	"github.com/freeagent-build/freeagent/agent/hostsignals"
	"github.com/freeagent-build/freeagent/api"
)

// TestMenuBarShowsWhyTheHostWaits runs `freeagent app` with its host
// signals from a file (FREEAGENT_HOST_SIGNALS) and a schedule closed now:
// the menu bar names each reason the owner's rules hold builds back, the
// controller shows it (GET /api/workers), a build waits meanwhile, and
// Accept Builds stays the owner's own switch.
func TestMenuBarShowsWhyTheHostWaits(t *testing.T) {
	url, workerKey, devKey, adminKey := controllerWithAdmin(t)
	dev := &api.Client{BaseURL: url, APIKey: devKey}
	admin := &api.Client{BaseURL: url, APIKey: adminKey}
	signals := filepath.Join(t.TempDir(), "signals.json")
	write := func(json string) {
		t.Helper()
		if err := os.WriteFile(signals, []byte(json), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"on_battery": true, "battery_percent": 64}`)
	// A window two hours from now, every day: closed now (the schedule's
	// own clock is faked in the agent's and hostsignals' tests).
	from := time.Now().Add(2 * time.Hour)
	to := from.Add(time.Hour)
	window := fmt.Sprintf("%02d:%02d–%02d:%02d", from.Hour(), from.Minute(), to.Hour(), to.Minute())
	a := startApp(t, []string{"--controller-url", url, "--min-free-gb", "20", "--host-check-interval", "200ms",
		"--schedule", "Daily " + window}, "FREEAGENT_API_KEY="+workerKey, "FREEAGENT_HOST_SIGNALS="+signals)
	m := a.menu

	workerShows := func(reason string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		var last api.WorkerList
		var err error
		for time.Now().Before(deadline) {
			if last, err = admin.ListWorkers(context.Background()); err == nil && len(last.Workers) == 1 &&
				last.Workers[0].PauseKind == api.PauseHost && last.Workers[0].PauseReason == reason {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("GET /api/workers never showed %q: %+v %v", reason, last, err)
	}
	for _, c := range []struct{ signals, reason string }{
		{`{"on_battery": true, "battery_percent": 64}`, "on battery"},
		{`{"battery_percent": 64, "idle_seconds": 4}`, "you are using this Mac"},
		{`{"thermal": "serious"}`, "thermal: serious"},
		{`{"free_disk_bytes": 13421772800}`, "disk below 20 GB (12.5 GB free)"},
		{`{}`, "outside schedule " + window},
	} {
		write(c.signals)
		m.waitStatus(c.reason, statusIs("Paused: "+c.reason))
		workerShows(c.reason)
		if acc := m.item("Accept Builds"); acc.Toggle != 1 || !acc.Enabled {
			t.Fatalf("%s: the host's pause unticked Accept Builds: %+v", c.reason, acc)
		}
	}
	b, err := dev.Submit(context.Background(), api.SubmitRequest{Platform: "android", Source: bytes.NewReader(projectWaitingFor(t, filepath.Join(a.dir, "never")))})
	if err != nil {
		t.Fatal(err)
	}
	write(`{"on_battery": true}`)
	m.waitStatus("on battery again", statusIs("Paused: on battery"))
	if got, _ := dev.GetBuild(context.Background(), b.ID); got.Status != api.StatusPending {
		t.Fatalf("a worker held back by its host took a build: %+v", got)
	}
	// The owner's pause is its own: shown over the host's, and on the controller as the owner's.
	m.click("Accept Builds")
	m.waitStatus("paused by the owner", statusIs("Paused: not accepting builds"))
	deadline := time.Now().Add(20 * time.Second)
	for {
		list, err := admin.ListWorkers(context.Background())
		if err == nil && len(list.Workers) == 1 && list.Workers[0].OwnerPaused && list.Workers[0].PauseKind == api.PauseOwner &&
			list.Workers[0].HostPauseReason == "on battery" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the owner's pause never reached the controller: %+v %v", list, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDoctorShowsWhyBuildsWait: `freeagent doctor` names what holds builds
// back, with the readings, as a warning (the worker resumes by itself).
func TestDoctorShowsWhyBuildsWait(t *testing.T) {
	url, workerKey := controller(t)
	signals := filepath.Join(t.TempDir(), "signals.json")
	os.WriteFile(signals, []byte(`{"on_battery": true, "battery_percent": 64, "idle_seconds": 30, "thermal": "fair"}`), 0o600)
	t.Setenv("FREEAGENT_API_KEY", workerKey)
	t.Setenv("FREEAGENT_HOST_SIGNALS", signals)
	var stdout, stderr bytes.Buffer
	code := run([]string{"doctor", "--data-dir", t.TempDir(), "--controller-url", url, "--vm-driver", "local", "--platforms", "android", "--min-free-gb", "0"},
		strings.NewReader(""), &stdout, &stderr)
	want := "! host_rules  builds wait: on battery; you are using this Mac (on battery at 64%, last input 30s ago, thermal fair)"
	if code != 0 || !strings.Contains(stdout.String(), want) || !strings.Contains(stdout.String(), "builds start by themselves") {
		t.Fatalf("doctor: %d\n%s%s\nwant the line %q", code, stdout.String(), stderr.String(), want)
	}
	os.WriteFile(signals, []byte(`{"idle_seconds": 3600}`), 0o600)
	stdout.Reset()
	if code := run([]string{"doctor", "--data-dir", t.TempDir(), "--controller-url", url, "--vm-driver", "local", "--platforms", "android", "--min-free-gb", "0"},
		strings.NewReader(""), &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "✓ host_rules  builds may start (on mains power, last input 1h0m0s ago)") {
		t.Fatalf("doctor, nothing holding builds back: %d\n%s", code, stdout.String())
	}
}

// The rules Preferences writes to agent.conf are the worker's rules; a
// bad one stops the worker with the setting named.
func TestRulesFromAgentConf(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "agent.conf"), []byte("schedule = Mon-Fri 22:00-07:00\nidle-minutes = 15\npause-thermal = critical\n"+
		"build-on-battery = true\nmin-battery-percent = 40\nmin-free-gb = 20\n"), 0o600)
	cfg, err := loadConfig("doctor", []string{"--data-dir", dir}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cfg.hostRules()
	if err != nil || r.NoBuildsOnBattery || r.MinBatteryPercent != 40 || r.IdleMinutes != 15 || r.PauseThermal != hostsignals.ThermalCritical ||
		r.MinFreeBytes != 20<<30 || r.Schedule.String() != "Mon-Fri 22:00-07:00" {
		t.Fatalf("rules %+v, %v", r, err)
	}
	defaults, err := loadConfig("doctor", []string{"--data-dir", t.TempDir()}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := defaults.hostRules(); err != nil || !r.NoBuildsOnBattery || r.IdleMinutes != hostsignals.IdleAuto || r.PauseThermal != hostsignals.ThermalSerious ||
		!r.Schedule.IsZero() || r.MinFreeBytes != hostcheck.DefaultMinFree {
		t.Fatalf("default rules %+v, %v", r, err)
	}
	os.WriteFile(filepath.Join(dir, "agent.conf"), []byte("schedule = weekdays\n"), 0o600)
	if _, err := loadConfig("doctor", []string{"--data-dir", dir}, io.Discard); err == nil || !strings.Contains(err.Error(), "--schedule") {
		t.Fatalf("a bad schedule: %v", err)
	}
}
