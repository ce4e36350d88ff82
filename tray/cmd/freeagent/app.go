package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/agent/hostcheck"
	"github.com/freeagent-build/freeagent/agent/secrets"
	"github.com/freeagent-build/freeagent/tray/menu"
	"github.com/freeagent-build/freeagent/tray/menubar"
	"github.com/freeagent-build/freeagent/tray/prefs"
	"github.com/freeagent-build/freeagent/tray/solo"
)

// cmdApp runs the menu-bar app with the worker in-process. It is what the
// app bundle launches (see inAppBundle). Quit, or Ctrl-C, drains the
// worker; the app exits 0 once the running builds have finished or been
// handed back. SIGTERM (launchd at logout, restart or shutdown) hands the
// running builds back at once (menubar.App.End).
func cmdApp(args []string, stderr io.Writer) error {
	cfg, err := loadConfig("app", args, stderr)
	if err != nil {
		return err
	}
	lock, err := lockWorker(cfg.DataDir, "the menu-bar app")
	if errors.Is(err, errWorkerRunning) {
		// The app is already in the menu bar: this start quits, with exit
		// 0 so the login item's launchd does not start it again.
		fmt.Fprintln(stderr, err)
		return nil
	}
	if err != nil {
		return err
	}
	defer lock.Release()
	log, closeLog, err := newLogger(cfg, stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	var app *menubar.App
	prefsSrv, err := prefs.Start(prefs.Config{
		DataDir: cfg.DataDir,
		Defaults: prefs.Values{MaxBuilds: defaultMaxBuilds, BuildTimeout: defaultBuildTimeout, Template: defaultTemplate, CacheGB: defaultCacheGB,
			Rules: prefs.DefaultRules()},
		Secrets: secrets.Open(cfg.DataDir),
		Test: func(ctx context.Context, controllerURL, apiKey string) hostcheck.Result {
			return hostcheck.Controller(ctx, hostcheck.Config{ControllerURL: controllerURL, APIKey: apiKey})
		},
		Saved:       func() { app.Reload() },
		SoloURL:     soloURL(cfg.SoloListen),
		SoloKeyFile: solo.DeveloperKeyFile(cfg.DataDir),
		Log:         log,
	})
	if err != nil {
		return err
	}
	defer prefsSrv.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The solo controller, when on: Load (on the app's own goroutine)
	// starts and stops it; it ends with the app, from this function's
	// return or from macOS's applicationWillTerminate, after which the
	// process exits without running this function's defers.
	soloCtl := &soloHolder{log: log}
	defer soloCtl.end()
	app = menubar.New(menubar.Config{
		Load: func() (menubar.Setup, error) {
			// Re-read: Preferences may have changed agent.conf and the key.
			c, err := loadConfig("app", args, io.Discard)
			if err != nil {
				return menubar.Setup{}, err
			}
			store := secrets.Open(c.DataDir)
			url, err := soloCtl.want(ctx, c, store)
			if err != nil {
				return menubar.Setup{}, err
			}
			if err := c.resolveKey(store); err != nil {
				return menubar.Setup{}, err
			}
			if url != "" {
				c.ControllerURL = url // the port actually bound
			}
			return appSetup(c, store, log)
		},
		Open:        opener(cfg.OpenCommand),
		Preferences: prefsSrv.NewURL,
		LoginItem:   loginItem(log),
		LogPath:     cfg.logPath(),
		ReportPath:  filepath.Join(cfg.DataDir, "logs", "diagnostics.txt"),
		Log:         log,
	})

	sigs := make(chan os.Signal, 3)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	go func() {
		for {
			select {
			case sig := <-sigs:
				if sig != syscall.SIGTERM {
					// Ctrl-C: like choosing Quit, drain first, hand the
					// builds back on the second.
					app.Click(menu.IDQuit)
					continue
				}
				// launchd at logout, restart or shutdown: no time for the
				// builds to finish; hand them back, then end the app even
				// if that did not finish in time.
				app.EndNow()
				cancel()
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	log.WithField("data_dir", cfg.DataDir).Info("menu-bar app starting")
	return menubar.Show(ctx, app, soloCtl.end)
}

// soloHolder is the menu-bar app's solo controller, when it runs one.
type soloHolder struct {
	log   logrus.FieldLogger
	mu    sync.Mutex
	ctl   *solo.Controller
	ended bool
}

// want starts or stops the solo controller as c asks and returns its URL
// ("" when off).
func (h *soloHolder) want(ctx context.Context, c *Config, store secrets.Store) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.ended:
		return "", errors.New("the app is ending")
	case c.Solo && h.ctl == nil:
		ctl, err := solo.Start(ctx, solo.Config{DataDir: c.DataDir, Listen: c.SoloListen, VMNetwork: c.SoloVMNetwork, Bridge: c.HostAddress, Secrets: store}, h.log)
		if err != nil {
			return "", err
		}
		h.ctl = ctl
	case !c.Solo && h.ctl != nil:
		h.stopLocked()
	}
	if h.ctl == nil {
		return "", nil
	}
	return h.ctl.URL, nil
}

// end stops the solo controller, if any, for good; later calls do nothing.
func (h *soloHolder) end() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ended = true
	h.stopLocked()
}

func (h *soloHolder) stopLocked() {
	if h.ctl == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.ctl.Shutdown(ctx); err != nil {
		h.log.WithError(err).Warn("stopping the controller on this Mac")
	}
	h.ctl = nil
}

// appSetup is the worker for the current settings; none until a controller
// URL and an API key are set.
func appSetup(c *Config, store secrets.Store, log logrus.FieldLogger) (menubar.Setup, error) {
	s := menubar.Setup{ControllerURL: c.ControllerURL, Checks: c.hostChecks(store)}
	if c.ControllerURL == "" || c.APIKey == "" {
		return s, nil
	}
	w, err := newAgent(c, store, log)
	if err != nil {
		return s, err
	}
	s.Worker = w
	return s, nil
}

// opener shows a URL or file with the platform's command (`open` on macOS,
// `xdg-open` elsewhere; --open-command overrides it).
func opener(command string) func(string) error {
	return func(target string) error {
		cmd := exec.Command(command, target)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %w: %s", command, target, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
}

// inAppBundle reports whether this executable is FreeAgent.app's: launched
// from Finder with no arguments, it runs the menu-bar app.
func inAppBundle() bool {
	exe, err := os.Executable()
	return err == nil && strings.HasSuffix(filepath.Dir(exe), ".app/Contents/MacOS")
}
