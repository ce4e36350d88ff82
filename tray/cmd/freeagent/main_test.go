package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/agent/secrets"
)

func TestConfigPrecedenceFlagEnvFileDefault(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, confName), []byte("# comment\ncontroller-url = https://from-file:8080\nmax-builds = 2\ntemplate = from-file\npoll-wait = 7s\n"), 0o600)
	t.Setenv("FREEAGENT_TEMPLATE", "from-env")
	t.Setenv("FREEAGENT_MAX_BUILDS", "")
	os.Unsetenv("FREEAGENT_MAX_BUILDS")
	cfg, err := loadConfig("run", []string{"--data-dir", dir, "--poll-wait", "3s"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ControllerURL != "https://from-file:8080" || cfg.MaxBuilds != 2 || cfg.Template != "from-env" ||
		cfg.PollWait != 3*time.Second || cfg.BootTimeout != 5*time.Minute || cfg.DataDir != dir {
		t.Fatalf("precedence: %+v", cfg)
	}
	os.WriteFile(filepath.Join(dir, confName), []byte("max-builds = lots\n"), 0o600)
	_, err = loadConfig("run", []string{"--data-dir", dir, "--controller-url", "http://x"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), `agent.conf:1: max-builds = "lots"`) {
		t.Fatalf("a bad file value must name where it came from: %v", err)
	}
	os.WriteFile(filepath.Join(dir, confName), []byte("no equals sign\n"), 0o600)
	if _, err := loadConfig("run", []string{"--data-dir", dir}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), ":1:") {
		t.Fatalf("a malformed line must be reported with its number: %v", err)
	}
}

func TestRunNeedsAControllerAndAKey(t *testing.T) {
	dir := t.TempDir()
	var stderr bytes.Buffer
	if code := run([]string{"run", "--data-dir", dir}, strings.NewReader(""), &bytes.Buffer{}, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "freeagent setup --controller-url") {
		t.Fatalf("no controller: %d %q", code, stderr.String())
	}
	stderr.Reset()
	t.Setenv("FREEAGENT_API_KEY", "")
	if code := run([]string{"run", "--data-dir", dir, "--controller-url", "http://127.0.0.1:1", "--vm-driver", "local"},
		strings.NewReader(""), &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), "API key") {
		t.Fatalf("no key: %d %q", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"run", "--data-dir", dir, "--controller-url", "https://x", "--vm-driver", "tart", "--max-builds", "3"},
		strings.NewReader(""), &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), "at most 2") {
		t.Fatalf("three macOS VMs: %d %q", code, stderr.String())
	}
}

func TestSetupStoresURLAndKey(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run([]string{"setup", "--data-dir", dir, "--controller-url", "https://builds.example.com", "--api-key-stdin"},
		strings.NewReader("fak_secret_key\n"), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("setup: %d %s", code, stderr.String())
	}
	if strings.Contains(stdout.String(), "fak_secret_key") {
		t.Fatal("setup printed the key")
	}
	cfg, err := loadConfig("run", []string{"--data-dir", dir}, &bytes.Buffer{})
	if err != nil || cfg.ControllerURL != "https://builds.example.com" {
		t.Fatalf("saved URL: %+v %v", cfg, err)
	}
	if key, err := secrets.Open(dir).Get(secrets.KeyAPIKey); err != nil || key != "fak_secret_key" {
		t.Fatalf("saved key: %q %v", key, err)
	}
	if (&Config{VMDriver: "tart", ControllerURL: "http://127.0.0.1:8080", HostAddress: "192.168.64.1"}).guestURL() != "http://192.168.64.1:8080" {
		t.Fatal("a loopback controller must be rewritten for the VMs")
	}
}

// TestProcessSerialNumberIsIgnored: macOS adds -psn_0_N to an app's
// arguments on its first Finder launch; it is neither a command nor a flag.
func TestProcessSerialNumberIsIgnored(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"-psn_0_1234567"}, nil},
		{[]string{"app", "-psn_0_42", "--solo"}, []string{"app", "--solo"}},
		{[]string{"-psn_12_3", "doctor"}, []string{"doctor"}},
		// Only the exact shape is dropped.
		{[]string{"-psn_0_", "-psn_x_1", "-psn_0", "--psn_0_1", "-psn_0_1x"}, []string{"-psn_0_", "-psn_x_1", "-psn_0", "--psn_0_1", "-psn_0_1x"}},
	} {
		if got := withoutProcessSerialNumber(c.in); strings.Join(got, " ") != strings.Join(c.want, " ") || len(got) != len(c.want) {
			t.Errorf("%q: got %q, want %q", c.in, got, c.want)
		}
	}
	// Outside an app bundle the bare serial number leaves no command: usage, not "unknown command".
	var stderr bytes.Buffer
	if code := run([]string{"-psn_0_1234567"}, strings.NewReader(""), &bytes.Buffer{}, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "Usage:") || strings.Contains(stderr.String(), "unknown command") {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}

// TestPlainHTTPControllerRefused: the worker refuses a plain-http
// controller on another machine, from the flag, the environment or
// agent.conf, naming --insecure; --insecure (or FREEAGENT_INSECURE=1, or
// insecure = true in agent.conf) lets it go on with a loud warning in the
// log. A loopback controller stays http, and the VMs still reach it over
// plain http through the host's address on the VM network.
func TestPlainHTTPControllerRefused(t *testing.T) {
	dir := t.TempDir()
	remote := "http://192.0.2.10:8080"
	for name, setup := range map[string]func() []string{
		"flag": func() []string { return []string{"--controller-url", remote} },
		"env":  func() []string { t.Setenv("FREEAGENT_CONTROLLER_URL", remote); return nil },
		"file": func() []string {
			os.WriteFile(filepath.Join(dir, confName), []byte("controller-url = "+remote+"\n"), 0o600)
			return nil
		},
	} {
		os.Remove(filepath.Join(dir, confName))
		os.Unsetenv("FREEAGENT_CONTROLLER_URL")
		args := append([]string{"run", "--data-dir", dir, "--vm-driver", "local"}, setup()...)
		var stderr bytes.Buffer
		if code := run(args, strings.NewReader(""), &bytes.Buffer{}, &stderr); code != 2 ||
			!strings.Contains(stderr.String(), "--insecure") || !strings.Contains(stderr.String(), "plain http") {
			t.Errorf("%s: want exit 2 naming --insecure, got %d %q", name, code, stderr.String())
		}
		if _, err := loadConfig("setup", append([]string{"--data-dir", dir}, args[5:]...), &bytes.Buffer{}); err == nil {
			t.Errorf("%s: setup accepted the plain-http URL", name)
		}
	}
	os.Unsetenv("FREEAGENT_CONTROLLER_URL")
	os.Remove(filepath.Join(dir, confName))
	for _, allow := range [][]string{{"--insecure"}, {"FREEAGENT_INSECURE=1"}, {"insecure = true"}} {
		args := []string{"--data-dir", dir, "--controller-url", remote}
		switch a := allow[0]; {
		case strings.HasPrefix(a, "--"):
			args = append(args, a)
		case strings.HasPrefix(a, "FREEAGENT_"):
			t.Setenv("FREEAGENT_INSECURE", "1")
		default:
			os.WriteFile(filepath.Join(dir, confName), []byte(a+"\n"), 0o600)
		}
		cfg, err := loadConfig("run", args, &bytes.Buffer{})
		if err != nil {
			t.Fatalf("%s: %v", allow[0], err)
		}
		if w := cfg.insecureWarning(); !strings.Contains(w, "INSECURE: talking to "+remote+" over plain HTTP") {
			t.Errorf("%s: warning %q", allow[0], w)
		}
		os.Unsetenv("FREEAGENT_INSECURE")
		os.Remove(filepath.Join(dir, confName))
	}
	for _, u := range []string{"http://127.0.0.1:8080", "http://localhost:8080", "https://builds.example.com"} {
		cfg, err := loadConfig("run", []string{"--data-dir", dir, "--controller-url", u, "--vm-driver", "tart"}, &bytes.Buffer{})
		if err != nil || cfg.insecureWarning() != "" {
			t.Fatalf("%s: %v %q", u, err, cfg.insecureWarning())
		}
		if u == "http://127.0.0.1:8080" && cfg.guestURL() != "http://192.168.64.1:8080" {
			t.Fatalf("the VMs' plain-http hop to a loopback controller changed: %s", cfg.guestURL())
		}
	}
}

// One worker per data directory: a second start, whichever way it comes
// (the login item, Finder, `freeagent run`), names the one running and
// stops; the app quits with 0 so launchd does not start it again.
func TestOneWorkerPerDataDir(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("FREEAGENT_API_KEY", "fak_test")
	lock, err := lockWorker(dir, "the menu-bar app")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("Free Agent is already running on %s (the menu-bar app, pid %d)", dir, os.Getpid())
	var stderr bytes.Buffer
	if code := run([]string{"run", "--data-dir", dir, "--controller-url", "http://127.0.0.1:1", "--vm-driver", "local"},
		strings.NewReader(""), &bytes.Buffer{}, &stderr); code != 1 || !strings.Contains(stderr.String(), want) {
		t.Fatalf("second worker: %d %q, want 1 and %q", code, stderr.String(), want)
	}
	stderr.Reset()
	if code := run([]string{"app", "--data-dir", dir}, strings.NewReader(""), &bytes.Buffer{}, &stderr); code != 0 ||
		!strings.Contains(stderr.String(), want) {
		t.Fatalf("second app: %d %q, want 0 and %q", code, stderr.String(), want)
	}
	lock.Release()
	again, err := lockWorker(dir, "freeagent run")
	if err != nil {
		t.Fatalf("after the first worker ended: %v", err)
	}
	again.Release()
}

// recordingWorker records what run's signals asked of the worker.
type recordingWorker struct{ calls []string }

func (w *recordingWorker) Drain()        { w.calls = append(w.calls, "drain") }
func (w *recordingWorker) CancelBuilds() { w.calls = append(w.calls, "hand-back") }

// A headless worker under launchd gets seconds between SIGTERM and SIGKILL
// at logout, restart or shutdown: its first SIGTERM hands the builds back
// rather than waiting for them. Interactively (Ctrl-C) and by default the
// first signal drains, as Buildkite's agent does.
func TestRunsSignals(t *testing.T) {
	for _, c := range []struct {
		onTerm string
		sigs   []os.Signal
		want   string
		exit   bool
	}{
		{onTermDrain, []os.Signal{syscall.SIGTERM}, "drain", false},
		{onTermDrain, []os.Signal{syscall.SIGTERM, syscall.SIGTERM}, "drain hand-back", false},
		{onTermHandBack, []os.Signal{syscall.SIGTERM}, "hand-back", false},
		{onTermHandBack, []os.Signal{syscall.SIGINT}, "drain", false},
		{onTermDrain, []os.Signal{syscall.SIGINT, syscall.SIGINT, syscall.SIGINT}, "drain hand-back", true},
	} {
		sigs := make(chan os.Signal, len(c.sigs))
		for _, s := range c.sigs {
			sigs <- s
		}
		ctx, cancel := context.WithCancel(context.Background())
		w := &recordingWorker{}
		done := make(chan bool, 1)
		go func() { done <- handleSignals(ctx, sigs, w, c.onTerm, logrus.New()) }()
		var exit bool
		if c.exit {
			exit = <-done
		} else {
			// Once the last signal is taken, the handler acts on it before
			// it looks at ctx again.
			for len(sigs) > 0 {
				time.Sleep(time.Millisecond)
			}
			cancel()
			exit = <-done
		}
		cancel()
		if got := strings.Join(w.calls, " "); got != c.want || exit != c.exit {
			t.Errorf("--on-sigterm %s, signals %v: did %q (exit %v), want %q (exit %v)", c.onTerm, c.sigs, got, exit, c.want, c.exit)
		}
	}
}

func TestHeadlessServiceHandsBackOnSIGTERM(t *testing.T) {
	args := serviceArgs(true)
	cfg, err := loadConfig(args[0], append(args[1:], "--data-dir", t.TempDir(), "--controller-url", "https://x"), &bytes.Buffer{})
	if err != nil || cfg.OnSIGTERM != onTermHandBack {
		t.Fatalf("the headless LaunchAgent runs %v: %v, on SIGTERM %q", args, err, cfg.OnSIGTERM)
	}
	if strings.Join(serviceArgs(false), " ") != appCommand {
		t.Fatalf("the app's LaunchAgent runs %v", serviceArgs(false))
	}
	if _, err := loadConfig("run", []string{"--data-dir", t.TempDir(), "--controller-url", "https://x", "--on-sigterm", "wait"}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "use drain or hand-back") {
		t.Fatalf("an unknown --on-sigterm: %v", err)
	}
}
