//go:build !darwin

// On macOS the same runs would use the login Keychain of whoever runs the
// tests; scripts/mac-e2e.sh covers the real app under launchd there.

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/agent/hostcheck"
	"github.com/freeagent-build/freeagent/agent/secrets"
	"github.com/freeagent-build/freeagent/internal/standins/faketart/faketarttest"
	"github.com/freeagent-build/freeagent/internal/testsupport/syncbuf"
	"github.com/freeagent-build/freeagent/launchd/homebrew"
)

// launchdPATH is the PATH launchd gives a LaunchAgent without
// EnvironmentVariables, and Finder an app it opens.
const launchdPATH = "/usr/bin:/bin:/usr/sbin:/sbin"

// launchdHost is a Mac as the worker sees it when launchd or Finder starts
// it: tart only in a Homebrew prefix, the settings in the data folder under
// HOME, and an environment of PATH=/usr/bin:/bin:/usr/sbin:/sbin and HOME,
// plus HOMEBREW_PREFIX naming the (fake) Homebrew, since the tests cannot
// write to /opt/homebrew. Nothing else of the test's environment leaks in.
type launchdHost struct {
	env     []string
	tart    string // PREFIX/bin/tart, a link to the fake, as `brew link` makes
	softnet string // PREFIX/bin/softnet, a link to a stand-in; "" without root
}

func newLaunchdHost(t *testing.T, controllerURL, workerKey string) launchdHost {
	t.Helper()
	home, prefix := t.TempDir(), t.TempDir()
	bin := filepath.Join(prefix, "bin")
	os.MkdirAll(bin, 0o755)
	h := launchdHost{tart: filepath.Join(bin, "tart"),
		env: []string{"PATH=" + launchdPATH, "HOME=" + home, homebrew.PrefixEnv + "=" + prefix}}
	if err := os.Symlink(faketarttest.Build(t), h.tart); err != nil {
		t.Fatal(err)
	}
	// Tart's default home, ~/.tart: no TART_HOME either.
	faketarttest.Template(t, filepath.Join(home, ".tart"), "macos-expo", nil, nil)
	dataDir := filepath.Join(home, ".local", "share", "freeagent") // defaultDataDir with HOME alone
	os.MkdirAll(dataDir, 0o700)
	conf := "controller-url = " + controllerURL + "\nvm-driver = tart\ntemplate = macos-expo\nmin-free-gb = 1\npoll-wait = 1s\n"
	// Softnet next to tart, setuid root as the doctor wants it: that
	// needs root; without it the VMs use the shared network.
	if os.Geteuid() == 0 {
		stand := faketarttest.Softnet(t)
		if err := os.Chmod(stand, 0o755|os.ModeSetuid); err != nil {
			t.Fatal(err)
		}
		h.softnet = filepath.Join(bin, "softnet")
		if err := os.Symlink(stand, h.softnet); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Log("not root: no setuid softnet, the VMs use the shared network")
		conf += "vm-network = shared\n"
	}
	if err := os.WriteFile(filepath.Join(dataDir, confName), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := secrets.Open(dataDir).Set(secrets.KeyAPIKey, workerKey); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h launchdHost) command(t *testing.T, args ...string) *exec.Cmd {
	appBin, _ := appBinaries(t)
	cmd := exec.Command(appBin, args...)
	cmd.Env = h.env
	dieWithTest(cmd)
	return cmd
}

// TestDoctorWithLaunchdsEnvironment: the doctor of an app opened from
// Finder finds the Homebrew tart that launchd's PATH does not lead to, and
// says which one it uses.
func TestDoctorWithLaunchdsEnvironment(t *testing.T) {
	url, key := controller(t)
	h := newLaunchdHost(t, url, key)
	out, err := h.command(t, "doctor", "--json").Output()
	var report struct {
		OK     bool
		Checks []hostcheck.Result
	}
	if jerr := json.Unmarshal(out, &report); jerr != nil || err != nil || !report.OK {
		t.Fatalf("doctor: %v %v\n%s", err, jerr, out)
	}
	for _, c := range report.Checks {
		if c.ID == hostcheck.IDTart && !strings.Contains(c.Message, "("+h.tart+")") {
			t.Fatalf("the tart check does not name the Homebrew tart %s: %+v", h.tart, c)
		}
		if real, _ := filepath.EvalSymlinks(h.softnet); h.softnet != "" && c.ID == hostcheck.IDSoftnet && !strings.Contains(c.Message, real) {
			t.Fatalf("the softnet check does not name the Homebrew softnet %s: %+v", real, c)
		}
	}
}

// TestRunWithLaunchdsEnvironment: `freeagent run` as a LaunchAgent starts
// its Tart driver with the Homebrew tart (its start-up clean-up lists the
// VMs with it) and registers.
func TestRunWithLaunchdsEnvironment(t *testing.T) {
	url, key := controller(t)
	h := newLaunchdHost(t, url, key)
	cmd := h.command(t, "run")
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	if !faketarttest.WaitFor(30*time.Second, func() bool { return strings.Contains(out.String(), "registered with the controller") }) {
		t.Fatalf("the worker did not register:\n%s", out.String())
	}
	cmd.Process.Signal(syscall.SIGTERM) // drain: nothing runs, so it unregisters and exits 0
	if err := <-exited; err != nil {
		t.Fatalf("exit: %v\n%s", err, out.String())
	}
	exited <- nil
	got := out.String()
	if !strings.Contains(got, `msg="using tart" tart=`+h.tart) || strings.Contains(got, "not found") ||
		strings.Contains(got, "could not clean up") {
		t.Fatalf("the worker did not use the Homebrew tart %s:\n%s", h.tart, got)
	}
}
