package menu

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/agent"
	"github.com/freeagent-build/freeagent/agent/hostcheck"
	"github.com/freeagent-build/freeagent/api"
)

var now = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func find(t *testing.T, items []Item, id string) Item {
	t.Helper()
	for _, it := range items {
		if it.ID == id {
			return it
		}
	}
	t.Fatalf("no item %q in %+v", id, items)
	return Item{}
}

func online(builds ...agent.BuildStatus) Input {
	return Input{Configured: true, ControllerURL: "https://builds.example.com", Now: now,
		Status: agent.Status{State: agent.StateOnline, WorkerID: "w1", Builds: builds}}
}

func TestStatusLineForEveryState(t *testing.T) {
	oneBuild := agent.BuildStatus{ID: "b_0123456789abcdef", Platform: "ios", Phase: "building", Progress: 40, StartedAt: now.Add(-185 * time.Second)}
	other := agent.BuildStatus{ID: "b2", Platform: "android", StartedAt: now.Add(-5 * time.Second)}
	tartMissing := []hostcheck.Result{{ID: hostcheck.IDController, Severity: hostcheck.OK, Message: "fine"},
		{ID: hostcheck.IDTart, Severity: hostcheck.Fail, Message: "Tart is not installed", Fix: "brew install cirruslabs/cli/tart"},
		{ID: hostcheck.IDDisk, Severity: hostcheck.Fail, Message: "low disk space", Fix: "free space"}}
	with := func(in Input, f func(*Input)) Input { f(&in); return in }
	cases := []struct {
		name   string
		in     Input
		status string
		fix    string // "" → the fix line is hidden
	}{
		{"needs setup", Input{Now: now}, "Needs Setup: enter the controller and API key", "Open Preferences… to set them up"},
		{"connecting", with(online(), func(in *Input) { in.Status.State = agent.StateConnecting }), "Connecting to the controller…", ""},
		{"idle", online(), "Online, Idle", ""},
		{"idle, caches unused", with(online(), func(in *Input) { in.Status.Cache = &api.WorkerCache{} }), "Online, Idle", ""},
		{"idle, warm caches", with(online(), func(in *Input) { in.Status.Cache = &api.WorkerCache{Bytes: 48 << 20, Hits: 3, Misses: 1} }),
			"Online, Idle · cache 48.0 MiB, 75% warm", ""},
		{"idle, spare ready", with(online(), func(in *Input) { in.Status.Spare = agent.SpareStatus{State: agent.SpareReady} }), "Online, Idle · spare VM ready", ""},
		{"idle, spare suspended", with(online(), func(in *Input) { in.Status.Spare = agent.SpareStatus{State: agent.SpareSuspended} }), "Online, Idle · spare VM suspended", ""},
		{"building one", online(oneBuild), "Building b_0123456789… · building 40% · 3m05s", ""},
		{"building two", online(oneBuild, other), "Building 2 builds", ""},
		{"paused", with(online(), func(in *Input) { in.Status.State = agent.StatePaused }), "Paused: not accepting builds", ""},
		{"paused, finishing", with(online(other), func(in *Input) { in.Status.State = agent.StatePaused }), "Paused: not accepting builds (1 build finishing)", ""},
		{"draining", with(online(oneBuild, other), func(in *Input) { in.Status.State = agent.StateDraining }), "Draining: finishing 2 builds", ""},
		{"quitting", with(online(), func(in *Input) { in.Quitting = true }), "Draining: no new builds", ""},
		{"offline", with(online(), func(in *Input) {
			in.Status.State, in.Status.Reason = agent.StateOffline, "controller unreachable: connection refused"
		}), "Offline: controller unreachable: connection refused", ""},
		{"tart missing", with(online(), func(in *Input) { in.Checks = tartMissing }), "Needs Attention: Tart is not installed", "Fix: brew install cirruslabs/cli/tart"},
		{"key refused", with(online(), func(in *Input) {
			in.Status.State, in.Status.Reason = agent.StateNeedsAttention, "the API key is not allowed to act as a worker: use a worker or admin key"
		}), "Needs Attention: the API key is not allowed to act as a worker", "Fix: use a worker or admin key"},
		{"stopped", with(online(), func(in *Input) { in.Status.State = agent.StateStopped }), "Stopped", ""},
	}
	for _, tc := range cases {
		items := Build(tc.in)
		st, fix := items[0], items[1]
		if st.ID != IDStatus || st.Title != tc.status {
			t.Errorf("%s: status %q, want %q", tc.name, st.Title, tc.status)
		}
		if (tc.fix == "") != fix.Hidden || (tc.fix != "" && fix.Title != tc.fix) {
			t.Errorf("%s: fix %+v, want %q", tc.name, fix, tc.fix)
		}
	}
	// The fix line opens Preferences when the settings are the problem.
	if fix := Build(with(online(), func(in *Input) { in.Checks = tartMissing }))[1]; fix.Enabled {
		t.Errorf("Tart's fix is not in Preferences, yet the line is clickable: %+v", fix)
	}
	unreachable := []hostcheck.Result{{ID: hostcheck.IDController, Severity: hostcheck.Fail, Message: "controller unreachable", Fix: "check the URL in Preferences…"}}
	if fix := Build(with(online(), func(in *Input) { in.Checks = unreachable }))[1]; !fix.Enabled {
		t.Errorf("a controller problem's fix line does not open Preferences: %+v", fix)
	}
	// Every failing check is in the tooltip, with its fix.
	st := Build(with(online(), func(in *Input) { in.Checks = tartMissing }))[0]
	if !strings.Contains(st.Tooltip, "low disk space — free space") || strings.Contains(st.Tooltip, "fine") {
		t.Errorf("tooltip: %q", st.Tooltip)
	}
}

func TestLongLinesAreShortenedWithTheWholeTextInTheTooltip(t *testing.T) {
	in := online()
	in.Status.State = agent.StateOffline
	in.Status.Reason = `controller unreachable: Get "https://builds.example.com/api/workers/poll?wait=25": dial tcp 10.0.0.1:443: connect: connection refused (retrying in 40s)`
	st := Build(in)[0]
	if n := len([]rune(st.Title)); n != 80 || !strings.HasSuffix(st.Title, "…") || !strings.HasPrefix(st.Title, "Offline: controller unreachable") {
		t.Fatalf("title (%d): %q", n, st.Title)
	}
	if st.Tooltip != "Offline: "+in.Status.Reason {
		t.Fatalf("tooltip: %q", st.Tooltip)
	}
}

func TestOneSubmenuEntryPerRunningBuild(t *testing.T) {
	a := agent.BuildStatus{ID: "b1", Platform: "ios", Phase: "building", StartedAt: now.Add(-2 * time.Hour)}
	b := agent.BuildStatus{ID: "b2", StartedAt: now.Add(-7 * time.Second)}
	st := Build(online(a, b))[0]
	if len(st.Children) != 2 {
		t.Fatalf("children: %+v", st.Children)
	}
	if c := st.Children[0]; c.ID != "build:b1" || c.Title != "b1 (ios) · building · 2h00m" || c.Tooltip != "build b1" {
		t.Errorf("first build: %+v", c)
	}
	if c := st.Children[1]; c.Title != "b2 · starting · 7s" {
		t.Errorf("second build: %+v", c)
	}
	if st.Children[1].ID != "build:b2" {
		t.Errorf("second build's id: %q", st.Children[1].ID)
	}
	if st := Build(online())[0]; len(st.Children) != 0 {
		t.Errorf("idle has build entries: %+v", st.Children)
	}
}

func TestElapsed(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", -time.Second: "0s", 59*time.Second + 900*time.Millisecond: "59s", time.Minute: "1m00s",
		185 * time.Second: "3m05s", time.Hour + 2*time.Minute + 30*time.Second: "1h02m", 26 * time.Hour: "26h00m",
	} {
		if got := Elapsed(d); got != want {
			t.Errorf("Elapsed(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestActions(t *testing.T) {
	// The same items, in the same order, in every state: a binding creates them once.
	ids := func(items []Item) (s []string) {
		for _, it := range items {
			s = append(s, it.ID)
		}
		return s
	}
	want := strings.Join(ids(Build(Input{Now: now})), ",")
	if got := strings.Join(ids(Build(online(agent.BuildStatus{ID: "x"}))), ","); got != want {
		t.Fatalf("layout changed: %s vs %s", got, want)
	}

	in := online()
	if acc := find(t, Build(in), IDAccept); !acc.Checkable || !acc.Checked || !acc.Enabled {
		t.Errorf("accepting: %+v", acc)
	}
	in.Status.State = agent.StatePaused
	if acc := find(t, Build(in), IDAccept); acc.Checked || !acc.Enabled {
		t.Errorf("paused: %+v", acc)
	}
	if acc := find(t, Build(Input{Now: now}), IDAccept); acc.Enabled {
		t.Errorf("not set up yet, but Accept Builds is enabled: %+v", acc)
	}
	if dash := find(t, Build(Input{Now: now}), IDDashboard); dash.Enabled {
		t.Errorf("no controller, but the dashboard can be opened: %+v", dash)
	}
	if dash := find(t, Build(online()), IDDashboard); !dash.Enabled || dash.Tooltip != "https://builds.example.com" {
		t.Errorf("dashboard: %+v", dash)
	}

	quitting := online(agent.BuildStatus{ID: "b1"})
	quitting.Quitting = true
	items := Build(quitting)
	if q := find(t, items, IDQuit); q.Title != "Quit Now (hand back running builds)" {
		t.Errorf("second quit: %+v", q)
	}
	if acc := find(t, items, IDAccept); acc.Enabled {
		t.Errorf("accept while quitting: %+v", acc)
	}
	if q := find(t, Build(online()), IDQuit); q.Title != "Quit" || !q.Enabled {
		t.Errorf("quit: %+v", q)
	}

	in = online()
	in.LoginItem = true
	if l := find(t, Build(in), IDLogin); !l.Checkable || !l.Checked || !l.Enabled {
		t.Errorf("login item: %+v", l)
	}
	in.LoginItemErr = errors.New("launchctl failed")
	if l := find(t, Build(in), IDLogin); l.Enabled || l.Tooltip != "launchctl failed" {
		t.Errorf("login item error: %+v", l)
	}
}

// A pause by the host's rules says why, and is not the owner's: Accept
// Builds stays ticked. Running builds finish unless the owner stops them.
func TestHostPauseReasons(t *testing.T) {
	for _, reason := range []string{"on battery", "you are using this Mac", "outside schedule 22:00–07:00", "thermal: serious", "disk below 20 GB (12.5 GB free)"} {
		in := online()
		in.Status.State, in.Status.HostPause = agent.StatePaused, reason
		items := Build(in)
		if st := items[0]; st.Title != "Paused: "+reason || !strings.Contains(st.Tooltip, "by themselves") {
			t.Errorf("%s: status %+v", reason, st)
		}
		if acc := find(t, items, IDAccept); !acc.Checked || !acc.Enabled {
			t.Errorf("%s: the host's pause unticked Accept Builds: %+v", reason, acc)
		}
		if stop := find(t, items, IDStopNow); !stop.Hidden {
			t.Errorf("%s: Stop Now without running builds: %+v", reason, stop)
		}
	}
	in := online(agent.BuildStatus{ID: "b1"})
	in.Status.State, in.Status.HostPause = agent.StatePaused, "on battery"
	items := Build(in)
	if st := items[0]; st.Title != "Paused: on battery (1 build finishing)" {
		t.Errorf("finishing: %q", st.Title)
	}
	if stop := find(t, items, IDStopNow); stop.Hidden || !stop.Enabled {
		t.Errorf("Stop Now while a build finishes: %+v", stop)
	}
	// The owner's pause wins the status line over the host's.
	in.Status.OwnerPaused = true
	if st := Build(in)[0]; st.Title != "Paused: not accepting builds (1 build finishing)" {
		t.Errorf("both pauses: %q", st.Title)
	}
	if acc := find(t, Build(in), IDAccept); acc.Checked {
		t.Errorf("owner paused, yet Accept Builds is ticked: %+v", acc)
	}
	// Not paused: a build runs to the end; no Stop Now.
	if stop := find(t, Build(online(agent.BuildStatus{ID: "b1"})), IDStopNow); !stop.Hidden {
		t.Errorf("Stop Now while accepting builds: %+v", stop)
	}
}
