// Package scripts holds the tests of the shell scripts: they run the real
// scripts with the real binaries.
package scripts

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/testsupport/syncbuf"
)

// farmScript is one run of scripts/dev-run.sh (what `make run` runs), in
// its own process group, as a terminal would run it: Ctrl-C there is a
// SIGINT to the whole group.
type farmScript struct {
	cmd  *exec.Cmd
	out  *syncbuf.Buffer
	done chan struct{}
	err  error
}

func startFarm(t *testing.T, binDir, runDir string) *farmScript {
	t.Helper()
	cmd := exec.Command("bash", "dev-run.sh")
	cmd.Env = append(os.Environ(), "FREEAGENT_RUN_DIR="+runDir, "FREEAGENT_BIN_DIR="+binDir, "FREEAGENT_LISTEN=127.0.0.1:0",
		"DATABASE_URL=", "FREEAGENT_DATA_DIR=")
	f := &farmScript{cmd: cmd, out: &syncbuf.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = f.out, f.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { f.err = cmd.Wait(); close(f.done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-f.done
	})
	return f
}

// wait waits (within limit, a bound against a hung script rather than a
// measurement) for the script to end and returns its exit code.
func (f *farmScript) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(limit):
		t.Fatalf("dev-run.sh did not end within %s:\n%s", limit, f.out)
	}
	var ee *exec.ExitError
	if errors.As(f.err, &ee) {
		return ee.ExitCode()
	}
	if f.err != nil {
		t.Fatal(f.err)
	}
	return 0
}

// farm is what farm.pid says about a running farm.
type farm struct {
	scriptPid, controllerPid, workerPid int
	url                                 string
}

// up waits until the farm is up (farm.pid lists its children).
func (f *farmScript) up(t *testing.T, runDir string) farm {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(runDir, "farm.pid"))
		if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) == 4 {
			var fm farm
			fm.scriptPid, _ = strconv.Atoi(lines[0])
			fm.url = lines[1]
			fmt.Sscanf(lines[2], "controller %d", &fm.controllerPid)
			fmt.Sscanf(lines[3], "worker %d", &fm.workerPid)
			if fm.scriptPid != f.cmd.Process.Pid || fm.controllerPid == 0 || fm.workerPid == 0 {
				t.Fatalf("farm.pid: %q (script pid %d)", b, f.cmd.Process.Pid)
			}
			return fm
		}
		select {
		case <-f.done:
			t.Fatalf("dev-run.sh ended before the farm was up: %v\n%s", f.err, f.out)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the farm was not up within 120 s:\n%s", f.out)
		}
	}
}

// alive reports a process that exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return runtime.GOOS != "linux"
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// buildBinaries builds what `make build` builds for dev-run.sh.
func buildBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", dir+string(os.PathSeparator),
		"./controller/cmd/freeagent-controller", "./tray/cmd/freeagent", "./vmbootstrap/cmd/freeagent-vm", "./cli/cmd/expo-build")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// TestMakeRunTwiceAndCtrlC is `make run`: a second start on the
// same .run directory refuses with the running farm's URL and pid; Ctrl-C
// stops the controller, the worker and the database; a pid file left by a
// killed run does not block the next; the logs are appended to. On the way:
// the make run worker (local driver) advertises only what this host builds.
func TestMakeRunTwiceAndCtrlC(t *testing.T) {
	binDir := buildBinaries(t)
	// As root the built-in PostgreSQL runs as postgres, which must reach
	// the data directory: t.TempDir's parent is 0700.
	parent, err := os.MkdirTemp("", "fa-make-run-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	os.Chmod(parent, 0o711)
	runDir := filepath.Join(parent, "run")

	first := startFarm(t, binDir, runDir)
	fm := first.up(t, runDir)
	resp, err := http.Get(fm.url + "/health/ready")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s/health/ready: %v %v", fm.url, resp, err)
	}
	resp.Body.Close()
	if !strings.Contains(first.out.String(), "Free Agent controller: "+fm.url) {
		t.Errorf("the banner does not give the URL:\n%s", first.out)
	}
	checkWorkerPlatforms(t, fm.url, runDir)
	readmeFirstBuild(t, binDir, fm.url, runDir)

	// make run again: refused, naming the running farm; nothing started.
	second := startFarm(t, binDir, runDir)
	if code := second.wait(t, 60*time.Second); code == 0 ||
		!strings.Contains(second.out.String(), "already running: "+fm.url) || !strings.Contains(second.out.String(), fmt.Sprintf("pid %d", fm.scriptPid)) {
		t.Fatalf("second make run: exit %d\n%s", code, second.out)
	}
	if b, _ := os.ReadFile(filepath.Join(runDir, "farm.pid")); !strings.HasPrefix(string(b), strconv.Itoa(fm.scriptPid)+"\n") {
		t.Fatalf("the refused start changed farm.pid: %q", b)
	}

	// Ctrl-C: everything stops.
	ctrlC(t, first, fm, runDir)

	// A killed run leaves its farm.pid: the next start replaces it.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(runDir, "farm.pid"), []byte(fmt.Sprintf("%d\nhttp://127.0.0.1:1\n", dead.Process.Pid)), 0o644)
	third := startFarm(t, binDir, runDir)
	fm3 := third.up(t, runDir)
	ctrlC(t, third, fm3, runDir)

	// Both runs' logs are there, each after its banner.
	for _, name := range []string{"controller.log", "agent.log"} {
		b, _ := os.ReadFile(filepath.Join(runDir, name))
		if n := strings.Count(string(b), "=== make run: "); n != 2 {
			t.Errorf("%s holds %d run banners, want 2 (appended, not truncated):\n%s", name, n, b)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(runDir, "controller.log")); !strings.Contains(string(b), "listening on "+fm.url) || !strings.Contains(string(b), "listening on "+fm3.url) {
		t.Errorf("controller.log lacks a run's lines:\n%s", b)
	}
}

// ctrlC sends SIGINT to the script's process group, as a terminal's Ctrl-C
// does, and checks that the script, the controller, the worker and the
// database are gone.
func ctrlC(t *testing.T, f *farmScript, fm farm, runDir string) {
	t.Helper()
	pgPid := filepath.Join(runDir, "controller", "postgres", "pgdata", "postmaster.pid")
	b, err := os.ReadFile(pgPid)
	if err != nil {
		t.Fatalf("the built-in PostgreSQL is not running: %v", err)
	}
	pg, _ := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if err := syscall.Kill(-f.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := f.wait(t, 3*time.Minute); code != 0 { // a bound for a hang, generous for a loaded machine
		t.Errorf("dev-run.sh exited %d after Ctrl-C:\n%s", code, f.out)
	}
	for what, pid := range map[string]int{"controller": fm.controllerPid, "worker": fm.workerPid, "postgres": pg} {
		if alive(pid) {
			t.Errorf("the %s (pid %d) outlived Ctrl-C", what, pid)
		}
	}
	if _, err := os.Stat(pgPid); err == nil {
		t.Error("postmaster.pid is left behind")
	}
	if _, err := os.Stat(filepath.Join(runDir, "farm.pid")); err == nil {
		t.Error("farm.pid is left behind after a clean stop")
	}
	if !strings.Contains(f.out.String(), "Stopped the farm") {
		t.Errorf("no word of the stop:\n%s", f.out)
	}
}

// checkWorkerPlatforms: the make run worker registers, advertising only
// what this host builds (no ios without macOS and Xcode).
func checkWorkerPlatforms(t *testing.T, url, runDir string) {
	t.Helper()
	key, err := os.ReadFile(filepath.Join(runDir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	_, xerr := exec.LookPath("xcodebuild")
	canIOS := runtime.GOOS == "darwin" && xerr == nil
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, url+"/api/workers", nil)
		req.Header.Set(api.HeaderAPIKey, strings.TrimSpace(string(key)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var list api.WorkerList
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Workers) == 1 {
			ps := list.Workers[0].Capabilities.Platforms
			if slices.Contains(ps, api.PlatformIOS) != canIOS || !slices.Contains(ps, api.PlatformAndroid) {
				t.Errorf("the make run worker on %s advertises %v", runtime.GOOS, ps)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the make run worker did not register within 60 s: %+v", list)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readmeFirstBuild runs the README's "A first build in five minutes" as it
// is written there, against make run's farm: the sample app builds on its
// worker and its artifact is saved.
func readmeFirstBuild(t *testing.T, binDir, url, runDir string) {
	t.Helper()
	const command = "bin/expo-build build vmbootstrap/testdata/android-app --platform android"
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), command) {
		t.Fatalf("the README's first build is no longer %q: update this test with it", command)
	}
	key, err := os.ReadFile(filepath.Join(runDir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	args := strings.Fields(command)[1:]
	args[1] = filepath.Join("..", args[1])
	if args[1], err = filepath.Abs(args[1]); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "expo-build"), args...)
	cmd.Dir = out // the artifacts go into ./<build-id>/
	cmd.Env = append(os.Environ(), "EXPO_CONTROLLER_URL="+url, "EXPO_CONTROLLER_API_KEY="+strings.TrimSpace(string(key)))
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", command, err, got)
	}
	aabs, _ := filepath.Glob(filepath.Join(out, "*", "app-release.aab"))
	if len(aabs) != 1 {
		t.Fatalf("%s saved no app-release.aab in ./<build-id>/:\n%s", command, got)
	}
	// Then, as the README goes on: build:list and logs show it.
	id := filepath.Base(filepath.Dir(aabs[0]))
	for _, then := range [][]string{{"build:list"}, {"logs", id}} {
		cmd := exec.Command(filepath.Join(binDir, "expo-build"), then...)
		cmd.Env = append(os.Environ(), "EXPO_CONTROLLER_URL="+url, "EXPO_CONTROLLER_API_KEY="+strings.TrimSpace(string(key)))
		if got, err := cmd.CombinedOutput(); err != nil || (then[0] == "build:list" && !strings.Contains(string(got), id)) {
			t.Errorf("expo-build %s: %v\n%s", strings.Join(then, " "), err, got)
		}
	}
}
