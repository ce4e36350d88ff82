// Package menubar is the menu-bar app: it runs the worker in-process, keeps
// the host checks fresh, turns clicks into actions, and draws the menu from
// package menu with fyne.io/systray (see systray.go).
package menubar

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/agent"
	"github.com/freeagent-build/freeagent/agent/hostcheck"
	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/tray/menu"
)

// Worker is the embedded agent (*agent.Agent).
type Worker interface {
	Run(ctx context.Context) error
	Status() agent.Status
	SetPaused(paused bool)
	StopBuilds()
	Drain()
	CancelBuilds()
}

// LoginItem is the "Start at Login" switch (a LaunchAgent on macOS).
type LoginItem interface {
	Enabled() (bool, error)
	SetEnabled(on bool) error
}

// Setup is one reading of the settings.
type Setup struct {
	Worker        Worker // nil until a controller URL and an API key are set
	ControllerURL string
	Checks        hostcheck.Config
}

// Config wires the app to the rest of the program.
type Config struct {
	// Load reads the settings afresh (at start and after Preferences are saved).
	Load      func() (Setup, error)
	LoginItem LoginItem
	// Open shows a URL or a file (`open` on macOS, `xdg-open` elsewhere).
	Open func(target string) error
	// Preferences returns the address of the preferences page, with a fresh
	// one-time token.
	Preferences func() (string, error)
	LogPath     string // "Open Logs"
	ReportPath  string // where "Run Diagnostics" writes its report
	CheckEvery  time.Duration
	// StartRetry spaces the new attempts after the settings could not be
	// read (zero: from 5 s up to 5 min). At login the Keychain may still be
	// locked; the worker must start once it opens, not wait for Preferences.
	StartRetry api.Backoff
	Log        logrus.FieldLogger
}

// App is the menu-bar app's state. Run owns it; the binding calls Menu and
// Click from other goroutines.
type App struct {
	cfg     Config
	clicks  chan string
	reload  chan struct{}
	checked chan checkResult
	changed chan struct{}
	ending  chan struct{} // closed by End
	endOnce sync.Once
	ended   chan struct{} // closed when Run returns

	mu        sync.Mutex
	setup     Setup
	loadErr   error
	checks    []hostcheck.Result
	paused    bool
	quitting  bool
	login     bool
	loginErr  error
	workerErr error
}

type checkResult struct {
	results []hostcheck.Result
	report  bool // write the report and open it ("Run Diagnostics")
}

// New returns an app; Run starts it.
func New(cfg Config) *App {
	if cfg.CheckEvery <= 0 {
		cfg.CheckEvery = time.Minute
	}
	if cfg.StartRetry.Initial <= 0 {
		cfg.StartRetry = api.Backoff{Initial: 5 * time.Second, Max: 5 * time.Minute, Jitter: 0.2}
	}
	return &App{cfg: cfg, clicks: make(chan string, 16), reload: make(chan struct{}, 1),
		checked: make(chan checkResult, 1), changed: make(chan struct{}, 1),
		ending: make(chan struct{}), ended: make(chan struct{})}
}

// EndWithin bounds End when macOS ends the app: a logout, restart or
// shutdown waits about 5–20 seconds before it kills what is left.
const EndWithin = 10 * time.Second

// End is how the app ends when macOS ends it (SIGTERM from launchd at
// logout, restart or shutdown; the power-off notification; the app being
// terminated): there is no time for running builds to finish, so they are
// handed back to the controller at once, for another worker, instead of
// waiting out their lease; then Run returns. End waits for that until ctx
// ends, and may be called from several of those paths.
func (a *App) End(ctx context.Context) error {
	a.endOnce.Do(func() { close(a.ending) })
	select {
	case <-a.ended:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("hand the running builds back before the app ends: %w", ctx.Err())
	}
}

// Click reports a click on the item with id; it never blocks.
func (a *App) Click(id string) {
	select {
	case a.clicks <- id:
	default:
		a.cfg.Log.WithField("item", id).Warn("menu click dropped: the app is busy")
	}
}

// Reload re-reads the settings: the worker drains and a new one starts with
// the new settings (Preferences saved).
func (a *App) Reload() {
	select {
	case a.reload <- struct{}{}:
	default:
	}
}

// Changed is signalled when the menu should be redrawn at once.
func (a *App) Changed() <-chan struct{} { return a.changed }

func (a *App) notify() {
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

// Menu is the menu as it should look now.
func (a *App) Menu() []menu.Item {
	a.mu.Lock()
	in := menu.Input{
		Configured:    a.setup.Worker != nil,
		ControllerURL: a.setup.ControllerURL,
		Checks:        a.checks,
		Quitting:      a.quitting,
		LoginItem:     a.login,
		LoginItemErr:  a.loginErr,
		Now:           time.Now(),
	}
	w, loadErr, workerErr := a.setup.Worker, a.loadErr, a.workerErr
	a.mu.Unlock()
	if w != nil {
		in.Status = w.Status()
	}
	switch {
	case loadErr != nil:
		in.Status = agent.Status{State: agent.StateNeedsAttention, Reason: fmt.Sprintf("the worker cannot start (%v), trying again: correct the settings in Preferences…", loadErr)}
		in.Configured = true
	case workerErr != nil && in.Status.State != agent.StateNeedsAttention:
		in.Status = agent.Status{State: agent.StateNeedsAttention, Reason: fmt.Sprintf("the worker stopped (%v): correct the settings in Preferences…", workerErr)}
	}
	return menu.Build(in)
}

// Run runs the worker and the checks until Quit has drained the worker.
func (a *App) Run(ctx context.Context) error {
	defer close(a.ended)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { // stop the checks still running, then wait for them
		cancel()
		wg.Wait()
	}()
	a.refreshLogin()
	// A start that failed to read the settings is tried again on
	// StartRetry's schedule until one succeeds or Preferences are saved.
	retries := a.cfg.StartRetry.Sequence()
	retry := time.NewTimer(0)
	retry.Stop()
	defer retry.Stop()
	var workerDone chan error
	start := func() {
		workerDone = a.start(ctx, &wg)
		a.runChecks(ctx, &wg, false)
		retry.Stop()
		a.mu.Lock()
		failed := a.loadErr != nil
		a.mu.Unlock()
		if !failed {
			retries.Reset()
			return
		}
		wait := retries.Next()
		a.cfg.Log.WithField("retry_in", wait.Round(time.Second).String()).Info("the worker will try to start again")
		retry.Reset(wait)
	}
	start()
	tick := time.NewTicker(a.cfg.CheckEvery)
	defer tick.Stop()
	reloading := false
	ending := a.ending
	for {
		select {
		case <-retry.C:
			if workerDone == nil {
				start()
			}
		case <-ending:
			ending = nil
			if a.handBack(workerDone == nil) {
				return nil
			}
		case <-ctx.Done():
			a.drain()
			if workerDone != nil {
				<-workerDone
			}
			return ctx.Err()
		case id := <-a.clicks:
			if id == menu.IDQuit && a.quit(workerDone == nil) {
				return nil
			}
			a.handle(ctx, &wg, id)
		case <-a.reload:
			if workerDone == nil {
				start()
			} else if !reloading {
				reloading = true
				a.drain()
			}
		case err := <-workerDone:
			workerDone = nil
			a.mu.Lock()
			quitting := a.quitting
			a.workerErr = nil
			if err != nil && !errors.Is(err, context.Canceled) {
				a.workerErr = err
			}
			a.mu.Unlock()
			if quitting {
				return nil
			}
			if reloading {
				reloading = false
				start()
			}
		case <-tick.C:
			a.runChecks(ctx, &wg, false)
		case r := <-a.checked:
			a.mu.Lock()
			a.checks = r.results
			a.mu.Unlock()
			if r.report {
				a.writeReport(r.results)
			}
		}
		a.notify()
	}
}

// start loads the settings and runs a worker when they are complete; the
// channel (nil without a worker) gets the result of its Run.
func (a *App) start(ctx context.Context, wg *sync.WaitGroup) chan error {
	s, err := a.cfg.Load()
	a.mu.Lock()
	a.setup, a.loadErr, a.workerErr = s, err, nil
	paused := a.paused
	a.mu.Unlock()
	if err != nil {
		a.cfg.Log.WithError(err).Error("the worker cannot start")
		return nil
	}
	if s.Worker == nil {
		a.cfg.Log.Info("not set up yet: waiting for the controller URL and API key from Preferences")
		return nil
	}
	s.Worker.SetPaused(paused)
	done := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		done <- s.Worker.Run(ctx)
	}()
	return done
}

// drain stops the current worker taking builds; running builds finish.
func (a *App) drain() {
	a.mu.Lock()
	w := a.setup.Worker
	a.mu.Unlock()
	if w != nil {
		w.Drain()
	}
}

// quit handles Quit: the first drains, a second hands running builds back.
// It returns true when the app can exit now (no worker running).
func (a *App) quit(noWorker bool) bool {
	a.mu.Lock()
	again := a.quitting
	a.quitting = true
	w := a.setup.Worker
	a.mu.Unlock()
	if noWorker || w == nil {
		return true
	}
	if again {
		a.cfg.Log.Warn("Quit chosen again: handing the running builds back")
		w.CancelBuilds()
	} else {
		a.cfg.Log.Info("Quit: no new builds; running builds finish, then the app exits")
		w.Drain()
	}
	return false
}

// EndNow is End bounded by EndWithin, for each of the ways macOS ends the
// app; a failure is logged, since the process ends regardless.
func (a *App) EndNow() {
	ctx, cancel := context.WithTimeout(context.Background(), EndWithin)
	defer cancel()
	if err := a.End(ctx); err != nil {
		a.cfg.Log.WithError(err).Error("the app ends with builds not handed back: they return to the queue when their lease expires")
	}
}

// handBack ends the app now: running builds are handed back. It returns
// true when the app can exit at once (no worker running).
func (a *App) handBack(noWorker bool) bool {
	a.mu.Lock()
	a.quitting = true
	w := a.setup.Worker
	a.mu.Unlock()
	if noWorker || w == nil {
		return true
	}
	a.cfg.Log.Warn("macOS is ending the app (logout, restart or shutdown): handing the running builds back")
	w.CancelBuilds()
	return false
}

func (a *App) handle(ctx context.Context, wg *sync.WaitGroup, id string) {
	a.mu.Lock()
	s := a.setup
	a.mu.Unlock()
	var err error
	switch id {
	case menu.IDAccept:
		a.mu.Lock()
		a.paused = !a.paused
		paused := a.paused
		a.mu.Unlock()
		if s.Worker != nil {
			s.Worker.SetPaused(paused)
		}
		a.cfg.Log.WithField("paused", paused).Info("accept builds toggled")
	case menu.IDStopNow:
		if s.Worker != nil {
			a.cfg.Log.Warn("Stop Running Builds Now: handing the running builds back")
			s.Worker.StopBuilds()
		}
	case menu.IDDashboard:
		if s.ControllerURL != "" {
			err = a.cfg.Open(strings.TrimRight(s.ControllerURL, "/") + "/")
		}
	case menu.IDLogs:
		err = a.cfg.Open(a.cfg.LogPath)
	case menu.IDPreferences, menu.IDFix:
		var url string
		if url, err = a.cfg.Preferences(); err == nil {
			err = a.cfg.Open(url)
		}
	case menu.IDLogin:
		if a.cfg.LoginItem == nil {
			break
		}
		a.mu.Lock()
		on := a.login
		a.mu.Unlock()
		if err = a.cfg.LoginItem.SetEnabled(!on); err == nil {
			a.refreshLogin()
		} else {
			// Shown on the item: the refusal says what to do (move the
			// app out of a disk image into /Applications).
			a.mu.Lock()
			a.loginErr = err
			a.mu.Unlock()
		}
	case menu.IDDiagnostics:
		a.runChecks(ctx, wg, true)
	}
	if err != nil {
		a.cfg.Log.WithError(err).WithField("item", id).Error("menu action failed")
	}
}

func (a *App) refreshLogin() {
	if a.cfg.LoginItem == nil {
		a.mu.Lock()
		a.loginErr = errors.New("start at login is not available in this build")
		a.mu.Unlock()
		return
	}
	on, err := a.cfg.LoginItem.Enabled()
	a.mu.Lock()
	a.login, a.loginErr = on, err
	a.mu.Unlock()
}

// runChecks runs the host checks in the background; Run stores the results.
func (a *App) runChecks(ctx context.Context, wg *sync.WaitGroup, report bool) {
	a.mu.Lock()
	s := a.setup
	a.mu.Unlock()
	wg.Add(1)
	go func() {
		defer wg.Done()
		rs := hostcheck.Run(ctx, s.Checks)
		select {
		case a.checked <- checkResult{results: rs, report: report}:
		case <-ctx.Done():
		}
	}()
}

// writeReport saves the diagnostics as text and opens them.
func (a *App) writeReport(rs []hostcheck.Result) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Free Agent diagnostics, %s\n\n", time.Now().Format(time.RFC1123))
	hostcheck.WriteText(&b, rs)
	err := os.MkdirAll(filepath.Dir(a.cfg.ReportPath), 0o700)
	if err == nil {
		err = os.WriteFile(a.cfg.ReportPath, b.Bytes(), 0o600)
	}
	if err == nil {
		err = a.cfg.Open(a.cfg.ReportPath)
	}
	if err != nil {
		a.cfg.Log.WithError(err).Error("could not show the diagnostics")
	}
}
