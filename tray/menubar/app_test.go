package menubar

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/agent"
	"github.com/freeagent-build/freeagent/agent/hostcheck"
	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/tray/menu"
)

// fakeWorker stands in for *agent.Agent (the real one is driven by the
// DBus test in tray/cmd/freeagent): Run ends when drained with no builds
// left, or with runErr at once.
type fakeWorker struct {
	mu        sync.Mutex
	state     agent.State
	builds    int
	drained   chan struct{}
	drainOnce sync.Once
	cancelled bool
	runErr    error
	paused    []bool
	stopped   int           // StopBuilds calls
	finish    chan struct{} // closing it finishes the running builds
	holdOn    bool          // CancelBuilds does nothing: the builds never let go
}

func newFakeWorker(builds int) *fakeWorker {
	return &fakeWorker{state: agent.StateOnline, builds: builds, drained: make(chan struct{}), finish: make(chan struct{})}
}

func (w *fakeWorker) Run(ctx context.Context) error {
	if w.runErr != nil {
		return w.runErr
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-w.drained:
	}
	if w.running() > 0 {
		<-w.finish
	}
	w.mu.Lock()
	w.builds, w.state = 0, agent.StateStopped
	w.mu.Unlock()
	return nil
}

func (w *fakeWorker) running() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancelled {
		return 0
	}
	return w.builds
}

func (w *fakeWorker) Status() agent.Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := agent.Status{State: w.state}
	for range w.builds {
		s.Builds = append(s.Builds, agent.BuildStatus{ID: "b", StartedAt: time.Now()})
	}
	return s
}

func (w *fakeWorker) SetPaused(p bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.paused = append(w.paused, p)
	if p {
		w.state = agent.StatePaused
	} else {
		w.state = agent.StateOnline
	}
}

func (w *fakeWorker) Drain() {
	w.drainOnce.Do(func() {
		w.mu.Lock()
		w.state = agent.StateDraining
		w.mu.Unlock()
		close(w.drained)
	})
}

func (w *fakeWorker) StopBuilds() {
	w.mu.Lock()
	w.stopped++
	w.mu.Unlock()
}

func (w *fakeWorker) CancelBuilds() {
	if w.holdOn {
		return
	}
	w.Drain()
	w.mu.Lock()
	w.cancelled = true
	w.mu.Unlock()
	close(w.finish)
}

type fakeLogin struct {
	mu     sync.Mutex
	on     bool
	err    error
	setErr error // what SetEnabled refuses with
}

func (l *fakeLogin) Enabled() (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.on, l.err
}

func (l *fakeLogin) SetEnabled(on bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if l.setErr != nil {
		return l.setErr
	}
	l.on = on
	return nil
}

type harness struct {
	app     *App
	mu      sync.Mutex
	workers []*fakeWorker
	next    func() *fakeWorker
	opened  []string
	done    chan error
	dir     string
}

func newHarness(t *testing.T, login LoginItem, next func() *fakeWorker) *harness {
	h := &harness{next: next, done: make(chan error, 1), dir: t.TempDir()}
	// A controller that is healthy and takes the key, so the host checks pass.
	ctl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		http.Error(w, `{"error":"bad body"}`, http.StatusBadRequest)
	}))
	t.Cleanup(ctl.Close)
	log := logrus.New()
	log.SetOutput(io.Discard)
	h.app = New(Config{
		Load: func() (Setup, error) {
			w := h.next()
			if w == keychainLocked {
				return Setup{}, errors.New("reading the API key from the Keychain: the keychain is locked")
			}
			s := Setup{ControllerURL: "https://builds.example.com", Checks: hostcheck.Config{ControllerURL: ctl.URL, APIKey: "fak_k", DataDir: h.dir, MinFree: 1}}
			if w == nil {
				return Setup{}, nil
			}
			h.mu.Lock()
			h.workers = append(h.workers, w)
			h.mu.Unlock()
			s.Worker = w
			return s, nil
		},
		LoginItem:   login,
		Open:        func(target string) error { h.mu.Lock(); h.opened = append(h.opened, target); h.mu.Unlock(); return nil },
		Preferences: func() (string, error) { return "http://127.0.0.1:1/?token=t", nil },
		LogPath:     filepath.Join(h.dir, "agent.log"),
		ReportPath:  filepath.Join(h.dir, "diagnostics.txt"),
		StartRetry:  api.Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond},
		Log:         log,
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(5 * time.Second):
			t.Error("the app did not stop")
		}
	})
	go func() { h.done <- h.app.Run(ctx) }()
	return h
}

// keychainLocked, returned by a harness's next, makes that reading of the
// settings fail as it does at login before the Keychain opens.
var keychainLocked = &fakeWorker{}

func (h *harness) item(id string) menu.Item {
	for _, it := range h.app.Menu() {
		if it.ID == id {
			return it
		}
	}
	return menu.Item{}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) workerCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.workers)
}

func (h *harness) worker(i int) *fakeWorker {
	h.mu.Lock()
	defer h.mu.Unlock()
	if i >= len(h.workers) {
		return nil
	}
	return h.workers[i]
}

func TestQuitDrainsThenHandsBack(t *testing.T) {
	w := newFakeWorker(1)
	h := newHarness(t, nil, func() *fakeWorker { return w })
	eventually(t, "status shows the build", func() bool { return strings.HasPrefix(h.item(menu.IDStatus).Title, "Building") })
	h.app.Click(menu.IDQuit)
	eventually(t, "draining", func() bool { return h.item(menu.IDStatus).Title == "Draining: finishing 1 build" })
	if q := h.item(menu.IDQuit); q.Title != "Quit Now (hand back running builds)" {
		t.Fatalf("quit item while draining: %+v", q)
	}
	select {
	case <-h.done:
		t.Fatal("the app quit with a build still running")
	case <-time.After(100 * time.Millisecond):
	}
	h.app.Click(menu.IDQuit) // again: hand the build back
	select {
	case err := <-h.done:
		h.done <- err
		if err != nil {
			t.Fatalf("quit: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a second Quit did not end the app")
	}
	if !w.cancelled {
		t.Fatal("the second Quit did not hand the builds back")
	}
}

func TestAcceptBuildsPausesAndSurvivesReload(t *testing.T) {
	var n int
	h := newHarness(t, nil, func() *fakeWorker { n++; return newFakeWorker(0) })
	eventually(t, "online", func() bool { return h.item(menu.IDStatus).Title == "Online, Idle" })
	h.app.Click(menu.IDAccept)
	eventually(t, "paused", func() bool { return !h.item(menu.IDAccept).Checked })
	if h.item(menu.IDStatus).Title != "Paused: not accepting builds" {
		t.Fatalf("status: %+v", h.item(menu.IDStatus))
	}
	// Preferences saved: the worker drains and a new one starts, still paused.
	h.app.Reload()
	eventually(t, "a second worker", func() bool { return h.worker(1) != nil })
	first := h.worker(0)
	select {
	case <-first.drained:
	default:
		t.Fatal("the old worker was not drained")
	}
	eventually(t, "the new worker paused", func() bool {
		w := h.worker(1)
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.paused) > 0 && w.paused[0]
	})
}

func TestNeedsSetupThenReload(t *testing.T) {
	var ready bool
	var mu sync.Mutex
	h := newHarness(t, nil, func() *fakeWorker {
		mu.Lock()
		defer mu.Unlock()
		if !ready {
			return nil
		}
		return newFakeWorker(0)
	})
	eventually(t, "needs setup", func() bool { return strings.HasPrefix(h.item(menu.IDStatus).Title, "Needs Setup") })
	h.app.Click(menu.IDFix)
	eventually(t, "preferences opened", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.opened) == 1 && h.opened[0] == "http://127.0.0.1:1/?token=t"
	})
	mu.Lock()
	ready = true
	mu.Unlock()
	h.app.Reload()
	eventually(t, "online after setup", func() bool { return h.item(menu.IDStatus).Title == "Online, Idle" })
}

// At login the Keychain may open after the app starts: the settings that
// could not be read are read again until the worker starts, with no
// Preferences saved in between.
func TestStartRetriedUntilTheSettingsRead(t *testing.T) {
	var mu sync.Mutex
	failures := 3
	h := newHarness(t, nil, func() *fakeWorker {
		mu.Lock()
		defer mu.Unlock()
		if failures > 0 {
			failures--
			return keychainLocked
		}
		return newFakeWorker(0)
	})
	eventually(t, "online once the Keychain opened", func() bool { return h.item(menu.IDStatus).Title == "Online, Idle" })
	if n := h.workerCount(); n != 1 {
		t.Fatalf("%d workers started, want 1", n)
	}
}

func TestWorkerErrorNeedsAttention(t *testing.T) {
	h := newHarness(t, nil, func() *fakeWorker {
		w := newFakeWorker(0)
		w.runErr = errors.New("the controller refused the API key")
		return w
	})
	eventually(t, "attention", func() bool {
		return h.item(menu.IDStatus).Title == "Needs Attention: the worker stopped (the controller refused the API key)"
	})
	if fix := h.item(menu.IDFix); fix.Hidden || fix.Title != "Fix: correct the settings in Preferences…" {
		t.Fatalf("fix: %+v", fix)
	}
	// With no worker left, Quit exits at once.
	h.app.Click(menu.IDQuit)
	select {
	case err := <-h.done:
		h.done <- err
	case <-time.After(5 * time.Second):
		t.Fatal("Quit did not end the app")
	}
}

func TestStartAtLogin(t *testing.T) {
	login := &fakeLogin{}
	h := newHarness(t, login, func() *fakeWorker { return newFakeWorker(0) })
	eventually(t, "login item shown off", func() bool { it := h.item(menu.IDLogin); return it.Enabled && !it.Checked })
	h.app.Click(menu.IDLogin)
	eventually(t, "login item on", func() bool { return h.item(menu.IDLogin).Checked })
	if on, _ := login.Enabled(); !on {
		t.Fatal("Start at Login was not switched on")
	}
	h.app.Click(menu.IDLogin)
	eventually(t, "login item off", func() bool { return !h.item(menu.IDLogin).Checked })

	broken := &fakeLogin{err: errors.New("launchctl: permission denied")}
	h2 := newHarness(t, broken, func() *fakeWorker { return newFakeWorker(0) })
	eventually(t, "broken login item disabled", func() bool {
		it := h2.item(menu.IDLogin)
		return !it.Enabled && it.Tooltip == "launchctl: permission denied"
	})

	// Turning it on from a disk image is refused; the menu says why.
	refusing := &fakeLogin{setErr: errors.New("Free Agent runs from /Volumes/x: move FreeAgent.app to /Applications")}
	h3 := newHarness(t, refusing, func() *fakeWorker { return newFakeWorker(0) })
	eventually(t, "login item shown off", func() bool { return h3.item(menu.IDLogin).Enabled })
	h3.app.Click(menu.IDLogin)
	eventually(t, "refusal shown on the item", func() bool {
		it := h3.item(menu.IDLogin)
		return !it.Checked && strings.Contains(it.Tooltip, "move FreeAgent.app to /Applications")
	})
}

func TestRunDiagnosticsWritesAndOpensTheReport(t *testing.T) {
	h := newHarness(t, nil, func() *fakeWorker { return newFakeWorker(0) })
	h.app.Click(menu.IDDiagnostics)
	report := filepath.Join(h.dir, "diagnostics.txt")
	eventually(t, "report opened", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.opened) == 1 && h.opened[0] == report
	})
	b, err := os.ReadFile(report)
	if err != nil || !strings.Contains(string(b), "Free Agent diagnostics") || !strings.Contains(string(b), "✓ disk") ||
		!strings.Contains(string(b), "✓ controller") {
		t.Fatalf("report: %v\n%s", err, b)
	}
	h.app.Click(menu.IDDashboard)
	h.app.Click(menu.IDLogs)
	eventually(t, "dashboard and logs opened", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.opened) == 3 && h.opened[1] == "https://builds.example.com/" && h.opened[2] == filepath.Join(h.dir, "agent.log")
	})
}

// macOS ending the app (logout, restart, shutdown) hands the running builds
// back at once instead of letting them finish: there is no time for that,
// and a build not handed back waits out its lease.
func TestEndHandsRunningBuildsBack(t *testing.T) {
	h := newHarness(t, nil, func() *fakeWorker { return newFakeWorker(1) })
	eventually(t, "worker running", func() bool { return h.workerCount() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.app.End(ctx); err != nil {
		t.Fatalf("End: %v", err)
	}
	w := h.worker(0)
	w.mu.Lock()
	cancelled := w.cancelled
	w.mu.Unlock()
	if !cancelled {
		t.Fatal("End returned without handing the running build back")
	}
	if err := <-h.done; err != nil {
		t.Fatalf("Run after End: %v", err)
	}
	h.done <- nil
	// Another path ending the app too (SIGTERM after the power-off
	// notification) returns at once.
	if err := h.app.End(ctx); err != nil {
		t.Fatalf("second End: %v", err)
	}
}

// End is bounded: a worker that does not let go does not hold up the
// logout past the caller's deadline.
func TestEndIsBounded(t *testing.T) {
	h := newHarness(t, nil, func() *fakeWorker { w := newFakeWorker(1); w.holdOn = true; return w })
	eventually(t, "worker running", func() bool { return h.workerCount() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := h.app.End(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("End with a worker that does not let go: %v, want the deadline", err)
	}
}
