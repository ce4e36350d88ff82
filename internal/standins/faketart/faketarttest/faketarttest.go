// Package faketarttest builds the fake `tart` (../) and prepares TART_HOMEs,
// templates and fake-registry images for tests in other packages.
//
// Typical use:
//
//	bin := faketarttest.Build(t)                        // path of a `tart` binary
//	home := faketarttest.Home(t)                        // empty TART_HOME
//	faketarttest.Template(t, home, "macos-template",
//		[]string{"/path/to/freeagent-vm", "--shared", "…"}, nil)
//	env := faketarttest.Env(home, "FAKETART_BOOT_DELAY=50ms")
//	res := faketarttest.Run(t, bin, env, "clone", "macos-template", "fa-1-1")
package faketarttest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

const importPath = "github.com/freeagent-build/freeagent/internal/standins/faketart"

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Build compiles the fake once per test binary and returns the path of an
// executable named `tart`. The binary lives in a per-checkout directory under
// os.TempDir() and is replaced atomically, so concurrent test binaries (go
// test ./...) can share it and nothing piles up between runs.
func Build(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() { buildPath, buildErr = build() })
	if buildErr != nil {
		t.Fatalf("faketarttest: building the fake tart: %v", buildErr)
	}
	return buildPath
}

func build() (string, error) {
	goBin := "go"
	if _, err := exec.LookPath(goBin); err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	// The package directory, from this file's compile-time path when it is
	// available (not with -trimpath), else the import path.
	pkg := importPath
	workDir := ""
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		dir := filepath.Dir(filepath.Dir(file))
		if _, err := os.Stat(filepath.Join(dir, "main.go")); err == nil {
			pkg, workDir = dir, dir
		}
	}
	sum := sha256.Sum256([]byte(pkg + "\x00" + runtime.Version()))
	outDir := filepath.Join(os.TempDir(), fmt.Sprintf("faketart-%d-%s", os.Getuid(), hex.EncodeToString(sum[:6])))
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", err
	}
	tmp := filepath.Join(outDir, fmt.Sprintf(".tart-%d", os.Getpid()))
	cmd := exec.Command(goBin, "build", "-o", tmp, pkg)
	cmd.Dir = workDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	final := filepath.Join(outDir, "tart")
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return final, nil
}

// Home returns a fresh, empty TART_HOME inside t.TempDir().
func Home(t testing.TB) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "tart-home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	return home
}

// VM describes a VM directory to write (a local VM, or a registry image).
type VM struct {
	OS       string            // "darwin" (default) or "linux"
	CPU      int               // cpuCountMin and cpuCount; default 4
	MemoryMB int               // memorySizeMin and memorySize in MiB; default 4096
	DiskGB   int               // apparent size of the sparse disk.img in GB (10^9); default 50
	Argv     []string          // guest program (fake-guest.json); none → the VM boots and idles
	Env      map[string]string // extra guest environment
}

// WriteVM writes a complete VM directory at dir: config.json (as tart writes
// it), a sparse disk.img, nvram.bin and, when vm.Argv is set, fake-guest.json.
func WriteVM(t testing.TB, dir string, vm VM) {
	t.Helper()
	if err := writeVM(dir, vm); err != nil {
		t.Fatalf("faketarttest: writing VM %s: %v", dir, err)
	}
}

func writeVM(dir string, vm VM) error {
	if vm.OS == "" {
		vm.OS = "darwin"
	}
	if vm.CPU == 0 {
		vm.CPU = 4
	}
	if vm.MemoryMB == 0 {
		vm.MemoryMB = 4096
	}
	if vm.DiskGB == 0 {
		vm.DiskGB = 50
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mem := uint64(vm.MemoryMB) << 20
	type kv struct {
		k string
		v any
	}
	fields := []kv{{"version", 1}, {"os", vm.OS}, {"arch", "arm64"}}
	if vm.OS == "darwin" {
		fields = append(fields, kv{"ecid", randB64(48)}, kv{"hardwareModel", randB64(60)})
	}
	fields = append(fields,
		kv{"cpuCountMin", vm.CPU}, kv{"cpuCount", vm.CPU},
		kv{"memorySizeMin", mem}, kv{"memorySize", mem},
		kv{"macAddress", randMAC()},
		kv{"display", json.RawMessage(`{"width":1024,"height":768}`)},
		kv{"diskFormat", "raw"})
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, f := range fields {
		v, _ := json.Marshal(f.v)
		fmt.Fprintf(&b, "  %q : %s", f.k, v)
		if i < len(fields)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("}")
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b.Bytes(), 0o644); err != nil {
		return err
	}
	disk, err := os.Create(filepath.Join(dir, "disk.img"))
	if err != nil {
		return err
	}
	if err := disk.Truncate(int64(vm.DiskGB) * 1000 * 1000 * 1000); err != nil {
		disk.Close()
		return err
	}
	disk.Close()
	if err := os.WriteFile(filepath.Join(dir, "nvram.bin"), make([]byte, 8192), 0o644); err != nil {
		return err
	}
	if len(vm.Argv) > 0 {
		spec, _ := json.MarshalIndent(map[string]any{"argv": vm.Argv, "env": vm.Env}, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, "fake-guest.json"), spec, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Template creates a local darwin VM named name in home (cpuCountMin 4,
// memorySizeMin 4 GiB, a sparse 50 GB disk.img, nvram.bin) whose guest
// program is argv with env.
func Template(t testing.TB, home, name string, argv []string, env map[string]string) {
	t.Helper()
	WriteVM(t, filepath.Join(home, "vms", name), VM{Argv: argv, Env: env})
}

// RegistryImage publishes vm as remote (e.g. "ghcr.io/acme/macos:latest") in
// the fake registry directory registry (pass it as FAKETART_REGISTRY).
func RegistryImage(t testing.TB, registry, remote string, vm VM) {
	t.Helper()
	i := strings.Index(remote, "/")
	if i <= 0 {
		t.Fatalf("faketarttest: %q is not a remote name", remote)
	}
	host, rest := remote[:i], remote[i+1:]
	tag := "latest"
	if j := strings.LastIndex(rest, ":"); j >= 0 {
		rest, tag = rest[:j], rest[j+1:]
	}
	WriteVM(t, filepath.Join(registry, host, filepath.FromSlash(rest), tag), vm)
}

// Env returns the environment entries to run the fake with: TART_HOME=home
// followed by kv ("FAKETART_BOOT_DELAY=50ms", …). Append them to a base
// environment (Command does, on a copy of os.Environ() without TART_* and
// FAKETART_* entries).
func Env(home string, kv ...string) []string {
	return append([]string{"TART_HOME=" + home}, kv...)
}

// BaseEnv is os.Environ() without TART_* and FAKETART_* entries, so tests
// do not pick up a developer's real Tart settings.
func BaseEnv() []string {
	var out []string
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "TART_") || strings.HasPrefix(e, "FAKETART_") {
			continue
		}
		out = append(out, e)
	}
	return out
}

// Command returns an *exec.Cmd running the fake with BaseEnv()+env.
func Command(bin string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(BaseEnv(), env...)
	return cmd
}

// Result is the outcome of one invocation.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Run runs the fake to completion and returns its output and exit code.
func Run(t testing.TB, bin string, env []string, args ...string) Result {
	t.Helper()
	cmd := Command(bin, env, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := Result{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.Code = ee.ExitCode()
	default:
		t.Fatalf("faketarttest: running tart %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// LogEntry is one line of the FAKETART_LOG invocation log.
type LogEntry struct {
	Time     string            `json:"time"`
	Event    string            `json:"event"` // "exit" (every invocation) or "boot" (run, once booted)
	PID      int               `json:"pid"`
	Cmd      string            `json:"cmd"`
	Argv     []string          `json:"argv"` // arguments after the program name
	Cwd      string            `json:"cwd"`
	Env      map[string]string `json:"env"` // TART_*, FAKETART_* and CI
	Exit     *int              `json:"exit"`
	Stdout   string            `json:"stdout"`
	Stderr   string            `json:"stderr"`
	GuestPID int               `json:"guest_pid,omitempty"` // boot records
}

// ReadLog parses the invocation log at path (missing file → no entries).
// A last line without its newline is a record a running fake is still
// appending (a reader may see part of one write(2)); it is left for the
// next read.
func ReadLog(t testing.TB, path string) []LogEntry {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	var out []LogEntry
	for line := range bytes.Lines(data) {
		var e LogEntry
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("faketarttest: bad log line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// ProcessAlive reports whether pid is a live process (zombies count as dead).
func ProcessAlive(pid int) bool {
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		i := bytes.LastIndexByte(data, ')')
		if i >= 0 {
			f := bytes.Fields(data[i+1:])
			return len(f) > 0 && string(f[0]) != "Z" && string(f[0]) != "X"
		}
	} else if _, statErr := os.Stat("/proc/self/stat"); statErr == nil {
		return false // /proc exists, the pid does not
	}
	return syscall.Kill(pid, 0) == nil
}

// GroupPIDs lists the live processes in process group pgid (Linux; nil
// elsewhere). The fake starts each guest as the leader of its own group.
func GroupPIDs(pgid int) []int {
	matches, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, m := range matches {
		data, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(data[i+1:])
		if len(f) < 3 || string(f[0]) == "Z" || string(f[0]) == "X" {
			continue
		}
		if pg, _ := strconv.Atoi(string(f[2])); pg == pgid {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(m)))
			out = append(out, pid)
		}
	}
	sort.Ints(out)
	return out
}

// WaitFor polls cond every 20 ms until it is true or timeout passes.
func WaitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func randB64(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

func randMAC() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	b[0] = (b[0] | 0x02) &^ 0x01
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4], b[5])
}

// VMNet reports whether FAKETART_NET=vmnet (each guest in its own network
// namespace behind a bridge, as on Tart's vmnet network) can run here: it
// needs Linux, root, ip(8) and iptables(8). A missing tool is a missing
// install step and fails the test; without Linux or root the reason is
// logged and the caller falls back to the host's network.
func VMNet(t testing.TB) bool {
	t.Helper()
	var why string
	switch {
	case runtime.GOOS != "linux":
		why = "FAKETART_NET=vmnet needs Linux network namespaces"
	case os.Geteuid() != 0:
		why = "FAKETART_NET=vmnet needs root (network namespaces, a bridge and veth pairs)"
	default:
		testtool.Need(t, "ip", "iptables")
	}
	if why != "" {
		t.Logf("guests share the host's network: %s", why)
		return false
	}
	return true
}

// Softnet returns the path of a stand-in `softnet` binary in a directory
// of its own. Tart looks softnet up on its PATH for --net-softnet (and so
// does the fake); the fake applies Softnet's rules itself (with
// FAKETART_NET=vmnet) and never runs it.
func Softnet(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "softnet-bin")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "softnet")
	// Written and closed before any exec: see golang/go#22315.
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho 'softnet stand-in: the fake tart filters by itself' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Given root as the owner's fix gives it (setuid, owned by root), so
	// the worker's softnet gate lets builds through; only a test running
	// as root can. Clear the bit to stand for a fresh brew install.
	if os.Geteuid() == 0 {
		if err := os.Chmod(p, 0o755|os.ModeSetuid); err != nil {
			t.Fatal(err)
		}
	}
	return p
}
