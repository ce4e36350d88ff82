package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/internal/standins/faketart/faketarttest"
)

// All tests run the real binary as child processes against t.TempDir()
// homes. Every process they start carries FAKETART_TEST_MARKER=<our pid>
// (the guests get it through FAKETART_GUEST_PASSENV), and TestMain fails
// the run if any such process outlives the tests.

var marker = "FAKETART_TEST_MARKER=" + strconv.Itoa(os.Getpid())

// listenHelperArg makes the test binary a guest program that accepts TCP
// connections on the port that follows, forever (TestSoftnetIsolation).
const listenHelperArg = "faketart-test-listen"

func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == listenHelperArg {
		l, err := net.Listen("tcp", "0.0.0.0:"+os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for {
			c, err := l.Accept()
			if err != nil {
				os.Exit(1)
			}
			c.Close()
		}
	}
	code := m.Run()
	var strays []string
	faketarttest.WaitFor(3*time.Second, func() bool {
		strays = markedProcesses()
		return len(strays) == 0
	})
	if len(strays) > 0 {
		fmt.Fprintf(os.Stderr, "stray processes left behind:\n  %s\n", strings.Join(strays, "\n  "))
		for _, s := range strays {
			pid, _ := strconv.Atoi(strings.Fields(s)[0])
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		code = 1
	}
	os.Exit(code)
}

// markedProcesses lists live processes whose environment has our marker.
func markedProcesses() []string {
	matches, _ := filepath.Glob("/proc/[0-9]*/environ")
	var out []string
	for _, m := range matches {
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(m)))
		if pid == os.Getpid() || !faketarttest.ProcessAlive(pid) {
			continue
		}
		env, err := os.ReadFile(m)
		if err != nil || !bytes.Contains(env, []byte("\x00"+marker+"\x00")) && !bytes.HasPrefix(env, []byte(marker+"\x00")) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(m), "cmdline"))
		out = append(out, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(string(cmdline), "\x00", " ")))
	}
	return out
}

type fixture struct {
	t    *testing.T
	bin  string
	home string
	env  []string
}

func newFixture(t *testing.T, kv ...string) *fixture {
	t.Parallel()
	home := faketarttest.Home(t)
	env := faketarttest.Env(home, append([]string{
		"FAKETART_BOOT_DELAY=20ms",
		"FAKETART_GUEST_PASSENV=FAKETART_TEST_MARKER",
		marker,
	}, kv...)...)
	return &fixture{t: t, bin: faketarttest.Build(t), home: home, env: env}
}

func (f *fixture) with(kv ...string) *fixture {
	g := *f
	g.env = append(append([]string{}, f.env...), kv...)
	return &g
}

func (f *fixture) tart(args ...string) faketarttest.Result {
	f.t.Helper()
	return faketarttest.Run(f.t, f.bin, f.env, args...)
}

// ok runs a command that must succeed silently (or with the given stdout).
func (f *fixture) ok(args ...string) string {
	f.t.Helper()
	r := f.tart(args...)
	if r.Code != 0 || r.Stderr != "" {
		f.t.Fatalf("tart %s: exit %d, stderr %q", strings.Join(args, " "), r.Code, r.Stderr)
	}
	return r.Stdout
}

// fails asserts the exit code and the exact stderr.
func (f *fixture) fails(code int, stderr string, args ...string) {
	f.t.Helper()
	r := f.tart(args...)
	if r.Code != code || r.Stderr != stderr {
		f.t.Fatalf("tart %s: got exit %d stderr %q; want exit %d stderr %q", strings.Join(args, " "), r.Code, r.Stderr, code, stderr)
	}
}

func (f *fixture) vmPath(name string, parts ...string) string {
	return filepath.Join(append([]string{f.home, "vms", name}, parts...)...)
}

func (f *fixture) config(name string) map[string]any {
	f.t.Helper()
	data, err := os.ReadFile(f.vmPath(name, "config.json"))
	if err != nil {
		f.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		f.t.Fatal(err)
	}
	return m
}

type listEntry struct {
	Source   string
	Name     string
	Disk     int
	Size     int
	Accessed string
	Running  bool
	State    string
}

func (f *fixture) list() []listEntry {
	f.t.Helper()
	out := f.ok("list", "--format", "json")
	var l []listEntry
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		f.t.Fatalf("list: %v\n%s", err, out)
	}
	return l
}

func (f *fixture) state(name string) string {
	for _, e := range f.list() {
		if e.Name == name {
			return e.State
		}
	}
	return "absent"
}

// runProc is a background `tart run`.
type runProc struct {
	cmd      *exec.Cmd
	out, err bytes.Buffer
	done     chan struct{}
	code     int
}

func (f *fixture) start(args ...string) *runProc {
	f.t.Helper()
	r := &runProc{done: make(chan struct{})}
	r.cmd = faketarttest.Command(f.bin, f.env, append([]string{"run"}, args...)...)
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.err
	if err := r.cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	go func() {
		_ = r.cmd.Wait()
		r.code = r.cmd.ProcessState.ExitCode()
		close(r.done)
	}()
	f.t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.done
	})
	return r
}

func (r *runProc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-r.done:
		return r.code
	case <-time.After(timeout):
		t.Fatalf("tart run did not exit within %v (stdout %q)", timeout, r.out.String())
		return -1
	}
}

func (r *runProc) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func waitFile(t *testing.T, path string, timeout time.Duration) string {
	t.Helper()
	var data []byte
	if !faketarttest.WaitFor(timeout, func() bool {
		var err error
		data, err = os.ReadFile(path)
		return err == nil && len(data) > 0
	}) {
		// A guest's file lies in .faketart/guest/; its output beside that.
		log, _ := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(path)), "guest.log"))
		t.Fatalf("%s did not appear within %v; the guest's output so far:\n%s", path, timeout, log)
	}
	return string(data)
}

// guestScript writes its pid (= its process group) into the guest root,
// the word "hi" into the build-config share, then sleeps in a child process.
const guestScript = `echo $$ > "$TART_FAKE_GUEST_ROOT/pid"; echo hi > "$TART_FAKE_SHARED_FILES/build-config/out"; sleep 60`

func guestPID(t *testing.T, f *fixture, vm string) int {
	t.Helper()
	s := waitFile(t, f.vmPath(vm, ".faketart", "guest", "pid"), 5*time.Second)
	pid, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func assertGroupGone(t *testing.T, pgid int) {
	t.Helper()
	if !faketarttest.WaitFor(30*time.Second, func() bool { return len(faketarttest.GroupPIDs(pgid)) == 0 }) {
		t.Fatalf("guest process group %d still alive: %v", pgid, faketarttest.GroupPIDs(pgid))
	}
}

// ---------------------------------------------------------------------------

func TestListJSONShapeAfterCloneAndSet(t *testing.T) {
	f := newFixture(t)
	if got := f.ok("list", "--format", "json"); got != "[\n\n]\n" {
		t.Fatalf("empty list = %q", got)
	}
	if got := f.with("FAKETART_EMPTY_JSON=compact").ok("list", "--format", "json"); got != "[]\n" {
		t.Fatalf("compact empty list = %q", got)
	}
	if got := f.ok("list"); got != "\n" {
		t.Fatalf("empty text list = %q", got)
	}

	faketarttest.Template(t, f.home, "tpl", []string{"/bin/true"}, nil)
	tplMAC := f.config("tpl")["macAddress"]
	if out := f.ok("clone", "tpl", "fa-1-1"); out != "" {
		t.Fatalf("clone printed %q", out)
	}
	cloneMAC := f.config("fa-1-1")["macAddress"]
	if cloneMAC == tplMAC {
		t.Fatalf("clone of a local VM kept the MAC address %v", tplMAC)
	}
	f.ok("set", "fa-1-1", "--cpu", "6", "--memory", "8192", "--random-mac")
	cfg := f.config("fa-1-1")
	if cfg["cpuCount"] != 6.0 || cfg["memorySize"] != float64(8192<<20) || cfg["cpuCountMin"] != 4.0 {
		t.Fatalf("config after set: %v", cfg)
	}
	if cfg["macAddress"] == cloneMAC {
		t.Fatal("--random-mac kept the MAC address")
	}

	raw := f.ok("list", "--format", "json")
	if !strings.HasPrefix(raw, "[\n  {\n    \"Source\" : \"local\",\n") || !strings.HasSuffix(raw, "  }\n]\n") {
		t.Fatalf("not Swift pretty-printed:\n%s", raw)
	}
	var generic []map[string]any
	if err := json.Unmarshal([]byte(raw), &generic); err != nil {
		t.Fatal(err)
	}
	for _, e := range generic {
		var keys []string
		for k := range e {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if want := []string{"Accessed", "Disk", "Name", "Running", "Size", "Source", "State"}; !reflect.DeepEqual(keys, want) {
			t.Fatalf("keys %v, want %v", keys, want)
		}
	}
	l := f.list()
	if len(l) != 2 || l[0].Name != "fa-1-1" || l[1].Name != "tpl" {
		t.Fatalf("list = %+v", l)
	}
	e := l[0]
	if e.Source != "local" || e.Disk != 50 || e.Size != 0 || e.Running || e.State != "stopped" {
		t.Fatalf("entry = %+v", e)
	}
	if ts, err := time.Parse("2006-01-02T15:04:05Z", e.Accessed); err != nil || time.Since(ts) > time.Minute {
		t.Fatalf("Accessed %q (%v)", e.Accessed, err)
	}
	if got := f.ok("list", "--quiet"); got != "fa-1-1\ntpl\n" {
		t.Fatalf("list --quiet = %q", got)
	}
	if got := f.ok("list", "-q", "--source", "oci"); got != "" {
		t.Fatalf("list -q --source oci = %q", got)
	}
	text := f.ok("list")
	if !strings.HasPrefix(text, "Source Name") || !strings.Contains(text, "Accessed") || strings.Contains(text, "Running") {
		t.Fatalf("text list:\n%s", text)
	}

	var info map[string]any
	if err := json.Unmarshal([]byte(f.ok("get", "fa-1-1", "--format", "json")), &info); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"OS": "darwin", "CPU": 6.0, "Memory": 8192.0, "Disk": 50.0, "DiskFormat": "raw",
		"Size": "0.000", "Display": "1024x768", "Running": false, "State": "stopped"}
	if !reflect.DeepEqual(info, want) {
		t.Fatalf("get = %v, want %v", info, want)
	}
}

func TestCloneOverwriteAndErrors(t *testing.T) {
	f := newFixture(t)
	faketarttest.Template(t, f.home, "tpl-a", []string{"/bin/echo", "A"}, nil)
	faketarttest.Template(t, f.home, "tpl-b", []string{"/bin/echo", "B"}, nil)
	f.ok("clone", "tpl-a", "vm")
	f.ok("clone", "tpl-b", "vm") // silently replaces, like real tart
	spec, err := os.ReadFile(f.vmPath("vm", "fake-guest.json"))
	if err != nil || !strings.Contains(string(spec), `"B"`) {
		t.Fatalf("overwritten clone has guest %s (%v)", spec, err)
	}
	f.with("FAKETART_CLONE_NO_OVERWRITE=1").fails(1, "VM \"vm\" already exists\n", "clone", "tpl-a", "vm")
	f.fails(2, "the specified VM \"nope\" does not exist\n", "clone", "nope", "vm2")
	f.fails(64, "Error: <new-name> should be a local name\n"+
		"Usage: tart clone <source-name> <new-name> [--insecure] [--concurrency <concurrency>] [--prune-limit <n>] [--deduplicate]\n"+
		"  See 'tart clone --help' for more information.\n", "clone", "tpl-a", "a/b")
	if entries, _ := os.ReadDir(filepath.Join(f.home, "tmp")); len(entries) != 0 {
		t.Fatalf("tmp/ not empty after clones: %v", entries)
	}
	// A directory that is not a complete VM.
	if err := os.MkdirAll(f.vmPath("broken"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.vmPath("broken", "config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.fails(1, "VM is missing some of its files (config.json, disk.img or nvram.bin)\n", "clone", "broken", "x")
	if f.state("broken") != "absent" {
		t.Fatal("an incomplete VM directory is listed")
	}
}

func TestRunBootsGuestListStopDelete(t *testing.T) {
	f := newFixture(t)
	faketarttest.Template(t, f.home, "tpl", []string{"/bin/sh", "-c", guestScript}, map[string]string{"GREETING": "hello"})
	f.ok("clone", "tpl", "fa-7-1")
	f.ok("set", "fa-7-1", "--cpu", "5", "--memory", "6144")
	shared := t.TempDir()
	run := f.start("--no-graphics", "--no-audio", "--no-clipboard", "--dir", "build-config:"+shared, "fa-7-1")

	if got := waitFile(t, filepath.Join(shared, "out"), 5*time.Second); got != "hi\n" {
		t.Fatalf("shared file = %q", got)
	}
	pgid := guestPID(t, f, "fa-7-1")
	if len(faketarttest.GroupPIDs(pgid)) < 2 {
		t.Fatalf("guest group %d: %v (want sh and sleep)", pgid, faketarttest.GroupPIDs(pgid))
	}
	link, err := os.Readlink(f.vmPath("fa-7-1", ".faketart", "guest", "Volumes", "My Shared Files", "build-config"))
	if err != nil || link != shared {
		t.Fatalf("share symlink = %q, %v", link, err)
	}
	// The guest's environment and working directory.
	procEnv, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pgid))
	for _, kv := range []string{"TART_FAKE_VM_NAME=fa-7-1", "TART_FAKE_CPU=5", "TART_FAKE_MEMORY_MB=6144", "GREETING=hello",
		"TART_FAKE_SHARED_FILES=" + f.vmPath("fa-7-1", ".faketart", "guest", "Volumes", "My Shared Files")} {
		if !bytes.Contains(procEnv, []byte(kv+"\x00")) {
			t.Errorf("guest env lacks %s", kv)
		}
	}
	if bytes.Contains(procEnv, []byte("TART_HOME=")) {
		t.Error("guest inherited the host's TART_HOME")
	}
	// A LaunchAgent gets launchd's PATH, never the host's.
	if !bytes.Contains(append([]byte{0}, procEnv...), []byte("\x00PATH=/usr/bin:/bin:/usr/sbin:/sbin\x00")) {
		t.Errorf("guest PATH is not launchd's: %q", procEnv)
	}
	if cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pgid)); cwd != f.vmPath("fa-7-1", ".faketart", "guest", "Users", "admin") {
		t.Errorf("guest cwd = %s", cwd)
	}

	l := f.list()
	var e listEntry
	for _, x := range l {
		if x.Name == "fa-7-1" {
			e = x
		}
	}
	if !e.Running || e.State != "running" {
		t.Fatalf("running VM listed as %+v", e)
	}
	// The address comes once the guest has booted (the guest process may
	// start just before): --wait, as the driver asks.
	if got := f.ok("ip", "fa-7-1", "--wait", "30"); got != "127.0.0.1\n" {
		t.Fatalf("ip = %q", got)
	}
	if got := f.with("FAKETART_IP=192.168.64.7").ok("ip", "fa-7-1", "--wait", "5"); got != "192.168.64.7\n" {
		t.Fatalf("ip = %q", got)
	}
	f.fails(2, "VM \"fa-7-1\" is already running!\n", "run", "--no-graphics", "fa-7-1")
	f.fails(1, "VM \"fa-7-1\" is running\n", "delete", "fa-7-1")
	// set works on a running VM and keeps the lock visible.
	f.ok("set", "fa-7-1", "--random-mac")
	if f.state("fa-7-1") != "running" {
		t.Fatal("set on a running VM made it look stopped")
	}

	start := time.Now()
	f.ok("stop", "fa-7-1")
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("stop took %v", d)
	}
	if code := run.wait(t, 5*time.Second); code != 0 {
		t.Fatalf("tart run exit %d, stderr %q", code, run.err.String())
	}
	if run.out.String() != "Stopping VM...\n" || run.err.String() != "" {
		t.Fatalf("tart run stdout %q stderr %q", run.out.String(), run.err.String())
	}
	assertGroupGone(t, pgid)
	if s := f.state("fa-7-1"); s != "stopped" {
		t.Fatalf("state after stop = %s", s)
	}
	f.fails(2, "VM \"fa-7-1\" is not running\n", "stop", "fa-7-1")
	f.fails(1, "no IP address found, is your VM running?\n", "ip", "fa-7-1")
	f.ok("delete", "fa-7-1")
	if _, err := os.Stat(f.vmPath("fa-7-1")); !os.IsNotExist(err) {
		t.Fatalf("VM directory left after delete: %v", err)
	}
	f.fails(2, "the specified VM \"fa-7-1\" does not exist\n", "delete", "fa-7-1")
}

func TestSIGKILLOfRunKillsGuest(t *testing.T) {
	f := newFixture(t)
	faketarttest.Template(t, f.home, "tpl", []string{"/bin/sh", "-c", guestScript}, nil)
	f.ok("clone", "tpl", "vm")
	shared := t.TempDir()
	run := f.start("--no-graphics", "--dir", "build-config:"+shared, "vm")
	waitFile(t, filepath.Join(shared, "out"), 5*time.Second)
	pgid := guestPID(t, f, "vm")
	if err := run.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	run.wait(t, 5*time.Second)
	assertGroupGone(t, pgid)
	if s := f.state("vm"); s != "stopped" {
		t.Fatalf("state after SIGKILL = %s", s)
	}
	f.fails(2, "VM \"vm\" is not running\n", "stop", "vm")
	// SIGTERM is not handled by tart either: default termination.
	run2 := f.start("--no-graphics", "--dir", "build-config:"+shared, "vm")
	pid2 := 0
	faketarttest.WaitFor(5*time.Second, func() bool {
		s, _ := os.ReadFile(f.vmPath("vm", ".faketart", "guest", "pid"))
		pid2, _ = strconv.Atoi(strings.TrimSpace(string(s)))
		return pid2 != 0 && pid2 != pgid
	})
	_ = run2.cmd.Process.Signal(syscall.SIGTERM)
	run2.wait(t, 5*time.Second)
	assertGroupGone(t, pid2)
	f.ok("delete", "vm")
}

func TestMacOSVMLimit(t *testing.T) {
	f := newFixture(t)
	faketarttest.Template(t, f.home, "tpl", []string{"/bin/sh", "-c", "sleep 60"}, nil)
	for _, n := range []string{"a", "b", "c"} {
		f.ok("clone", "tpl", n)
	}
	ra := f.start("--no-graphics", "a")
	rb := f.start("--no-graphics", "b")
	faketarttest.WaitFor(5*time.Second, func() bool { return f.state("a") == "running" && f.state("b") == "running" })
	f.fails(1, "The number of VMs exceeds the system limit (other running VMs: a, b)\n", "run", "--no-graphics", "c")
	if s := f.state("c"); s != "stopped" {
		t.Fatalf("c is %s", s)
	}
	// Linux guests are not counted.
	f.ok("create", "--linux", "lin")
	rl := f.start("--no-graphics", "lin")
	faketarttest.WaitFor(5*time.Second, func() bool { return f.state("lin") == "running" })
	if rl.exited() {
		t.Fatalf("linux VM did not run: %q", rl.err.String())
	}
	// A higher limit lets the third one boot.
	rc := f.with("FAKETART_MAX_MACOS_VMS=3").start("--no-graphics", "c")
	faketarttest.WaitFor(5*time.Second, func() bool { return f.state("c") == "running" })
	for _, n := range []string{"a", "b", "c", "lin"} {
		f.ok("stop", n)
	}
	for _, r := range []*runProc{ra, rb, rc, rl} {
		if code := r.wait(t, 5*time.Second); code != 0 {
			t.Fatalf("run exit %d: %s", code, r.err.String())
		}
	}
}

func TestMacOSVMLimitAcrossHomesWithSlotsDir(t *testing.T) {
	slots := t.TempDir()
	f1 := newFixture(t, "FAKETART_SLOTS_DIR="+slots, "FAKETART_MAX_MACOS_VMS=1")
	home2 := faketarttest.Home(t)
	f2 := &fixture{t: t, bin: f1.bin, home: home2, env: faketarttest.Env(home2, "FAKETART_SLOTS_DIR="+slots, "FAKETART_MAX_MACOS_VMS=1", marker)}
	faketarttest.Template(t, f1.home, "one", nil, nil)
	faketarttest.Template(t, f2.home, "two", nil, nil)
	r1 := f1.start("--no-graphics", "one")
	faketarttest.WaitFor(5*time.Second, func() bool { return f1.state("one") == "running" })
	// Tart names only the running VMs of its own TART_HOME: none here.
	f2.fails(1, "The number of VMs exceeds the system limit\n", "run", "--no-graphics", "two")
	// A running Linux VM of this home is named, although it does not count.
	f2.ok("create", "--linux", "lin")
	rl := f2.start("--no-graphics", "lin")
	faketarttest.WaitFor(5*time.Second, func() bool { return f2.state("lin") == "running" })
	f2.fails(1, "The number of VMs exceeds the system limit (other running VMs: lin)\n", "run", "--no-graphics", "two")
	f2.ok("stop", "lin")
	rl.wait(t, 5*time.Second)
	// The slot is freed even when the holder is SIGKILLed.
	_ = r1.cmd.Process.Kill()
	r1.wait(t, 5*time.Second)
	r2 := f2.start("--no-graphics", "two")
	faketarttest.WaitFor(5*time.Second, func() bool { return f2.state("two") == "running" })
	if r2.exited() {
		t.Fatalf("second home could not run: %q", r2.err.String())
	}
	f2.ok("stop", "two")
	r2.wait(t, 5*time.Second)
}

func TestRunFailInjection(t *testing.T) {
	f := newFixture(t)
	faketarttest.Template(t, f.home, "tpl", []string{"/bin/sh", "-c", guestScript}, nil)
	f.ok("clone", "tpl", "vm")
	shared := t.TempDir()
	vz := `Error Domain=VZErrorDomain Code=1 "The virtual machine failed to start." UserInfo={NSLocalizedFailure=The virtual machine failed to start.}`

	// Immediate failure: no guest.
	f.with("FAKETART_RUN_FAIL=0:"+vz).fails(1, vz+"\n", "run", "--no-graphics", "--dir", "build-config:"+shared, "vm")
	if _, err := os.Stat(filepath.Join(shared, "out")); err == nil {
		t.Fatal("guest ran although the start failed")
	}
	// Failure after the guest has booted: the guest dies with the VM.
	r := f.with("FAKETART_BOOT_DELAY=0", "FAKETART_RUN_FAIL=400ms:late failure").start("--no-graphics", "--dir", "build-config:"+shared, "vm")
	waitFile(t, filepath.Join(shared, "out"), 5*time.Second)
	pgid := guestPID(t, f, "vm")
	if code := r.wait(t, 5*time.Second); code != 1 || r.err.String() != "late failure\n" {
		t.Fatalf("run exit %d stderr %q", code, r.err.String())
	}
	assertGroupGone(t, pgid)
	if s := f.state("vm"); s != "stopped" {
		t.Fatalf("state %s", s)
	}
}

func TestGuestShutdownAndPoweroff(t *testing.T) {
	f := newFixture(t)
	faketarttest.Template(t, f.home, "exits", []string{"/bin/sh", "-c", "exit 3"}, nil)
	faketarttest.Template(t, f.home, "poweroff", []string{"/bin/sh", "-c", `echo $$ > "$TART_FAKE_GUEST_ROOT/pid"; sleep 60 & touch "$TART_FAKE_POWEROFF"; wait`}, nil)

	// By default the VM outlives its guest program.
	r := f.start("--no-graphics", "exits")
	time.Sleep(300 * time.Millisecond)
	if r.exited() || f.state("exits") != "running" {
		t.Fatal("VM stopped when its guest program exited")
	}
	f.ok("stop", "exits")
	r.wait(t, 5*time.Second)

	// FAKETART_GUEST_EXIT=shutdown: guest exit powers the VM off.
	r = f.with("FAKETART_GUEST_EXIT=shutdown").start("--no-graphics", "exits")
	if code := r.wait(t, 5*time.Second); code != 0 || r.out.String() != "guest has stopped the virtual machine\n" {
		t.Fatalf("exit %d stdout %q stderr %q", code, r.out.String(), r.err.String())
	}

	// The guest touches the poweroff file.
	r = f.start("--no-graphics", "poweroff")
	if code := r.wait(t, 5*time.Second); code != 0 || r.out.String() != "guest has stopped the virtual machine\n" {
		t.Fatalf("exit %d stdout %q", code, r.out.String())
	}
	pgid, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, f.vmPath("poweroff", ".faketart", "guest", "pid"), time.Second)))
	assertGroupGone(t, pgid)
}

func TestSIGUSR2RequestsGuestStop(t *testing.T) {
	f := newFixture(t)
	faketarttest.Template(t, f.home, "vm", []string{"/bin/sh", "-c", `echo $$ > "$TART_FAKE_GUEST_ROOT/pid"; trap 'exit 0' TERM; sleep 60 & wait`}, nil)
	r := f.start("--no-graphics", "vm")
	pgid := guestPID(t, f, "vm")
	time.Sleep(50 * time.Millisecond) // let the trap be installed
	_ = r.cmd.Process.Signal(syscall.SIGUSR2)
	if code := r.wait(t, 5*time.Second); code != 0 || r.out.String() != "Requesting guest OS to stop...\nguest has stopped the virtual machine\n" {
		t.Fatalf("exit %d stdout %q", code, r.out.String())
	}
	assertGroupGone(t, pgid)
}

func TestStopEscalatesToSIGKILL(t *testing.T) {
	f := newFixture(t)
	faketarttest.Template(t, f.home, "vm", nil, nil)
	hold := faketarttest.Command(f.bin, f.env, "__fake", "hold", "--ignore-sigint", "vm")
	stdout, _ := hold.StdoutPipe()
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	_, _ = stdout.Read(buf) // "holding"
	if s := f.state("vm"); s != "running" {
		t.Fatalf("held VM is %s", s)
	}
	start := time.Now()
	f.ok("stop", "vm", "--timeout", "1")
	if d := time.Since(start); d < 900*time.Millisecond || d > 3*time.Second {
		t.Fatalf("stop --timeout 1 took %v", d)
	}
	err := hold.Wait()
	if ws, ok := hold.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("holder ended with %v", err)
	}
}

func TestDirShareVariants(t *testing.T) {
	f := newFixture(t)
	faketarttest.Template(t, f.home, "vm", nil, nil)
	a, b := t.TempDir(), t.TempDir()
	guest := f.vmPath("vm", ".faketart", "guest")

	// One unnamed share is the mount point itself; a custom tag is not automounted.
	r := f.start("--no-graphics", "--dir", a+":ro", "--dir", "src:"+b+":ro,tag=build", "vm")
	faketarttest.WaitFor(5*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(f.home, "vms", "vm", ".faketart", "booted"))
		return err == nil
	})
	// Read-only shares are mounted in the guest's own namespace: outside
	// it, their places are empty directories.
	if st, err := os.Lstat(filepath.Join(guest, "Volumes", "My Shared Files")); err != nil || !st.IsDir() {
		t.Fatalf("unnamed read-only share: %v %v", st, err)
	}
	if st, err := os.Lstat(filepath.Join(guest, "tags", "build", "src")); err != nil || !st.IsDir() {
		t.Fatalf("tagged read-only share: %v %v", st, err)
	}
	f.ok("stop", "vm")
	r.wait(t, 5*time.Second)

	f.fails(64, "Error: invalid --dir syntax: for multiple directory shares each one of them should be named\n"+
		"Usage: tart <subcommand>\n  See 'tart --help' for more information.\n",
		"run", "--no-graphics", "--dir", a, "--dir", b, "vm")
	missing := filepath.Join(a, "missing")
	f.fails(1, fmt.Sprintf("Error: Invalid virtual machine configuration. The directory share path %q does not exist or is not a directory.\n", missing),
		"run", "--no-graphics", "--dir", "x:"+missing, "vm")
	if s := f.state("vm"); s != "stopped" {
		t.Fatalf("state %s", s)
	}
}

// TestReadOnlyShare: a share with ro is read-only for the guest, as
// through Tart's virtio-fs: the guest reads it, and creating, changing or
// removing a file in it fails; the host directory is untouched. A share
// without ro beside it stays writable.
func TestReadOnlyShare(t *testing.T) {
	f := newFixture(t)
	in, out := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(in, "cache.tar"), []byte("cached"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `s="$TART_FAKE_SHARED_FILES"
cat "$s/in/cache.tar" > "$s/out/seen"
for op in 'touch "$s/in/new"' 'echo x >> "$s/in/cache.tar"' 'rm -f "$s/in/cache.tar"' 'chmod 666 "$s/in/cache.tar"'; do
	if sh -c "s='$s'; $op" 2>/dev/null; then echo "allowed: $op" >> "$s/out/result"; else echo "refused" >> "$s/out/result"; fi
done
touch "$s/out/done"`
	faketarttest.Template(t, f.home, "vm", []string{"/bin/sh", "-c", script}, nil)
	r := f.start("--no-graphics", "--dir", "in:"+in+":ro", "--dir", "out:"+out, "vm")
	if !faketarttest.WaitFor(10*time.Second, func() bool { _, err := os.Stat(filepath.Join(out, "done")); return err == nil }) {
		log, _ := os.ReadFile(f.vmPath("vm", ".faketart", "guest.log"))
		t.Fatalf("the guest did not finish; guest.log:\n%s", log)
	}
	f.ok("stop", "vm")
	r.wait(t, 5*time.Second)
	if seen, _ := os.ReadFile(filepath.Join(out, "seen")); string(seen) != "cached" {
		t.Errorf("the guest read %q from the read-only share", seen)
	}
	if res, _ := os.ReadFile(filepath.Join(out, "result")); string(res) != strings.Repeat("refused\n", 4) {
		t.Errorf("writes to the read-only share:\n%s", res)
	}
	entries, _ := os.ReadDir(in)
	data, _ := os.ReadFile(filepath.Join(in, "cache.tar"))
	if len(entries) != 1 || string(data) != "cached" {
		t.Errorf("the host directory changed: %d entries, cache.tar %q", len(entries), data)
	}
}

func TestUsageErrors(t *testing.T) {
	f := newFixture(t)
	faketarttest.Template(t, f.home, "vm", nil, nil)
	cases := []struct {
		args   []string
		stderr string
	}{
		{[]string{"frobnicate"}, "Error: Unexpected argument 'frobnicate'\nUsage: tart <subcommand>\n  See 'tart --help' for more information.\n"},
		{[]string{"stop"}, "Error: Missing expected argument '<name>'\nHelp:  <name>  VM name\nUsage: tart stop <name> [--timeout <timeout>]\n  See 'tart stop --help' for more information.\n"},
		{[]string{"list", "--bogus"}, "Error: Unknown option '--bogus'\nUsage: tart list [--source <source>] [--format <format>] [--quiet]\n  See 'tart list --help' for more information.\n"},
		{[]string{"list", "--source", "nfs"}, "Error: 'nfs' is not a valid <source>\nUsage: tart list [--source <source>] [--format <format>] [--quiet]\n  See 'tart list --help' for more information.\n"},
		{[]string{"delete"}, "Error: Missing expected argument '<name>'\nHelp:  <name>  VM name\nUsage: tart delete <name> ...\n  See 'tart delete --help' for more information.\n"},
		{[]string{"stop", "vm", "extra"}, "Error: Unexpected argument 'extra'\nUsage: tart stop <name> [--timeout <timeout>]\n  See 'tart stop --help' for more information.\n"},
		{[]string{"stop", "vm", "--timeout"}, "Error: Missing value for '--timeout <timeout>'\nHelp:  --timeout <timeout>  Seconds to wait for graceful termination before forcefully terminating the VM\nUsage: tart stop <name> [--timeout <timeout>]\n  See 'tart stop --help' for more information.\n"},
	}
	for _, c := range cases {
		f.fails(64, c.stderr, c.args...)
	}
	// Only the first lines are checked for the long `run` and `set` usages.
	for _, args := range [][]string{
		{"run", "--net-softnet", "--net-host", "vm"},
		{"run", "--graphics", "--no-graphics", "vm"},
		{"set", "vm", "--cpu", "many"},
		{"run", "--no-such-flag", "vm"},
		{"create", "x"},
		{"clone", "vm"},
	} {
		r := f.tart(args...)
		lines := strings.Split(r.Stderr, "\n")
		if r.Code != 64 || !strings.HasPrefix(lines[0], "Error: ") || !strings.HasPrefix(r.Stderr[strings.Index(r.Stderr, "Usage: "):], "Usage: tart") ||
			!strings.HasSuffix(r.Stderr, "' for more information.\n") {
			t.Errorf("tart %v: exit %d stderr %q", args, r.Code, r.Stderr)
		}
	}
	if r := f.tart("--version"); r.Code != 0 || r.Stdout != "2.32.0\n" {
		t.Errorf("--version: %+v", r)
	}
	if r := f.tart("stop", "--help"); r.Code != 0 || !strings.Contains(r.Stdout, "USAGE: tart stop <name>") {
		t.Errorf("stop --help: %+v", r)
	}
}

func TestMissingVMAndStateMessages(t *testing.T) {
	f := newFixture(t)
	faketarttest.Template(t, f.home, "vm", nil, nil)
	// run fails in validate(): "Error: " prefix and exit 1.
	f.fails(1, "Error: the specified VM \"ghost\" does not exist\n", "run", "--no-graphics", "ghost")
	for _, args := range [][]string{{"stop", "ghost"}, {"delete", "ghost"}, {"set", "ghost", "--cpu", "4"}, {"get", "ghost"}, {"ip", "ghost"}} {
		f.fails(2, "the specified VM \"ghost\" does not exist\n", args...)
	}
	f.fails(2, "VM \"vm\" is not running\n", "stop", "vm")
	f.fails(2, "VM \"vm\" is not running\n", "exec", "vm", "true")
	// delete stops at the first failure.
	faketarttest.Template(t, f.home, "other", nil, nil)
	f.fails(2, "the specified VM \"ghost\" does not exist\n", "delete", "vm", "ghost", "other")
	if f.state("vm") != "absent" || f.state("other") != "stopped" {
		t.Fatalf("delete vm ghost other: %+v", f.list())
	}
}

func TestSetMinimumsAndDiskSize(t *testing.T) {
	f := newFixture(t)
	faketarttest.Template(t, f.home, "mac", nil, nil)
	f.fails(1, "Error: LessThanMinimalResourcesError: VM should have 4 CPU cores at minimum (requested 2)\n", "set", "mac", "--cpu", "2")
	f.fails(1, "Error: LessThanMinimalResourcesError: VM should have 4294967296 bytes of memory at minimum (requested 2147483648)\n", "set", "mac", "--memory", "2048")
	if c := f.config("mac"); c["cpuCount"] != 4.0 {
		t.Fatalf("config changed by a failed set: %v", c)
	}
	f.fails(1, "new disk size of 40 GB should be larger than the current disk size of 50 GB\n", "set", "mac", "--disk-size", "40")
	f.ok("set", "mac", "--disk-size", "80", "--display", "1920x1080px")
	if st, _ := os.Stat(f.vmPath("mac", "disk.img")); st.Size() != 80e9 {
		t.Fatalf("disk size %d", st.Size())
	}
	if d := f.config("mac")["display"].(map[string]any); d["width"] != 1920.0 || d["unit"] != "px" {
		t.Fatalf("display %v", d)
	}
	// Linux VMs have no template minimums.
	f.ok("create", "--linux", "lin")
	f.ok("set", "lin", "--cpu", "2", "--memory", "1024")
}

func TestTmpGarbageCollection(t *testing.T) {
	f := newFixture(t)
	faketarttest.Template(t, f.home, "tpl", nil, nil)
	tmp := filepath.Join(f.home, "tmp")
	if err := os.MkdirAll(filepath.Join(tmp, "stale-clone", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "stale-file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// An in-progress clone: the directory is flock-ed by its owner.
	busy := filepath.Join(tmp, "busy-clone")
	if err := os.Mkdir(busy, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, ok, err := flockPath(busy, false)
	if err != nil || !ok {
		t.Fatalf("flock: %v", err)
	}
	defer lock.Close()

	// pull and clone do not collect.
	f.ok("clone", "tpl", "x")
	f.with("FAKETART_REGISTRY="+t.TempDir()).tart("pull", "example.com/none:latest")
	if _, err := os.Stat(filepath.Join(tmp, "stale-clone")); err != nil {
		t.Fatal("clone/pull collected tmp/")
	}
	f.ok("list")
	names := func() []string {
		entries, _ := os.ReadDir(tmp)
		var n []string
		for _, e := range entries {
			n = append(n, e.Name())
		}
		return n
	}
	if got := names(); !reflect.DeepEqual(got, []string{"busy-clone"}) {
		t.Fatalf("tmp/ after list = %v", got)
	}
	lock.Close()
	f.ok("get", "x")
	if got := names(); len(got) != 0 {
		t.Fatalf("tmp/ after unlock = %v", got)
	}
}

func TestInvocationLog(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "calls.jsonl")
	f := newFixture(t, "FAKETART_LOG="+logPath)
	faketarttest.Template(t, f.home, "tpl", []string{"/bin/sh", "-c", "sleep 60"}, nil)
	f.ok("clone", "tpl", "vm")
	f.ok("set", "vm", "--random-mac")
	shared := t.TempDir()
	r := f.start("--no-graphics", "--dir", "build-config:"+shared+":ro", "vm")
	faketarttest.WaitFor(5*time.Second, func() bool {
		for _, e := range faketarttest.ReadLog(t, logPath) {
			if e.Event == "boot" {
				return true
			}
		}
		return false
	})
	f.ok("stop", "vm")
	r.wait(t, 5*time.Second)
	f.fails(2, "the specified VM \"nope\" does not exist\n", "delete", "nope")
	f.ok("delete", "vm")

	var got []string
	for _, e := range faketarttest.ReadLog(t, logPath) {
		exit := "null"
		if e.Exit != nil {
			exit = strconv.Itoa(*e.Exit)
		}
		got = append(got, fmt.Sprintf("%s %s %s", e.Event, strings.Join(e.Argv, " "), exit))
		if e.Env["TART_HOME"] != f.home || e.Env["FAKETART_LOG"] != logPath {
			t.Errorf("env subset %v", e.Env)
		}
		if e.Event == "boot" && (e.GuestPID == 0 || e.Cmd != "run") {
			t.Errorf("boot record %+v", e)
		}
		if e.Cmd == "delete" && e.Exit != nil && *e.Exit == 2 && e.Stderr != "the specified VM \"nope\" does not exist\n" {
			t.Errorf("stderr not logged: %+v", e)
		}
		if e.Cmd == "run" && e.Event == "exit" && e.Stdout != "Stopping VM...\n" {
			t.Errorf("run stdout not logged: %+v", e)
		}
	}
	// stop's and run's exit records race; compare order-insensitively around them.
	want := []string{
		"exit clone tpl vm 0",
		"exit set vm --random-mac 0",
		"boot run --no-graphics --dir build-config:" + shared + ":ro vm null",
		"exit run --no-graphics --dir build-config:" + shared + ":ro vm 0",
		"exit stop vm 0",
		"exit delete nope 2",
		"exit delete vm 0",
	}
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestPullAndImplicitPull(t *testing.T) {
	reg := t.TempDir()
	f := newFixture(t, "FAKETART_REGISTRY="+reg, "CI=true")
	faketarttest.RegistryImage(t, reg, "ghcr.io/acme/macos-base:latest", faketarttest.VM{Argv: []string{"/bin/true"}, DiskGB: 30})
	faketarttest.RegistryImage(t, reg, "ghcr.io/acme/macos-base:other", faketarttest.VM{DiskGB: 20})

	out := f.ok("pull", "ghcr.io/acme/macos-base:latest")
	if !strings.HasPrefix(out, "pulling ghcr.io/acme/macos-base:latest...\npulling manifest...\npulling disk (30.0 GB compressed)...\n0%\n") ||
		!strings.HasSuffix(out, "100%\npulling NVRAM...\n") {
		t.Fatalf("pull output:\n%s", out)
	}
	// Implicit pull in clone (no "pulling <name>..." line there).
	r := f.tart("clone", "ghcr.io/acme/macos-base:other", "vm")
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, "pulling manifest...\npulling disk (20.0 GB compressed)...") {
		t.Fatalf("clone: %+v", r)
	}
	// Cached: clone pulls nothing.
	if out := f.ok("clone", "ghcr.io/acme/macos-base:latest", "vm2"); out != "" {
		t.Fatalf("clone of a cached image printed %q", out)
	}
	if _, err := os.Stat(f.vmPath("vm2", "fake-guest.json")); err != nil {
		t.Fatal("guest spec not carried from the registry image")
	}
	var oci []string
	for _, e := range f.list() {
		if e.Source == "OCI" {
			oci = append(oci, e.Name)
		}
	}
	if len(oci) != 4 || oci[0] != "ghcr.io/acme/macos-base:latest" || oci[1] != "ghcr.io/acme/macos-base:other" || !strings.HasPrefix(oci[2], "ghcr.io/acme/macos-base@sha256:") {
		t.Fatalf("OCI entries %v", oci)
	}
	if out := f.ok("pull", "vm"); out != "\"vm\" is a local image, nothing to pull here!\n" {
		t.Fatalf("pull local = %q", out)
	}
	r = f.tart("pull", "ghcr.io/acme/missing:latest")
	if r.Code != 1 || !strings.HasPrefix(r.Stderr, `Error: UnexpectedHTTPStatusCode(when: "pulling manifest", code: 404`) {
		t.Fatalf("missing image: %+v", r)
	}
	f.ok("delete", "ghcr.io/acme/macos-base:other")
	if n := len(f.list()); n != 4 { // vm, vm2, latest tag + its digest
		t.Fatalf("after deleting a tag: %+v", f.list())
	}
}

func TestSIGINTCancelsPullAndCleansTmp(t *testing.T) {
	reg := t.TempDir()
	f := newFixture(t, "FAKETART_REGISTRY="+reg, "FAKETART_PULL_DELAY=5s")
	faketarttest.RegistryImage(t, reg, "ghcr.io/acme/big:latest", faketarttest.VM{})
	cmd := faketarttest.Command(f.bin, f.env, "pull", "ghcr.io/acme/big:latest")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(f.home, "tmp")
	if !faketarttest.WaitFor(5*time.Second, func() bool {
		entries, _ := os.ReadDir(tmp)
		return len(entries) == 1
	}) {
		t.Fatal("pull did not create its temporary directory")
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 1 || stderr.String() != "Error: CancellationError()\n" {
		t.Fatalf("exit %d stderr %q", code, stderr.String())
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Fatalf("tmp/ after cancelled pull: %v", entries)
	}
	if got := f.ok("list", "--source", "oci", "-q"); got != "" {
		t.Fatalf("cancelled pull left %q", got)
	}
}

func TestFailInjectionPerCommand(t *testing.T) {
	f := newFixture(t)
	faketarttest.Template(t, f.home, "vm", nil, nil)
	f.with(`FAKETART_FAIL_DELETE=1:VM "vm" is running`).fails(1, "VM \"vm\" is running\n", "delete", "vm")
	if r := f.with("FAKETART_FAIL_LIST=0:{not json").tart("list", "--format", "json"); r.Code != 0 || r.Stdout != "{not json\n" {
		t.Fatalf("list garbage: %+v", r)
	}
	g := f.with("FAKETART_FAIL_CLONE=1:boom", "FAKETART_FAIL_CLONE_TIMES=2")
	g.fails(1, "boom\n", "clone", "vm", "a")
	g.fails(1, "boom\n", "clone", "vm", "a")
	g.ok("clone", "vm", "a")
	// Usage errors still win over injected failures.
	f.with("FAKETART_FAIL_STOP=1:x").fails(64, "Error: Missing expected argument '<name>'\nHelp:  <name>  VM name\nUsage: tart stop <name> [--timeout <timeout>]\n  See 'tart stop --help' for more information.\n", "stop")
}

func TestSwiftJSON(t *testing.T) {
	got := swiftJSON([]any{obj{{"A", "x/y"}, {"B", 1}, {"C", true}, {"D", obj{}}}}, swiftJSONOptions{})
	want := "[\n  {\n    \"A\" : \"x\\/y\",\n    \"B\" : 1,\n    \"C\" : true,\n    \"D\" : {\n\n    }\n  }\n]"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestParseDirShare(t *testing.T) {
	cwd, _ := os.Getwd()
	home, _ := os.UserHomeDir()
	cases := []struct {
		in   string
		want dirShare
	}{
		{"/a/b", dirShare{path: "/a/b", tag: automountTag}},
		{"build-config:/a/b", dirShare{name: "build-config", path: "/a/b", tag: automountTag}},
		{"build-config:/a/b:ro", dirShare{name: "build-config", path: "/a/b", readOnly: true, tag: automountTag}},
		{"/a/b:ro,tag=t1", dirShare{path: "/a/b", readOnly: true, tag: "t1"}},
		{"n:rel/dir", dirShare{name: "n", path: filepath.Join(cwd, "rel/dir"), tag: automountTag}},
		{"~/x", dirShare{path: filepath.Join(home, "x"), tag: automountTag}},
	}
	for _, c := range cases {
		got, err := parseDirShare(c.in)
		c.want.raw = c.in
		if err != nil || got != c.want {
			t.Errorf("parseDirShare(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

// TestSoftnetMustBeOnPath: Tart runs Softnet as a child found on its own
// PATH (a LaunchAgent's PATH lacks /opt/homebrew/bin); --net-softnet-allow,
// -block and -expose imply --net-softnet, and exclude the other modes.
func TestSoftnetMustBeOnPath(t *testing.T) {
	f := newFixture(t)
	faketarttest.Template(t, f.home, "vm", nil, nil)
	bare := f.with("PATH=/usr/bin:/bin:/usr/sbin:/sbin")
	const missing = "Error: InitializationFailed(why: \"softnet not found in PATH\")\n"
	for _, args := range [][]string{
		{"run", "--no-graphics", "--net-softnet", "vm"},
		{"run", "--no-graphics", "--net-softnet-allow", "192.168.64.0/24", "vm"},
		{"run", "--no-graphics", "--net-host", "vm"},
	} {
		bare.fails(1, missing, args...)
	}
	if r := bare.tart("run", "--no-graphics", "--net-softnet-expose", "2222:22", "--net-bridged", "en0", "vm"); r.Code != 64 ||
		!strings.HasPrefix(r.Stderr, "Error: --net-bridged, --net-softnet and --net-host are mutually exclusive\n") {
		t.Fatalf("implied --net-softnet with --net-bridged: %+v", r)
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "softnet"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	withSoftnet := f.with("PATH=/usr/bin:/bin:" + bin)
	r := withSoftnet.start("--no-graphics", "--net-softnet", "vm")
	faketarttest.WaitFor(5*time.Second, func() bool { return f.state("vm") == "running" || r.exited() })
	if r.exited() {
		t.Fatalf("run with softnet on PATH: %q", r.err.String())
	}
	f.ok("stop", "vm")
	r.wait(t, 5*time.Second)
}

// On Tart's default network a guest sees the host at 192.168.64.1 and its
// own loopback at 127.0.0.1: a service on the host's loopback is out of its
// reach. FAKETART_NET=vmnet reproduces that with a network namespace.
func TestVMNetGuestSeesHostAtGateway(t *testing.T) {
	if !faketarttest.VMNet(t) {
		t.Skip("no vmnet emulation here (reason logged above)")
	}
	loop, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer loop.Close()
	all, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	peers := make(chan string, 4)
	for _, l := range []net.Listener{loop, all} {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				peers <- l.Addr().String() + " from " + c.RemoteAddr().(*net.TCPAddr).IP.String()
				c.Close()
			}
		}()
	}
	loopPort, allPort := loop.Addr().(*net.TCPAddr).Port, all.Addr().(*net.TCPAddr).Port
	script := fmt.Sprintf(`if bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d' 2>/dev/null; then echo loopback=reached; else echo loopback=refused; fi
if bash -c 'exec 3<>/dev/tcp/192.168.64.1/%d'; then echo gateway=reached; else echo gateway=refused; fi
echo done > "$TART_FAKE_GUEST_ROOT/done"; sleep 60`, loopPort, allPort)
	f := newFixture(t, "FAKETART_NET=vmnet")
	faketarttest.Template(t, f.home, "tpl", []string{"/bin/sh", "-c", script}, nil)
	f.ok("clone", "tpl", "net-1")
	run := f.start("--no-graphics", "net-1")
	waitFile(t, f.vmPath("net-1", ".faketart", "guest", "done"), 10*time.Second)
	log, _ := os.ReadFile(f.vmPath("net-1", ".faketart", "guest.log"))
	if !strings.Contains(string(log), "loopback=refused\n") || !strings.Contains(string(log), "gateway=reached\n") {
		t.Fatalf("guest.log:\n%s", log)
	}
	ip := strings.TrimSpace(f.ok("ip", "net-1"))
	if !strings.HasPrefix(ip, "192.168.64.") || ip == "192.168.64.1" {
		t.Fatalf("tart ip = %q, want a lease on 192.168.64.0/24", ip)
	}
	select {
	case p := <-peers:
		if want := all.Addr().String() + " from " + ip; p != want {
			t.Fatalf("host saw %q, want %q", p, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the host's listener saw no connection")
	}
	hostIf := "fa-vm" + strings.TrimPrefix(ip, "192.168.64.")
	if err := exec.Command("ip", "link", "show", "dev", hostIf).Run(); err != nil {
		t.Fatalf("no host interface %s while the VM runs: %v", hostIf, err)
	}
	f.ok("stop", "net-1")
	if code := run.wait(t, 5*time.Second); code != 0 {
		t.Fatalf("tart run exit %d, stderr %q", code, run.err.String())
	}
	// The namespace dies with the guest, and its veth pair with it.
	if !faketarttest.WaitFor(3*time.Second, func() bool { return exec.Command("ip", "link", "show", "dev", hostIf).Run() != nil }) {
		t.Fatalf("host interface %s outlived its VM", hostIf)
	}
	f.fails(1, "no IP address found, is your VM running?\n", "ip", "net-1")
}

// TestRunValidation: Run.validate() and the VM configuration in run() as
// in Tart 2.32.1 (Sources/tart/Commands/Run.swift): --suspendable takes
// shares (since tart#1082) but no --no-trackpad/-keyboard/-pointer,
// --no-trackpad needs a macOS VM (usage errors, 64); an unknown
// --root-disk-opts mode is a VMConfigurationError (no prefix, exit 1)
// found while configuring the VM, before the VM lock.
func TestRunValidation(t *testing.T) {
	f := newFixture(t)
	faketarttest.Template(t, f.home, "vm", []string{"/bin/sh", "-c", "sleep 60"}, nil)
	f.ok("create", "--linux", "lin")
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--suspendable", "--no-trackpad", "vm"}, "--no-trackpad cannot be used with --suspendable"},
		{[]string{"--suspendable", "--no-keyboard", "vm"}, "--no-keyboard cannot be used with --suspendable"},
		{[]string{"--suspendable", "--no-pointer", "vm"}, "--no-pointer cannot be used with --suspendable"},
		{[]string{"--no-trackpad", "lin"}, "--no-trackpad can only be used with macOS VMs"},
		{[]string{"--suspendable", "lin"}, "You can only suspend macOS VMs"},
	} {
		r := f.tart(append([]string{"run", "--no-graphics"}, c.args...)...)
		if r.Code != 64 || !strings.HasPrefix(r.Stderr, "Error: "+c.msg+"\nUsage: tart run ") {
			t.Errorf("run %v: exit %d stderr %q, want 64 and %q", c.args, r.Code, r.Stderr, c.msg)
		}
	}
	share := t.TempDir()
	for _, args := range [][]string{
		{"--suspendable", "--dir", share, "vm"},
		{"--root-disk-opts", "ro,bogus,sync=fsync,caching=cached", "vm"},
	} {
		r := f.start(append([]string{"--no-graphics"}, args...)...)
		faketarttest.WaitFor(5*time.Second, func() bool { return f.state("vm") == "running" || r.exited() })
		if r.exited() {
			t.Fatalf("run %v: exit %d %q", args, r.code, r.err.String())
		}
		if args[0] == "--root-disk-opts" {
			// Found before the lock: the configuration error, not "already running".
			f.fails(1, "unsupported disk image synchronization mode: \"bogus\"\n", "run", "--no-graphics", "--root-disk-opts", "sync=bogus", "vm")
			f.fails(1, "unsupported disk image caching mode: \"on\"\n", "run", "--no-graphics", "--root-disk-opts", "caching=on,sync=none", "vm")
		}
		f.ok("stop", "vm")
		r.wait(t, 5*time.Second)
	}
}

// TestParseTimeValueErrors: argument-parser 1.6 (Tart's Package.resolved)
// converts option values while parsing, before a command's validate(), and
// lists an enum's values (allValueStrings) after the error.
func TestParseTimeValueErrors(t *testing.T) {
	f := newFixture(t)
	faketarttest.Template(t, f.home, "vm", nil, nil)
	for _, c := range []struct {
		args  []string
		first string
	}{
		{[]string{"ip", "vm", "--resolver", "mdns"}, "Error: The value 'mdns' is invalid for '--resolver <resolver>'. Please provide one of 'dhcp', 'arp' or 'agent'."},
		{[]string{"list", "--format", "yaml"}, "Error: The value 'yaml' is invalid for '--format <format>'. Please provide one of 'text' and 'json'."},
		{[]string{"get", "vm", "--format", "JSON"}, "Error: The value 'JSON' is invalid for '--format <format>'. Please provide one of 'text' and 'json'."},
		{[]string{"create", "x", "--linux", "--disk-format", "qcow2"}, "Error: The value 'qcow2' is invalid for '--disk-format <disk-format>'. Please provide one of 'raw' and 'asif'."},
		// Parse errors come before validate()'s rules.
		{[]string{"create", "x", "--disk-size", "big"}, "Error: The value 'big' is invalid for '--disk-size <disk-size>'"},
		{[]string{"clone", "vm", "a/b", "--concurrency", "many"}, "Error: The value 'many' is invalid for '--concurrency <concurrency>'"},
	} {
		r := f.tart(c.args...)
		if first, _, _ := strings.Cut(r.Stderr, "\n"); r.Code != 64 || first != c.first {
			t.Errorf("tart %v: exit %d stderr %q, want 64 and %q", c.args, r.Code, r.Stderr, c.first)
		}
	}
	// DiskImageFormat lowercases its argument; Swift's integers take a '+'.
	f.ok("create", "--linux", "--disk-format", "RAW", "--disk-size", "+20", "lin")
	if c := f.config("lin"); c["diskFormat"] != "raw" {
		t.Errorf("diskFormat %v, want raw", c["diskFormat"])
	}
	f.ok("set", "lin", "--cpu", "+3")
	if c := f.config("lin"); c["cpuCount"] != 3.0 {
		t.Errorf("cpuCount %v, want 3", c["cpuCount"])
	}
}

// Tart's automatic pruning (Prune.reclaimIfNeeded): a clone short of space
// deletes cached images, least recently accessed first, sparing the one it
// cloned; TART_NO_AUTO_PRUNE, even empty, turns it off; a cache too small
// to cover the shortfall is left alone.
func TestClonePrunesCachedImagesWhenSpaceIsLow(t *testing.T) {
	bin := faketarttest.Build(t)
	registry := t.TempDir()
	for _, r := range []string{"ghcr.io/a/old:1", "ghcr.io/a/new:1"} {
		faketarttest.RegistryImage(t, registry, r, faketarttest.VM{DiskGB: 1})
	}
	setup := func(t *testing.T) string {
		home := faketarttest.Home(t)
		faketarttest.WriteVM(t, filepath.Join(home, "vms", "local"), faketarttest.VM{DiskGB: 1})
		for i, r := range []string{"ghcr.io/a/old:1", "ghcr.io/a/new:1"} {
			if res := faketarttest.Run(t, bin, faketarttest.Env(home, "FAKETART_REGISTRY="+registry), "pull", r); res.Code != 0 {
				t.Fatalf("pull %s: %+v", r, res)
			}
			dir := filepath.Join(home, "cache", "OCIs", "ghcr.io", "a", strings.Split(r, "/")[2][:3], "1")
			if err := os.WriteFile(filepath.Join(dir, "nvram.bin"), make([]byte, 4<<20), 0o644); err != nil {
				t.Fatal(err)
			}
			at := time.Now().Add(time.Duration(i-2) * time.Hour) // old before new
			real, _ := filepath.EvalSymlinks(dir)
			if err := os.Chtimes(real, at, at); err != nil {
				t.Fatal(err)
			}
		}
		return home
	}
	cached := func(t *testing.T, home string) string {
		res := faketarttest.Run(t, bin, faketarttest.Env(home), "list", "--source", "oci", "--quiet")
		var tags []string
		for _, n := range strings.Fields(res.Stdout) {
			if !strings.Contains(n, "@") {
				tags = append(tags, n)
			}
		}
		return strings.Join(tags, " ")
	}
	for _, c := range []struct {
		name, src string
		env       []string
		want      string
	}{
		// ~1 MB short: the oldest image goes, and only it.
		{"local", "local", []string{"FAKETART_FREE_BYTES=999000000"}, "ghcr.io/a/new:1"},
		{"no auto prune", "local", []string{"FAKETART_FREE_BYTES=999000000", "TART_NO_AUTO_PRUNE="}, "ghcr.io/a/new:1 ghcr.io/a/old:1"},
		// The image cloned is spared, the next oldest goes.
		{"initiator", "ghcr.io/a/old:1", []string{"FAKETART_FREE_BYTES=999000000"}, "ghcr.io/a/old:1"},
		// 500 MB short: the cache cannot cover it, nothing goes.
		{"too little cache", "local", []string{"FAKETART_FREE_BYTES=500000000"}, "ghcr.io/a/new:1 ghcr.io/a/old:1"},
		{"enough space", "local", []string{"FAKETART_FREE_BYTES=2000000000"}, "ghcr.io/a/new:1 ghcr.io/a/old:1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := setup(t)
			if res := faketarttest.Run(t, bin, faketarttest.Env(home, c.env...), "clone", c.src, "copy"); res.Code != 0 {
				t.Fatalf("clone: %+v", res)
			}
			if got := cached(t, home); got != c.want {
				t.Fatalf("cached after clone: %q, want %q", got, c.want)
			}
		})
	}
}

// TestSuspendAndResume: `tart suspend` is SIGUSR1 to the VM's `tart run`
// (Suspend.swift), which saves state.vzvmsave and exits 0 when the VM was
// started --suspendable (Run.swift); the VM is then "suspended", holds no
// VM slot, and the next `tart run` resumes it (implicitly suspendable);
// `stop` of a suspended VM drops the snapshot. Without --suspendable
// Virtualization.framework refuses the save and Tart exits 1, which powers
// the VM off.
func TestSuspendAndResume(t *testing.T) {
	f := newFixture(t, "FAKETART_MAX_MACOS_VMS=1")
	faketarttest.Template(t, f.home, "tpl", []string{"/bin/sh", "-c", guestScript}, nil)
	f.ok("clone", "tpl", "vm")
	f.fails(2, "VM \"VM \\\"vm\\\" is not running\" is not running\n", "suspend", "vm")
	f.fails(2, "the specified VM \"nope\" does not exist\n", "suspend", "nope")

	shared := t.TempDir()
	run := f.start("--no-graphics", "--suspendable", "--dir", "build-config:"+shared, "vm")
	pgid := guestPID(t, f, "vm")
	f.ok("suspend", "vm")
	if code := run.wait(t, 5*time.Second); code != 0 {
		t.Fatalf("suspended run: exit %d, stderr %q", code, run.err.String())
	}
	if want := "pausing VM to take a snapshot...\ncreating a snapshot...\nsnapshot created successfully! shutting down the VM...\n"; run.out.String() != want {
		t.Fatalf("suspended run printed %q, want %q", run.out.String(), want)
	}
	assertGroupGone(t, pgid)
	if s := f.state("vm"); s != "suspended" {
		t.Fatalf("state after suspend = %s", s)
	}
	// A suspended VM holds no VM slot: another one may run meanwhile.
	f.ok("clone", "tpl", "other")
	other := f.start("--no-graphics", "other")
	guestPID(t, f, "other")
	f.ok("stop", "other")
	other.wait(t, 5*time.Second)

	os.Remove(filepath.Join(shared, "out"))
	resumed := f.with("FAKETART_RESUME_DELAY=0").start("--no-graphics", "--dir", "build-config:"+shared, "vm")
	waitFile(t, filepath.Join(shared, "out"), 5*time.Second)
	if !strings.HasPrefix(resumed.out.String(), "restoring VM state from a snapshot...\nresuming VM...\n") {
		t.Fatalf("resumed run printed %q", resumed.out.String())
	}
	if _, err := os.Stat(f.vmPath("vm", "state.vzvmsave")); !os.IsNotExist(err) {
		t.Fatalf("the snapshot outlived the resume: %v", err)
	}
	// Resumed VMs are suspendable again without the flag.
	f.ok("suspend", "vm")
	resumed.wait(t, 5*time.Second)
	f.ok("stop", "vm")
	if s := f.state("vm"); s != "stopped" {
		t.Fatalf("state after stopping a suspended VM = %s", s)
	}

	// The last guest's pid file stays behind: the next guestPID must wait
	// for the new guest, not read the old one.
	stalePID := f.vmPath("vm", ".faketart", "guest", "pid")
	os.Remove(stalePID)
	plain := f.start("--no-graphics", "vm")
	guestPID(t, f, "vm")
	f.ok("suspend", "vm")
	if code := plain.wait(t, 5*time.Second); code != 1 || !strings.HasPrefix(plain.out.String(), "Failed to suspend the VM: ") {
		t.Fatalf("suspend without --suspendable: exit %d, stdout %q", code, plain.out.String())
	}
	if s := f.state("vm"); s != "stopped" {
		t.Fatalf("state after a refused suspend = %s", s)
	}
	os.Remove(stalePID)
	host := f.with("FAKETART_SUSPEND_FAIL=this functionality is only supported on macOS 14 (Sonoma) or newer").start("--no-graphics", "--suspendable", "vm")
	guestPID(t, f, "vm")
	f.ok("suspend", "vm")
	if code := host.wait(t, 5*time.Second); code != 1 || host.out.String() != "Failed to suspend the VM: this functionality is only supported on macOS 14 (Sonoma) or newer\n" {
		t.Fatalf("suspend on an old host: exit %d, stdout %q", code, host.out.String())
	}
}

// TestBootAndLoginDelay: the guest program (the LaunchAgent) starts only
// after the boot and the auto-login, as on a Mac.
func TestBootAndLoginDelay(t *testing.T) {
	f := newFixture(t, "FAKETART_BOOT_DELAY=300ms", "FAKETART_LOGIN_DELAY=700ms")
	faketarttest.Template(t, f.home, "tpl", []string{"/bin/sh", "-c", guestScript}, nil)
	f.ok("clone", "tpl", "vm")
	shared := t.TempDir()
	start := time.Now()
	f.start("--no-graphics", "--dir", "build-config:"+shared, "vm")
	waitFile(t, filepath.Join(shared, "out"), 10*time.Second)
	if d := time.Since(start); d < time.Second {
		t.Fatalf("the guest program started %v after run, before the boot and login (1 s)", d)
	}
}
