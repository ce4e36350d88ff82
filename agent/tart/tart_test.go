package tart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/agent"
	"github.com/freeagent-build/freeagent/internal/standins/faketart/faketarttest"
)

// The driver's contract tests run against the fake tart by default. On a
// Mac, FREEAGENT_TEST_REAL_TART=1 runs the same tests against the real
// tart, with FREEAGENT_TEST_TART_TEMPLATE naming a small local VM to clone
// (e.g. one made with `tart create --linux fa-contract-template`).
type tartEnv struct {
	driver *Driver
	fake   bool
	log    string // the fake's invocation log
}

func newTartEnv(t *testing.T) *tartEnv {
	t.Helper()
	log := logrus.New()
	log.SetOutput(testWriter{t})
	if os.Getenv("FREEAGENT_TEST_REAL_TART") == "1" {
		tmpl := os.Getenv("FREEAGENT_TEST_TART_TEMPLATE")
		if tmpl == "" {
			t.Fatal("set FREEAGENT_TEST_TART_TEMPLATE to a local VM to clone")
		}
		return &tartEnv{driver: &Driver{Tart: "tart", Template: tmpl, LogDir: t.TempDir(), Log: log}}
	}
	bin := faketarttest.Build(t)
	home := faketarttest.Home(t)
	faketarttest.Template(t, home, "macos-template", []string{"/bin/sh", "-c", "sleep 3600"}, nil)
	e := &tartEnv{fake: true, log: filepath.Join(t.TempDir(), "tart.log")}
	e.driver = &Driver{Tart: bin, Template: "macos-template", LogDir: t.TempDir(), Log: log,
		Env:     append(faketarttest.Env(home, "FAKETART_BOOT_DELAY=10ms"), "FAKETART_LOG="+e.log),
		Softnet: faketarttest.Softnet(t), SoftnetAllow: []string{"192.168.64.1/32", "10.20.0.0/16"}}
	return e
}

// vm is the name the driver gives the VM of environment name.
func (e *tartEnv) vm(t *testing.T, name string) string {
	t.Helper()
	self, err := e.driver.instance()
	if err != nil {
		t.Fatal(err)
	}
	return vmName(self, name)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (e *tartEnv) names(t *testing.T) map[string]string {
	t.Helper()
	vms, err := e.driver.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, vm := range vms {
		m[vm.Name] = vm.State
	}
	return m
}

func TestStartAndDestroy(t *testing.T) {
	e := newTartEnv(t)
	ctx := context.Background()
	shared := t.TempDir()
	inst, err := e.driver.Start(ctx, "fa-contract-1", shared, agent.Resources{CPU: 4, MemoryMB: 8192})
	if err != nil {
		t.Fatal(err)
	}
	vm := e.vm(t, "fa-contract-1")
	deadline := time.Now().Add(10 * time.Second)
	for e.names(t)[vm] != "running" {
		if time.Now().After(deadline) {
			t.Fatalf("VM not running: %v", e.names(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := inst.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inst.Exited():
	case <-time.After(5 * time.Second):
		t.Fatal("tart run still running after Destroy")
	}
	if _, ok := e.names(t)[vm]; ok {
		t.Fatal("VM still exists after Destroy")
	}
	if err := inst.Destroy(ctx); err != nil {
		t.Fatalf("a second Destroy: %v", err)
	}
	if e.fake {
		var seq []string
		for _, entry := range faketarttest.ReadLog(t, e.log) {
			if entry.Event == "exit" && entry.Cmd != "list" {
				seq = append(seq, entry.Cmd+" "+strings.Join(entry.Argv, " "))
			}
		}
		want := []string{
			"clone clone macos-template " + vm,
			"set set " + vm + " --random-mac --cpu 4 --memory 8192",
			"run run --no-graphics --no-audio --no-clipboard --net-softnet --net-softnet-allow 192.168.64.1/32,10.20.0.0/16 --dir build-config:" + shared + " " + vm,
			"stop stop --timeout 30 " + vm,
			"delete delete " + vm,
		}
		for _, w := range want {
			if !slices.ContainsFunc(seq, func(s string) bool { return strings.HasSuffix(s, strings.SplitN(w, " ", 2)[1]) }) {
				t.Fatalf("tart calls %q lack %q", seq, w)
			}
		}
	}
}

// TestCleanupRemovesOnlyItsOwnVMs: a sweep removes the VMs of an agent that
// is gone (a lock file nobody holds, or none) and of earlier versions'
// naming, whether running or not, and keeps the user's VMs and any fa-*
// name no agent gives (a script's template).
func TestCleanupRemovesOnlyItsOwnVMs(t *testing.T) {
	e := newTartEnv(t)
	ctx := context.Background()
	legacy := "fa-06h0yqgrxbqra8qgqfq2bx27nc-06h0yqgrse9rn5a5kzjkxa2mn0"
	orphans := []string{"fa-0123456789ab-b1-a1", "fa-0123456789ab-b2-a2", legacy}
	kept := []string{"users-vm", "fa-contract-template-42"}
	for _, name := range append(slices.Clone(orphans), kept...) {
		if _, err := e.driver.run(ctx, "clone", e.driver.Template, name); err != nil {
			t.Fatal(err)
		}
	}
	// One orphan is still running, as after an agent crash.
	cmd := exec.Command(e.driver.Tart, "run", "--no-graphics", orphans[1])
	cmd.Env = append(os.Environ(), e.driver.Env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for e.names(t)[orphans[1]] != "running" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if err := e.driver.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	names := e.names(t)
	for _, n := range orphans {
		if _, ok := names[n]; ok {
			t.Fatalf("orphan %s left: %v", n, names)
		}
	}
	for _, n := range kept {
		if _, ok := names[n]; !ok {
			t.Fatalf("%s was touched: %v", n, names)
		}
		e.driver.run(ctx, "delete", n) //nolint:errcheck
	}
}

// TestCleanupRemovesDeadOwnersLockFiles: an agent that exits with no VM
// left leaves its lock file; the next sweep removes it, and never a live
// agent's.
func TestCleanupRemovesDeadOwnersLockFiles(t *testing.T) {
	e := newTartEnv(t)
	ctx := context.Background()
	live := &Driver{Tart: e.driver.Tart, Template: e.driver.Template, LogDir: t.TempDir(), Log: e.driver.Log, Env: e.driver.Env, Softnet: e.driver.Softnet}
	defer live.Close()
	liveID := mustInstance(t, live)
	dir, err := e.driver.ownersDir()
	if err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(dir, "0123456789ab.lock") // its process exited: nobody holds it
	if err := os.WriteFile(gone, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.driver.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(gone); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a dead agent's lock file is left: %v", err)
	}
	for _, id := range []string{liveID, mustInstance(t, e.driver)} {
		if _, err := os.Stat(filepath.Join(dir, id+".lock")); err != nil {
			t.Fatalf("a live agent's lock file was removed: %v", err)
		}
	}
}

// TestTwoAgentsShareOneTartHome: the menu-bar app and `freeagent run` on
// one Mac (one TART_HOME). Neither one's sweep deletes the other's live
// VM; once an agent is gone, the other's sweep removes its VMs.
func TestTwoAgentsShareOneTartHome(t *testing.T) {
	if os.Getenv("FREEAGENT_TEST_REAL_TART") == "1" {
		t.Skip("shares the contract template's home with any agent running on this Mac")
	}
	e := newTartEnv(t)
	ctx := context.Background()
	app := e.driver
	cli := &Driver{Tart: app.Tart, Template: app.Template, LogDir: t.TempDir(), Log: app.Log, Env: app.Env, Softnet: app.Softnet}
	defer cli.Close()
	appVM, err := app.Start(ctx, "fa-b1-a1", t.TempDir(), agent.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	defer appVM.Destroy(ctx)
	cliVM, err := cli.Start(ctx, "fa-b2-a2", t.TempDir(), agent.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	defer cliVM.Destroy(ctx)
	appName, cliName := e.vm(t, "fa-b1-a1"), vmName(mustInstance(t, cli), "fa-b2-a2")
	if appName == cliName {
		t.Fatalf("two agents named their VMs alike: %s", appName)
	}
	waitRunning := func(names ...string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for _, n := range names {
			for e.names(t)[n] != "running" {
				if time.Now().After(deadline) {
					t.Fatalf("%s not running: %v", n, e.names(t))
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	waitRunning(appName, cliName)
	// A restart of either (its start-up sweep) leaves the other's VM alone.
	for _, d := range []*Driver{app, cli} {
		if err := d.Cleanup(ctx); err != nil {
			t.Fatal(err)
		}
	}
	second := &Driver{Tart: app.Tart, Template: app.Template, LogDir: t.TempDir(), Log: app.Log, Env: app.Env, Softnet: app.Softnet}
	defer second.Close()
	if err := second.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	names := e.names(t)
	if names[appName] != "running" || names[cliName] != "running" {
		t.Fatalf("a sweep touched a live agent's VM: %v", names)
	}
	// `freeagent run` goes away (its process would exit; its VM is left).
	if err := cli.Close(); err != nil {
		t.Fatal(err)
	}
	if err := app.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	names = e.names(t)
	if _, ok := names[cliName]; ok {
		t.Fatalf("the gone agent's VM was not swept: %v", names)
	}
	if names[appName] != "running" {
		t.Fatalf("the sweeping agent's own VM: %v", names)
	}
}

// TestDeadAgentsVMsAreSwept: an agent process killed with SIGKILL leaves
// its VM running; the kernel drops its owner lock, so another agent's
// sweep removes the VM, which it left alone while that agent lived.
func TestDeadAgentsVMsAreSwept(t *testing.T) {
	if os.Getenv("FREEAGENT_TEST_REAL_TART") == "1" {
		t.Skip("fake only")
	}
	e := newTartEnv(t)
	ctx := context.Background()
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperAgent$")
	helper.Env = append(os.Environ(), "FREEAGENT_TEST_HELPER_AGENT=1", "FREEAGENT_TEST_HELPER_TART="+e.driver.Tart,
		"FREEAGENT_TEST_HELPER_ENV="+strings.Join(e.driver.Env, "\n"), "FREEAGENT_TEST_HELPER_SOFTNET="+e.driver.Softnet)
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	defer helper.Process.Kill()
	var name string
	if _, err := fmt.Fscanln(out, &name); err != nil || !strings.HasPrefix(name, VMPrefix) {
		t.Fatalf("helper agent: %q, %v", name, err)
	}
	for deadline := time.Now().Add(10 * time.Second); e.names(t)[name] != "running"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("helper's VM not running: %v", e.names(t))
		}
	}
	if err := e.driver.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if e.names(t)[name] != "running" {
		t.Fatalf("a live agent's VM was swept: %v", e.names(t))
	}
	helper.Process.Kill()
	helper.Wait()
	if err := e.driver.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.names(t)[name]; ok {
		t.Fatalf("a dead agent's VM was not swept: %v", e.names(t))
	}
}

// TestHelperAgent is the agent process of TestDeadAgentsVMsAreSwept: it
// starts a VM, prints its name and waits to be killed.
func TestHelperAgent(t *testing.T) {
	if os.Getenv("FREEAGENT_TEST_HELPER_AGENT") != "1" {
		t.Skip("run by TestDeadAgentsVMsAreSwept")
	}
	log := logrus.New()
	log.SetOutput(os.Stderr)
	d := &Driver{Tart: os.Getenv("FREEAGENT_TEST_HELPER_TART"), Template: "macos-template", LogDir: t.TempDir(), Log: log,
		Env: strings.Split(os.Getenv("FREEAGENT_TEST_HELPER_ENV"), "\n"), Softnet: os.Getenv("FREEAGENT_TEST_HELPER_SOFTNET")}
	if _, err := d.Start(context.Background(), "fa-b9-a9", t.TempDir(), agent.Resources{}); err != nil {
		t.Fatal(err)
	}
	fmt.Println(vmName(mustInstance(t, d), "fa-b9-a9"))
	select {}
}

func mustInstance(t *testing.T, d *Driver) string {
	t.Helper()
	id, err := d.instance()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestStartErrorsAreClassified(t *testing.T) {
	e := newTartEnv(t)
	ctx := context.Background()
	d := e.driver
	missing := &Driver{Tart: d.Tart, Template: "no-such-template", LogDir: d.LogDir, Log: d.Log, Env: d.Env, Softnet: d.Softnet}
	_, err := missing.Start(ctx, "fa-x-1", t.TempDir(), agent.Resources{})
	var se *agent.StartError
	if !errors.As(err, &se) || se.Code != "template_missing" || !se.Retryable || !strings.Contains(se.Error(), "no-such-template") ||
		!strings.Contains(se.Error(), "scripts/build-vm-template.sh") {
		t.Fatalf("missing template: %#v", err)
	}
	absent := &Driver{Tart: filepath.Join(t.TempDir(), "tart"), Template: d.Template, LogDir: d.LogDir, Log: d.Log, Env: d.Env, Softnet: d.Softnet}
	_, err = absent.Start(ctx, "fa-x-2", t.TempDir(), agent.Resources{})
	if !errors.As(err, &se) || se.Code != "tart_missing" || !strings.Contains(se.Error(), "brew install") {
		t.Fatalf("tart not installed: %#v", err)
	}
	if e.fake {
		failing := &Driver{Tart: d.Tart, Template: d.Template, LogDir: d.LogDir, Log: d.Log, Softnet: d.Softnet,
			Env: append(slices.Clone(d.Env), "FAKETART_FAIL_CLONE=1:disk full")}
		_, err = failing.Start(ctx, "fa-x-3", t.TempDir(), agent.Resources{})
		var te *Error
		if !errors.As(err, &se) || se.Code != "vm_start_failed" || !errors.As(err, &te) || te.ExitCode != 1 || te.Line != "disk full" {
			t.Fatalf("failing clone: %#v", err)
		}
	}
	if _, err := e.driver.Start(ctx, "not-prefixed", t.TempDir(), agent.Resources{}); err == nil {
		t.Fatal("a VM name without the fa- prefix was accepted")
	}
	b, _ := json.Marshal(e.names(t))
	if strings.Contains(string(b), "-x-") {
		t.Fatalf("failed starts left VMs: %s", b)
	}
}

// TestRemoteTemplateIsPulledOnlyWhenAbsent: a pulled image is listed with
// Source "OCI" (and a tagless reference as …:latest); the second build must
// use the cached image without contacting the registry, so a registry
// outage does not fail it.
func TestRemoteTemplateIsPulledOnlyWhenAbsent(t *testing.T) {
	if os.Getenv("FREEAGENT_TEST_REAL_TART") == "1" {
		t.Skip("needs the fake registry")
	}
	e := newTartEnv(t)
	registry := t.TempDir()
	faketarttest.RegistryImage(t, registry, "ghcr.io/acme/macos-xcode:latest", faketarttest.VM{Argv: []string{"/bin/sh", "-c", "sleep 3600"}})
	d := e.driver
	d.Template = "ghcr.io/acme/macos-xcode" // no tag: Tart means :latest
	d.Env = append(d.Env, "FAKETART_REGISTRY="+registry, "FAKETART_PULL_DELAY=0")
	ctx := context.Background()
	if ok, err := d.TemplatePresent(ctx); err != nil || ok {
		t.Fatalf("before the pull: present %v, %v", ok, err)
	}
	build := func(name string) {
		t.Helper()
		inst, err := d.Start(ctx, name, t.TempDir(), agent.Resources{})
		if err != nil {
			t.Fatal(err)
		}
		if err := inst.Destroy(ctx); err != nil {
			t.Fatal(err)
		}
	}
	build("fa-pull-1")
	if ok, err := d.TemplatePresent(ctx); err != nil || !ok {
		t.Fatalf("after the pull: present %v, %v", ok, err)
	}
	// The registry is down now: a pull would fail the build.
	d.Env = append(d.Env, "FAKETART_FAIL_PULL=1:Error: UnexpectedHTTPStatusCode(when: \"pulling manifest\", code: 503)")
	build("fa-pull-2")
	pulls := 0
	for _, entry := range faketarttest.ReadLog(t, e.log) {
		if entry.Event == "exit" && entry.Cmd == "pull" {
			pulls++
		}
	}
	if pulls != 1 {
		t.Fatalf("tart pull ran %d times for two builds; want once", pulls)
	}
	// The owner can still ask for a fresh pull.
	if err := d.PullTemplate(ctx); err == nil {
		t.Fatal("PullTemplate did not pull (the registry is down, so it must fail)")
	}
}

func TestFullRemoteName(t *testing.T) {
	for in, want := range map[string]string{
		"ghcr.io/cirruslabs/macos-sequoia-xcode":         "ghcr.io/cirruslabs/macos-sequoia-xcode:latest",
		"ghcr.io/cirruslabs/macos-sequoia-xcode:16":      "ghcr.io/cirruslabs/macos-sequoia-xcode:16",
		"localhost:5000/macos":                           "localhost:5000/macos:latest",
		"localhost:5000/macos:1":                         "localhost:5000/macos:1",
		"ghcr.io/acme/macos@sha256:0123456789abcdef0123": "ghcr.io/acme/macos@sha256:0123456789abcdef0123",
	} {
		if got := fullRemoteName(in); got != want {
			t.Errorf("fullRemoteName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestVMLimitAfterStartIsClassified: Tart reports the host's VM limit from
// `tart run` after Start returned (the VM fails to start); the instance's
// error must say vm_limit, not a VM that exited.
func TestVMLimitAfterStartIsClassified(t *testing.T) {
	if os.Getenv("FREEAGENT_TEST_REAL_TART") == "1" {
		t.Skip("needs two other running macOS VMs on a real Mac")
	}
	e := newTartEnv(t)
	d := e.driver
	d.Env = append(d.Env, "FAKETART_MAX_MACOS_VMS=0") // the host is full
	ctx := context.Background()
	inst, err := d.Start(ctx, "fa-limit-1", t.TempDir(), agent.Resources{})
	if err != nil {
		t.Fatalf("Start reports a VM that has not failed yet: %v", err)
	}
	defer inst.Destroy(ctx)
	select {
	case <-inst.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("tart run did not fail")
	}
	var se *agent.StartError
	if err := inst.Err(); !errors.As(err, &se) || se.Code != agent.CodeVMLimit || !strings.Contains(se.Error(), "The number of VMs exceeds the system limit") {
		t.Fatalf("exit of a VM refused by the limit: %#v", err)
	}
	if err := inst.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.names(t)[e.vm(t, "fa-limit-1")]; ok {
		t.Fatal("the refused VM was not deleted")
	}
	// Refused with nothing running: Virtualization.framework's own leak,
	// which only a restart clears (hostcheck.VMSlotGate pauses the worker).
	if why := d.SlotLeak(); !strings.Contains(why, "though none is running") {
		t.Fatalf("a refusal with no VM running: %q", why)
	}
}

// TestVMLimitWithVMsRunningIsNoLeak: a refusal while another VM holds the
// slots is the ordinary limit, not the leak: the worker keeps building.
func TestVMLimitWithVMsRunningIsNoLeak(t *testing.T) {
	if os.Getenv("FREEAGENT_TEST_REAL_TART") == "1" {
		t.Skip("needs the fake's one-VM host")
	}
	e := newTartEnv(t)
	d := e.driver
	d.Env = append(d.Env, "FAKETART_MAX_MACOS_VMS=1")
	ctx := context.Background()
	first, err := d.Start(ctx, "fa-holds-1", t.TempDir(), agent.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Destroy(ctx)
	second, err := d.Start(ctx, "fa-refused-2", t.TempDir(), agent.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Destroy(ctx)
	select {
	case <-second.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("the second VM was not refused")
	}
	var se *agent.StartError
	if err := second.Err(); !errors.As(err, &se) || se.Code != agent.CodeVMLimit {
		t.Fatalf("the second VM: %v", err)
	}
	if why := d.SlotLeak(); why != "" {
		t.Fatalf("a refusal while a VM runs taken for the leak: %q", why)
	}
}

// TestCloneAgainAfterAnotherCommandsGC: a clone whose temporary directory
// another tart command's garbage collection removed (Tart's race between
// creating and locking it) is cloned again, not failed.
func TestCloneAgainAfterAnotherCommandsGC(t *testing.T) {
	e := newTartEnv(t)
	if !e.fake {
		t.Skip("stages the race with a wrapper around the fake tart")
	}
	home, err := e.driver.tartHome()
	if err != nil {
		t.Fatal(err)
	}
	// The first clone fails as Tart's does when the race is lost.
	marker := filepath.Join(t.TempDir(), "raced")
	wrapper := filepath.Join(t.TempDir(), "tart")
	script := "#!/bin/sh\nif [ \"$1\" = clone ] && [ ! -e '" + marker + "' ]; then\n\ttouch '" + marker + "'\n" +
		"\techo \"Error: open " + filepath.Join(home, "tmp", "9A247E39-C77F-4271-B6CF-0E4AA47FFF4F") + ": no such file or directory\" >&2\n\texit 1\nfi\nexec '" + e.driver.Tart + "' \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	e.driver.Tart = wrapper
	vm, err := e.driver.Start(context.Background(), "fa-b1-a1", t.TempDir(), agent.Resources{})
	if err != nil {
		t.Fatalf("the clone was not tried again: %v", err)
	}
	defer vm.Destroy(context.Background())
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the race was not staged")
	}
}

// Tart's clone deletes OCI-cache images when the volume looks short of the
// space the clone may claim, sparing only the image it cloned: a local
// template's base image goes. The worker turns that off unless the owner
// asked for it (--tart-auto-prune).
func TestCloneKeepsCachedImagesUnlessAutoPrune(t *testing.T) {
	if os.Getenv("FREEAGENT_TEST_REAL_TART") == "1" {
		t.Skip("needs the fake's free-space knob")
	}
	e := newTartEnv(t)
	d := e.driver
	home := strings.TrimPrefix(d.Env[0], "TART_HOME=")
	registry := t.TempDir()
	const base = "ghcr.io/acme/macos-base:1"
	faketarttest.RegistryImage(t, registry, base, faketarttest.VM{DiskGB: 1})
	faketarttest.WriteVM(t, filepath.Join(home, "vms", "small-template"), faketarttest.VM{DiskGB: 1})
	d.Template = "small-template"
	// A 1 GB sparse template against 999 MB free: Tart wants about 1 MB back.
	d.Env = append(d.Env, "FAKETART_REGISTRY="+registry, "FAKETART_PULL_DELAY=0", "FAKETART_FREE_BYTES=999000000")
	ctx := context.Background()
	if _, err := d.run(ctx, "pull", base); err != nil {
		t.Fatal(err)
	}
	baseDisk := filepath.Join(home, "cache", "OCIs", "ghcr.io", "acme", "macos-base", "1", "disk.img")
	f, err := os.OpenFile(baseDisk, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 4<<20)); err != nil { // blocks to reclaim
		t.Fatal(err)
	}
	f.Close()
	cached := func() bool {
		t.Helper()
		vms, err := d.list(ctx, "--source", "oci")
		if err != nil {
			t.Fatal(err)
		}
		for _, vm := range vms {
			if vm.Name == base {
				return true
			}
		}
		return false
	}

	if err := d.clone(ctx, e.vm(t, "fa-prune-1")); err != nil {
		t.Fatal(err)
	}
	if !cached() {
		t.Fatalf("the worker's clone pruned %s from Tart's cache", base)
	}
	// An inherited TART_NO_AUTO_PRUNE does not override the owner's choice.
	d.AutoPrune = true
	d.Env = append(d.Env, "TART_NO_AUTO_PRUNE=")
	if err := d.clone(ctx, e.vm(t, "fa-prune-2")); err != nil {
		t.Fatal(err)
	}
	if cached() {
		t.Fatalf("with AutoPrune the clone kept %s; Tart would have pruned it", base)
	}
}
