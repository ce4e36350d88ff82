package agent_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/pgtest"
	"github.com/freeagent-build/freeagent/controller/serve"
	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/internal/standins/faketart/faketarttest"
	"github.com/freeagent-build/freeagent/internal/testsupport/syncbuf"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
	"github.com/freeagent-build/freeagent/launchd"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

var (
	binOnce        sync.Once
	binDir, binErr = "", error(nil)
)

// binaries builds freeagent, freeagent-vm and the stand-in xcodebuild
// and pod (fakexcodebuild and fakepod, next to them) once per test binary.
func binaries(t testing.TB) (agentBin, vmBin string) {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "freeagent-e2e-bin-")
		if binErr != nil {
			return
		}
		for _, pkg := range []string{"../tray/cmd/freeagent", "../vmbootstrap/cmd/freeagent-vm", "../internal/standins/fakexcodebuild", "../internal/standins/fakepod"} {
			out, err := exec.Command("go", "build", "-o", binDir+"/", pkg).CombinedOutput()
			if err != nil {
				binErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return filepath.Join(binDir, "freeagent"), filepath.Join(binDir, "freeagent-vm")
}

// farm is a controller on real Postgres, a fake Tart with a template VM
// whose guest runs the real freeagent-vm, and agents started on demand.
type farm struct {
	t         testing.TB
	dsn       string
	url       string
	dev       *api.Client
	admin     *api.Client
	workerKey string
	// softnet is the agents' stand-in softnet, setuid root as the owner's
	// fix leaves it when the test runs as root.
	softnet  string
	tart     string
	tartHome string
	agentBin string
	vmBin    string
	// vmEnv is the guest's freeagent-vm.env (the template's toolchain).
	vmEnv string
	// vmnet: guests run on the fake's emulation of Tart's network and reach
	// the host at 192.168.64.1, not at 127.0.0.1.
	vmnet bool
	// bootTimeout is the agents' --boot-timeout (20s unless a test that
	// boots like a Mac sets more).
	bootTimeout string
}

func newFarm(t testing.TB, mod func(*store.Config)) *farm {
	t.Helper()
	testtool.Need(t, "npm") // the fixture project builds with `npm run freeagent:build`
	f := &farm{t: t, tart: faketarttest.Build(t), tartHome: faketarttest.Home(t), softnet: faketarttest.Softnet(t)}
	f.agentBin, f.vmBin = binaries(t)
	cfg := store.DefaultConfig()
	cfg.LeaseTTL = 3 * time.Second
	cfg.TokenRotateAfter = 2 * time.Second
	if mod != nil {
		mod(&cfg)
	}
	dataParent, err := os.MkdirTemp("", "fa-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dataParent, 0o711)
	t.Cleanup(func() { os.RemoveAll(dataParent) })
	log := logrus.New()
	log.SetOutput(io.Discard)
	// As on a Mac, a guest reaches the host only at vmnet's gateway: the
	// controller listens on every address (as solo mode and mac-e2e.sh do)
	// and the agent gives the guest the loopback URL rewritten with its
	// default host address. Without namespaces the guest shares the host's
	// loopback, and the agent is told so.
	listen := "127.0.0.1:0"
	if f.vmnet = faketarttest.VMNet(t); f.vmnet {
		listen = "0.0.0.0:0"
	}
	c := controllertest.Start(t, controllertest.Logger(log), controllertest.Configure(func(c *serve.Config) {
		c.Listen, c.DataDir, c.ReaperInterval, c.Store = listen, filepath.Join(dataParent, "controller"), 250*time.Millisecond, cfg
	}))
	u, err := url.Parse(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	f.dsn, f.url = c.DSN, "http://"+net.JoinHostPort("127.0.0.1", u.Port())
	f.workerKey = c.WorkerKey
	f.dev = &api.Client{BaseURL: f.url, APIKey: c.DeveloperKey}
	f.admin = &api.Client{BaseURL: f.url, APIKey: c.AdminKey}
	// The template's launcher prefers the freeagent-vm in the shared folder,
	// as the real VM template's LaunchAgent does.
	// Agents are SIGKILLed at the end of a test; like real Tart VMs, theirs
	// would keep running. Power them off. (Registered first: runs last.)
	t.Cleanup(func() {
		res := faketarttest.Run(t, f.tart, faketarttest.Env(f.tartHome), "list", "--source", "local", "--format", "json")
		var list []struct{ Name, State string }
		json.Unmarshal([]byte(res.Stdout), &list)
		for _, vm := range list {
			if vm.State == "running" {
				faketarttest.Run(t, f.tart, faketarttest.Env(f.tartHome), "stop", "--timeout", "5", vm.Name)
			}
		}
	})
	// The guest runs what the template's LaunchAgent runs: the launcher,
	// which must find freeagent-vm in the shared folder (no copy baked in).
	launcher, err := filepath.Abs("../launchd/guest/freeagent-vm-launcher")
	if err != nil {
		t.Fatal(err)
	}
	// The guest starts as the template's LaunchAgent does: launchd's PATH
	// (the fake's) and the plist's EnvironmentVariables, and nothing of
	// this process. The launcher then exports the toolchain environment
	// the template script recorded (freeagent-vm.env): here this host's,
	// recorded the same way, which is where node, npm and the JDK are.
	toolchain, err := exec.Command("sh", "../launchd/guest/freeagent-toolchain-env").Output()
	if err != nil {
		t.Fatalf("freeagent-toolchain-env: %v", err)
	}
	envFile := filepath.Join(t.TempDir(), "freeagent-vm.env")
	if err := os.WriteFile(envFile, toolchain, 0o644); err != nil {
		t.Fatal(err)
	}
	f.vmEnv = envFile
	jobEnv := maps.Clone(launchd.GuestJob().EnvironmentVariables)
	jobEnv["FREEAGENT_VM_ENV"] = envFile
	faketarttest.Template(t, f.tartHome, "macos-expo", []string{"/bin/sh", "-c",
		`mkdir -p "$TART_FAKE_GUEST_ROOT/libexec-run" && FREEAGENT_VM_LOCAL="$TART_FAKE_GUEST_ROOT/libexec-run" FREEAGENT_SHARED_DIR="$TART_FAKE_SHARED_FILES/build-config" FREEAGENT_CACHE_SHARE="$TART_FAKE_SHARED_FILES/caches" FREEAGENT_VM_BAKED=/nonexistent exec "$0" --work-dir "$TART_FAKE_GUEST_ROOT/work"`, launcher}, jobEnv)
	return f
}

// guestEnv adds variables to the guest's toolchain environment (later
// lines win), as a template with more tools would record them. Call it
// before the agent starts a VM.
func (f *farm) guestEnv(kv map[string]string) {
	fh, err := os.OpenFile(f.vmEnv, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	defer fh.Close()
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		fmt.Fprintf(fh, "%s='%s'\n", k, strings.ReplaceAll(kv[k], "'", `'\''`))
	}
}

// agentProc is a running `freeagent run`.
type agentProc struct {
	cmd  *exec.Cmd
	log  *syncbuf.Buffer
	done chan error
	dir  string
}

func (f *farm) startAgent(extraEnv ...string) *agentProc {
	f.t.Helper()
	dir := f.t.TempDir()
	args := []string{"run", "--controller-url", f.url, "--vm-driver", "tart", "--tart", f.tart, "--softnet", f.softnet,
		"--template", "macos-expo", "--data-dir", dir, "--bootstrap", f.vmBin,
		"--backoff-min", "200ms", "--boot-timeout", cmp.Or(f.bootTimeout, "20s"), "--max-builds", "2", "--name", "e2e-mac"}
	tartEnv := []string{"FAKETART_BOOT_DELAY=50ms"}
	if f.vmnet {
		tartEnv = append(tartEnv, "FAKETART_NET=vmnet")
		// The VMs are on Softnet (the default), which lets them reach
		// global addresses only: where the npm registry resolves to a
		// private or reserved one (a CI's mirror), it is allowed as an
		// owner would allow a LAN registry.
		if allow := registryAllow(f.t); allow != "" {
			args = append(args, "--softnet-allow", allow)
		}
	} else {
		args = append(args, "--host-address", "127.0.0.1")
	}
	cmd := exec.Command(f.agentBin, args...)
	// Later entries win: extraEnv can override these.
	cmd.Env = append(append(faketarttest.BaseEnv(), faketarttest.Env(f.tartHome, tartEnv...)...),
		// Warm spares are off unless a test turns them on (spare_e2e_test.go):
		// the tests that count VMs and VM slots start each build's VM cold.
		append([]string{"FREEAGENT_API_KEY=" + f.workerKey, "FREEAGENT_POLL_WAIT=2s", "FREEAGENT_WARM_SPARE=0",
			// The host's disk floor holds builds back; a CI disk may be small.
			"FREEAGENT_MIN_FREE_GB=1"}, extraEnv...)...)
	p := &agentProc{cmd: cmd, log: &syncbuf.Buffer{}, done: make(chan error, 1), dir: dir}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	f.t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		if f.t.Failed() {
			f.t.Logf("agent log:\n%s", p.output())
		}
	})
	return p
}

func (p *agentProc) output() string { return p.log.String() }

// stop sends SIGTERM (a drain) and waits for a clean exit.
func (p *agentProc) stop(t testing.TB) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Fatalf("agent exited with %v after a drain", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("agent did not exit within 60 s of SIGTERM")
	}
}

// fixture is a project whose freeagent:build script runs build.sh.
func fixture(t testing.TB, buildSh string) []byte {
	t.Helper()
	files := map[string]string{
		"package.json": `{"name":"fixture","version":"1.0.0","scripts":{"freeagent:build":"sh ./build.sh"}}`,
		"app.json":     `{"expo":{"name":"fixture","slug":"fixture"}}`,
		"build.sh":     buildSh,
	}
	return controllertest.Project(t, files)
}

func (f *farm) submit(buildSh string) string {
	f.t.Helper()
	resp, err := f.dev.Submit(context.Background(), api.SubmitRequest{Platform: "android", Source: bytes.NewReader(fixture(f.t, buildSh))})
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.ID
}

// waitFor polls the build until cond holds.
func (f *farm) waitFor(id string, within time.Duration, what string, cond func(api.Build) bool) api.Build {
	f.t.Helper()
	deadline := time.Now().Add(within)
	for {
		b, err := f.dev.GetBuild(context.Background(), id)
		if err == nil && cond(b) {
			return b
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("build %s: %s not reached within %s (last: %+v, %v)", id, what, within, b, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (f *farm) logs(id string) string {
	c, err := f.dev.ReadLogs(context.Background(), id, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	return string(c.Data)
}

// logAttempts logs, for a build that took more than one attempt, how each
// attempt ended and every line of this agent's log about the build: a
// lost attempt then says what lost it (a lease that expired, a VM that
// stopped, a refused report).
func (p *agentProc) logAttempts(t testing.TB, b api.Build) {
	t.Helper()
	if len(b.AttemptHistory) < 2 {
		return
	}
	var s strings.Builder
	fmt.Fprintf(&s, "build %s took %d attempts:", b.ID, len(b.AttemptHistory))
	for _, a := range b.AttemptHistory {
		took := "still running"
		if a.EndedAt != nil {
			took = "after " + a.EndedAt.Sub(a.StartedAt).Round(time.Millisecond).String()
		}
		msg, _, _ := strings.Cut(deref(a.ErrorMessage), "\n")
		fmt.Fprintf(&s, "\n  attempt %d (%s) on worker %s, from %s: %s %s, code %s: %s",
			a.Number, a.ID, a.WorkerID, a.StartedAt.Format(time.RFC3339Nano), a.Status, took, deref(a.ErrorCode), msg)
	}
	s.WriteString("\nthe agent's log of it:")
	for line := range strings.Lines(p.output()) {
		if strings.Contains(line, b.ID) {
			s.WriteString("\n  " + strings.TrimSuffix(line, "\n"))
		}
	}
	t.Log(s.String())
}

// vms lists the fake Tart's VMs.
func (f *farm) vms() []string {
	f.t.Helper()
	res := faketarttest.Run(f.t, f.tart, faketarttest.Env(f.tartHome), "list", "--source", "local", "--format", "json")
	var list []struct{ Name string }
	if err := json.Unmarshal([]byte(res.Stdout), &list); err != nil {
		f.t.Fatalf("tart list: %v: %s", err, res.Stdout)
	}
	var names []string
	for _, vm := range list {
		names = append(names, vm.Name)
	}
	return names
}

func (f *farm) noBuildVMs() {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		for _, n := range f.vms() {
			if strings.HasPrefix(n, "fa-") {
				left = append(left, n)
			}
		}
		procs := f.guestProcesses()
		if len(left) == 0 && len(procs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("left behind: VMs %v, guest processes %v", left, procs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// guestProcesses lists live processes started inside this farm's VMs (the
// fake marks them with TART_FAKE_GUEST_ROOT under the farm's TART_HOME).
func (f *farm) guestProcesses() []string {
	var out []string
	matches, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, m := range matches {
		env, err := os.ReadFile(m)
		if err != nil || !bytes.Contains(env, []byte("TART_FAKE_GUEST_ROOT="+f.tartHome)) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join(filepath.Dir(m), "stat"))
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			continue // exited, waiting for its reaper
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(m), "cmdline"))
		out = append(out, filepath.Base(filepath.Dir(m))+":"+string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
	}
	return out
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

const slowApk = `echo "step 1: compiling"
sleep 1.5
echo "step 2: packaging"
mkdir -p "$FREEAGENT_ARTIFACTS_DIR"
printf 'APK-BYTES-%s' "$FREEAGENT_PLATFORM" > "$FREEAGENT_ARTIFACTS_DIR/app-release.apk"
echo "done"
`

// TestEndToEndBuild: submit → worker → fake Tart VM → freeagent-vm → the
// artifact, with logs live, orphans swept, and nothing left behind.
func TestEndToEndBuild(t *testing.T) {
	f := newFarm(t, nil)
	// A VM left by a crashed earlier agent (its owner lock is gone), and the
	// user's own VM.
	for _, name := range []string{"fa-0123456789ab-stale-1", "my-own-vm"} {
		if r := faketarttest.Run(t, f.tart, faketarttest.Env(f.tartHome), "clone", "macos-expo", name); r.Code != 0 {
			t.Fatalf("clone %s: %+v", name, r)
		}
	}
	a := f.startAgent()
	id := f.submit(slowApk)
	f.waitFor(id, 30*time.Second, "building with the first log line", func(b api.Build) bool {
		return b.Status == api.StatusBuilding && strings.Contains(f.logs(id), "step 1")
	})
	if b, _ := f.dev.GetBuild(context.Background(), id); b.Status != api.StatusBuilding {
		t.Fatalf("logs must arrive while the build runs; status is %s", b.Status)
	}
	b := f.waitFor(id, 60*time.Second, "completed", func(b api.Build) bool { return b.Status.Terminal() })
	if b.Status != api.StatusCompleted || len(b.Artifacts) != 1 || b.Artifacts[0].Name != "app-release.apk" {
		t.Fatalf("build: %+v\nlog:\n%s", b, f.logs(id))
	}
	resp, err := f.dev.DownloadArtifact(context.Background(), id, "app-release.apk", 0)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "APK-BYTES-android" || sum(body) != b.Artifacts[0].SHA256 {
		t.Fatalf("artifact: %q", body)
	}
	if logs := f.logs(id); !strings.Contains(logs, "step 2: packaging") || !strings.Contains(logs, "done") {
		t.Fatalf("log: %q", logs)
	}
	f.noBuildVMs()
	vms := f.vms()
	if len(vms) != 2 || vms[0] != "macos-expo" || vms[1] != "my-own-vm" {
		t.Fatalf("VMs after the build: %v (the stale fa-* VM must be gone, the user's kept)", vms)
	}
	a.stop(t)
	if entries, _ := os.ReadDir(filepath.Join(a.dir, "builds")); len(entries) != 0 {
		t.Fatalf("shared dirs left behind: %v", entries)
	}
}

// A worker whose softnet cannot become root (a fresh brew install: no
// setuid bit, no passwordless sudo, tart run as an ordinary user) takes no
// build, which would fail vm_exited as softnet exits and Tart stops the
// VM; the owner's fix lets the build through.
func TestEndToEndSoftnetWithoutRootTakesNoBuilds(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a softnet owned by root needs a test running as root")
	}
	f := newFarm(t, nil)
	if err := os.Chmod(f.softnet, 0o755); err != nil {
		t.Fatal(err)
	}
	sudoDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(sudoDir, "sudo"), []byte("#!/bin/sh\necho 'sudo: a password is required' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	id := f.submit(`mkdir -p "$FREEAGENT_ARTIFACTS_DIR" && echo APK > "$FREEAGENT_ARTIFACTS_DIR/app-release.apk"`)
	f.startAgent("FAKETART_SOFTNET_NO_ROOT=1", "PATH="+sudoDir+":"+os.Getenv("PATH"), "FREEAGENT_HOST_CHECK_INTERVAL=200ms")
	ctx := context.Background()
	var paused bool
	for deadline := time.Now().Add(30 * time.Second); !paused && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ws, err := f.admin.ListWorkers(ctx)
		paused = err == nil && len(ws.Workers) == 1 && strings.Contains(ws.Workers[0].HostPauseReason, "cannot become root")
	}
	if !paused {
		t.Fatal("the worker never reported that softnet cannot become root")
	}
	// The gate answers before the first poll: the build was never offered.
	if b, err := f.dev.GetBuild(ctx, id); err != nil || b.Status != api.StatusPending || b.Attempts != 0 {
		t.Fatalf("build while softnet cannot become root: %+v %v; want pending, never attempted", b, err)
	}
	if err := os.Chmod(f.softnet, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	b := f.waitFor(id, 60*time.Second, "completed", func(b api.Build) bool { return b.Status.Terminal() })
	if b.Status != api.StatusCompleted || b.Attempts != 1 {
		t.Fatalf("build after the fix: %+v\nlog:\n%s", b, f.logs(id))
	}
}

func TestEndToEndFailingBuildIsNotRetried(t *testing.T) {
	f := newFarm(t, nil)
	f.startAgent()
	id := f.submit("echo 'compiling…'\necho 'error: Cannot find module expo' >&2\nexit 3\n")
	b := f.waitFor(id, 60*time.Second, "ended", func(b api.Build) bool { return b.Status.Terminal() })
	if b.Status != api.StatusFailed || b.Attempts != 1 || b.ErrorMessage == nil || !strings.Contains(*b.ErrorMessage, "Cannot find module expo") {
		t.Fatalf("failed build: %+v", b)
	}
	f.noBuildVMs()
}

func TestEndToEndCancelStopsTheVM(t *testing.T) {
	// Heartbeats every 200 s: only the cancel watch can tell the worker
	// within the wait below.
	f := newFarm(t, func(c *store.Config) { c.LeaseTTL = 10 * time.Minute })
	f.startAgent()
	id := f.submit("echo started\nsleep 60\n")
	f.waitFor(id, 30*time.Second, "running", func(b api.Build) bool { return strings.Contains(f.logs(id), "started") })
	if _, err := f.dev.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	b := f.waitFor(id, 30*time.Second, "cancelled", func(b api.Build) bool { return b.Status.Terminal() })
	if b.Status != api.StatusCancelled {
		t.Fatalf("after cancel: %+v", b)
	}
	f.noBuildVMs()
}

// TestEndToEndWorkerBuildTimeoutCaps: the Mac owner's build timeout
// (Preferences, --build-timeout) stops a build whose own timeout is longer.
func TestEndToEndWorkerBuildTimeoutCaps(t *testing.T) {
	f := newFarm(t, nil)
	f.startAgent("FREEAGENT_BUILD_TIMEOUT=3s")
	id := f.submit("echo started\nsleep 60\n")
	b := f.waitFor(id, 30*time.Second, "ended", func(b api.Build) bool { return b.Status.Terminal() })
	if b.Status != api.StatusFailed || b.ErrorCode == nil || *b.ErrorCode != api.CodeTimeout ||
		b.ErrorMessage == nil || !strings.Contains(*b.ErrorMessage, "timeout of 3 seconds") {
		t.Fatalf("after the worker's timeout: %+v", b)
	}
	f.noBuildVMs()
}

// TestEndToEndAgentKilledMidBuild: the first agent dies with SIGKILL; a
// second one removes its VM, and finishes the build once the lease expired.
func TestEndToEndAgentKilledMidBuild(t *testing.T) {
	f := newFarm(t, nil)
	first := f.startAgent()
	id := f.submit("echo started\nsleep 3\nmkdir -p \"$FREEAGENT_ARTIFACTS_DIR\"\necho ok > \"$FREEAGENT_ARTIFACTS_DIR/app.apk\"\n")
	f.waitFor(id, 30*time.Second, "running", func(b api.Build) bool { return strings.Contains(f.logs(id), "started") })
	first.cmd.Process.Signal(syscall.SIGKILL)
	<-first.done
	first.done <- nil
	f.startAgent()
	b := f.waitFor(id, 90*time.Second, "completed by the second agent", func(b api.Build) bool { return b.Status.Terminal() })
	if b.Status != api.StatusCompleted || b.Attempts != 2 || len(b.AttemptHistory) != 2 || b.AttemptHistory[0].Status != "expired" {
		t.Fatalf("after the crash: %+v", b)
	}
	f.noBuildVMs()
}

func TestEndToEndVMFailuresAreRetried(t *testing.T) {
	t.Run("tart run fails", func(t *testing.T) {
		f := newFarm(t, func(c *store.Config) { c.MaxAttempts = 1 })
		f.startAgent(`FAKETART_RUN_FAIL=0s:Error Domain=VZErrorDomain Code=1 "The virtual machine failed to start."`)
		id := f.submit(slowApk)
		b := f.waitFor(id, 60*time.Second, "given up", func(b api.Build) bool { return b.Status.Terminal() })
		if b.Status != api.StatusFailed || *b.ErrorCode != api.CodeMaxAttempts || len(b.AttemptHistory) != 1 ||
			b.AttemptHistory[0].ErrorCode == nil || *b.AttemptHistory[0].ErrorCode != "vm_exited" {
			t.Fatalf("build: %+v", b)
		}
		f.noBuildVMs()
	})
	t.Run("VM never ready", func(t *testing.T) {
		f := newFarm(t, func(c *store.Config) { c.MaxAttempts = 1 })
		f.startAgent("FAKETART_BOOT_DELAY=1h")
		id := f.submit(slowApk)
		b := f.waitFor(id, 60*time.Second, "given up", func(b api.Build) bool { return b.Status.Terminal() })
		if b.Status != api.StatusFailed || b.AttemptHistory[0].ErrorCode == nil || *b.AttemptHistory[0].ErrorCode != "vm_boot_timeout" {
			t.Fatalf("build: %+v", b)
		}
		f.noBuildVMs()
	})
}

// TestEndToEndVMLimit: with the host's VM limit reached, the second build's
// VM fails to start (Tart says so after `tart run` began); the build goes
// back to the queue without consuming an attempt and completes later.
func TestEndToEndVMLimit(t *testing.T) {
	f := newFarm(t, nil)
	f.startAgent("FAKETART_MAX_MACOS_VMS=1")
	script := "echo started\nsleep 2\nmkdir -p \"$FREEAGENT_ARTIFACTS_DIR\"\necho ok > \"$FREEAGENT_ARTIFACTS_DIR/app.apk\"\n"
	first, second := f.submit(script), f.submit(script)
	for _, id := range []string{first, second} {
		b := f.waitFor(id, 90*time.Second, "completed", func(b api.Build) bool { return b.Status.Terminal() })
		if b.Status != api.StatusCompleted {
			t.Fatalf("build %s: %+v", id, b)
		}
	}
	var limited bool
	for _, id := range []string{first, second} {
		b, _ := f.dev.GetBuild(context.Background(), id)
		for _, a := range b.AttemptHistory {
			if a.ErrorMessage == nil || !strings.Contains(*a.ErrorMessage, "exceeds the system limit") {
				continue
			}
			limited = true
			if a.Status != "released" || !strings.Contains(*a.ErrorMessage, "vm_limit") {
				t.Fatalf("a VM refused by the limit must hand the build back as vm_limit: %+v (%s)", a, *a.ErrorMessage)
			}
		}
		if b.Attempts != 1 {
			t.Fatalf("build %s consumed %d attempts; the VM limit must not consume any: %+v", id, b.Attempts, b.AttemptHistory)
		}
	}
	if !limited {
		t.Fatal("no attempt hit the VM limit; the test did not exercise it")
	}
	f.noBuildVMs()
}

// TestEndToEndDrain: the first SIGTERM lets the running build finish, then
// the worker unregisters and exits; with a second SIGTERM the running build
// is stopped and handed back to the queue without consuming an attempt.
func TestEndToEndDrain(t *testing.T) {
	f := newFarm(t, nil)
	a := f.startAgent()
	id := f.submit("echo started\nsleep 2\nmkdir -p \"$FREEAGENT_ARTIFACTS_DIR\"\necho ok > \"$FREEAGENT_ARTIFACTS_DIR/app.apk\"\n")
	f.waitFor(id, 30*time.Second, "running", func(b api.Build) bool { return strings.Contains(f.logs(id), "started") })
	a.stop(t) // waits for the exit
	if b, _ := f.dev.GetBuild(context.Background(), id); b.Status != api.StatusCompleted {
		t.Fatalf("a drain must let the build finish: %+v", b)
	}

	b := f.startAgent()
	id = f.submit("echo started\nsleep 60\n")
	f.waitFor(id, 30*time.Second, "running", func(b api.Build) bool { return strings.Contains(f.logs(id), "started") })
	b.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond)
	b.stop(t) // the second SIGTERM
	bl := f.waitFor(id, 10*time.Second, "handed back", func(b api.Build) bool { return b.Status == api.StatusPending })
	if bl.Attempts != 0 || bl.AttemptHistory[0].Status != "released" {
		t.Fatalf("handed-back build: %+v", bl)
	}
	f.noBuildVMs()
}

// registryAllow is the IPv4 addresses of the npm registry and of Yarn's
// (the host a Yarn 1 lockfile names in every `resolved` URL, which Yarn
// fetches as written whatever the registry setting) as /32s, for
// --softnet-allow ("" when neither resolves).
func registryAllow(t testing.TB) string {
	t.Helper()
	var cidrs []string
	for _, host := range []string{"registry.npmjs.org", "registry.yarnpkg.com"} {
		ips, err := net.LookupIP(host)
		if err != nil {
			t.Logf("%s does not resolve (%v): no --softnet-allow for it", host, err)
			continue
		}
		for _, ip := range ips {
			if v4 := ip.To4(); v4 != nil && !slices.Contains(cidrs, v4.String()+"/32") {
				cidrs = append(cidrs, v4.String()+"/32")
			}
		}
	}
	return strings.Join(cidrs, ",")
}
