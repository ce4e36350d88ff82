package vmbootstrap

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/buildphase"
	"github.com/freeagent-build/freeagent/internal/testsupport/syncbuf"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
	"github.com/freeagent-build/freeagent/internal/vmshare"
)

// requireNPM: the end-to-end tests run `npm run freeagent:build`.
func requireNPM(t *testing.T) {
	t.Helper()
	testtool.Need(t, "npm")
}

// vmProcess is the real freeagent-vm binary running as a child process.
type vmProcess struct {
	cmd    *exec.Cmd
	stderr *syncbuf.Buffer
	done   chan struct{}
	err    error
}

func startVM(t *testing.T, shared string, env []string, args ...string) *vmProcess {
	t.Helper()
	return startVMVia(t, nil, shared, env, args...)
}

// startVMVia is startVM with freeagent-vm started through the command
// prefix (as launchd starts the LaunchAgent, say).
func startVMVia(t *testing.T, prefix []string, shared string, env []string, args ...string) *vmProcess {
	t.Helper()
	work := t.TempDir()
	args = append([]string{"--shared-dir", shared, "--work-dir", work, "--wait-timeout", "20s", "--log-level", "debug"}, args...)
	argv := append(append(slices.Clone(prefix), vmBinary(t)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	v := &vmProcess{cmd: cmd, stderr: &syncbuf.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = v.stderr, v.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { v.err = cmd.Wait(); close(v.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-v.done
		if t.Failed() {
			t.Logf("freeagent-vm output:\n%s", v.stderr)
		}
	})
	return v
}

func (v *vmProcess) running() bool {
	select {
	case <-v.done:
		return false
	default:
		return true
	}
}

func (v *vmProcess) exitCode(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-v.done:
	case <-time.After(timeout):
		t.Fatalf("freeagent-vm still running after %s", timeout)
	}
	var ee *exec.ExitError
	if errors.As(v.err, &ee) {
		return ee.ExitCode()
	}
	if v.err != nil {
		t.Fatal(v.err)
	}
	return 0
}

func writeConfig(t *testing.T, shared string, c *testController, j startedJob, otp string) {
	t.Helper()
	bc := vmshare.BuildConfig{BuildID: j.sub.ID, AttemptID: j.job.AttemptID, ControllerURL: c.URL, OTP: otp, Platform: j.job.Platform, Profile: j.job.Profile}
	if err := writeJSONAtomic(shared, vmshare.BuildConfigFile, bc); err != nil {
		t.Fatal(err)
	}
}

func readJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v: %s", path, err, b)
	}
}

func noTempFiles(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Fatalf("temporary file left in the shared dir: %s", e.Name())
		}
	}
}

// TestEndToEnd runs the real binary against a real controller: it waits
// for the config (written after it started), authenticates, downloads and
// extracts the project, runs its freeagent:build script with the log
// reaching the controller while the script still runs, uploads the
// artifact and writes build-complete.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	requireNPM(t)
	c := startController(t)
	const buildSh = `#!/bin/sh
echo "building for $FREEAGENT_PLATFORM ($FREEAGENT_PROFILE), CI=$CI"
echo "inherited: key=[$FREEAGENT_API_KEY] expo=[$EXPO_CONTROLLER_API_KEY] shared=[$FREEAGENT_SHARED_DIR]"
i=1
while [ $i -le 6 ]; do
	echo "line $i"
	sleep 0.3
	i=$((i+1))
done
echo "a warning on stderr" >&2
yes APK | head -n 20000 > "$FREEAGENT_ARTIFACTS_DIR/app-release.apk"
echo "done"
`
	src := project(t, map[string]string{
		"package.json": `{"name":"fixture","version":"1.0.0","private":true,"scripts":{"freeagent:build":"sh ./build.sh"}}`,
		"app.json":     `{"expo":{"name":"fixture"}}`,
		"build.sh":     buildSh,
	})
	j := c.startJob(api.PlatformAndroid, src, nil)
	shared := t.TempDir()
	// A host may pass its own credentials down (the local driver runs the
	// bootstrap with the agent's environment): they never reach the build.
	vm := startVM(t, shared, []string{"FREEAGENT_API_KEY=fa-worker-key-secret", "EXPO_CONTROLLER_API_KEY=expo-key-secret", "FREEAGENT_SHARED_DIR=/elsewhere"})
	time.Sleep(300 * time.Millisecond) // the bootstrap polls for the config
	writeConfig(t, shared, c, j, j.job.OTP)

	var phases []string
	liveAt := ""
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		running := vm.running() // read once more after the exit
		var p vmshare.Progress
		if b, err := os.ReadFile(filepath.Join(shared, vmshare.ProgressFile)); err == nil && json.Unmarshal(b, &p) == nil {
			if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
				phases = append(phases, p.Phase)
			}
		}
		if liveAt == "" {
			if log := string(c.log(j.sub.ID)); strings.Contains(log, "line 1\n") {
				if fileExists(filepath.Join(shared, vmshare.BuildCompleteFile)) || strings.Contains(log, "line 6") {
					t.Fatalf("the log arrived only at the end:\n%s", log)
				}
				liveAt = log
			}
		}
		if !running {
			break
		}
		time.Sleep(30 * time.Millisecond)
	}
	if code := vm.exitCode(t, 5*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if liveAt == "" {
		t.Fatal("no log line reached the controller while the build ran")
	}

	var ready vmshare.Ready
	readJSONFile(t, filepath.Join(shared, vmshare.ReadyFile), &ready)
	if time.Since(ready.StartedAt) > time.Minute {
		t.Fatalf("vm-ready: %+v", ready)
	}
	apk := []byte(strings.Repeat("APK\n", 20000))
	var done vmshare.Complete
	readJSONFile(t, filepath.Join(shared, vmshare.BuildCompleteFile), &done)
	if len(done.Artifacts) != 1 || done.Artifacts[0].Name != "app-release.apk" || done.Artifacts[0].Size != int64(len(apk)) || done.Artifacts[0].SHA256 != sha(apk) {
		t.Fatalf("build-complete: %+v", done)
	}
	if fileExists(filepath.Join(shared, vmshare.BuildErrorFile)) {
		t.Fatal("build-error written too")
	}
	// The worker reports the attempt's end; the build then shows its artifact.
	if res, err := c.report(j, api.Result{Success: true}); err != nil || res.Status != api.StatusCompleted {
		t.Fatalf("report: %+v %v", res, err)
	}
	b, err := c.admin.GetBuild(context.Background(), j.sub.ID)
	if err != nil || len(b.Artifacts) != 1 || b.Artifacts[0].SHA256 != sha(apk) {
		t.Fatalf("controller's artifacts: %+v %v", b.Artifacts, err)
	}
	resp, err := c.admin.DownloadArtifact(context.Background(), j.sub.ID, "app-release.apk", 0)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if sha(body) != sha(apk) {
		t.Fatal("downloaded artifact differs")
	}

	// Phases only move forward, through the build to done.
	order := []string{vmshare.PhaseAuth, vmshare.PhaseSource, vmshare.PhaseBuild, vmshare.PhaseUpload, vmshare.PhaseDone}
	last := -1
	for _, p := range phases {
		i := slices.Index(order, p)
		if i < last || i < 0 {
			t.Fatalf("phases out of order: %v", phases)
		}
		last = i
	}
	if !slices.Contains(phases, vmshare.PhaseBuild) || phases[len(phases)-1] != vmshare.PhaseDone {
		t.Fatalf("phases seen: %v", phases)
	}
	var final vmshare.Progress
	readJSONFile(t, filepath.Join(shared, vmshare.ProgressFile), &final)
	if final.Phase != vmshare.PhaseDone || final.Progress != 100 {
		t.Fatalf("final progress %+v", final)
	}

	log := string(c.log(j.sub.ID))
	assertInOrder(t, log, "▸ npm run freeagent:build\n", "building for android (production), CI=1\n", "inherited: key=[] expo=[] shared=[]\n",
		"line 1\n", "line 6\n", "a warning on stderr\n", "done\n", "▸ uploaded app-release.apk", "▸ build complete: 1 artifact(s)\n")
	if strings.Contains(log, j.job.OTP) {
		t.Fatal("the OTP is in the build log")
	}
	// The log is split into the build's phases, with the build's own
	// output in the build phase.
	var ids []string
	split := splitPhases(log, buildphase.Succeeded)
	for _, ph := range split {
		ids = append(ids, string(ph.ID))
	}
	if got := strings.Join(ids, " "); got != "spin_up source build upload clean_up" {
		t.Errorf("phases %q", got)
	}
	if b := phaseText(split, buildphase.Build); !strings.Contains(b, "line 6") || !strings.Contains(b, "▸ npm run freeagent:build") {
		t.Errorf("build phase:\n%s", b)
	}
	noTempFiles(t, shared)
}

func splitPhases(log string, end buildphase.Status) []buildphase.Phase {
	p := buildphase.NewParser(time.Now())
	p.Write([]byte(log))
	return p.Phases(time.Now(), end)
}

func phaseText(phases []buildphase.Phase, id buildphase.ID) string {
	for _, ph := range phases {
		if ph.ID == id {
			return strings.Join(ph.Lines, "\n")
		}
	}
	return ""
}

// TestEndToEndBuildFails: a failing build command ends in build-error with
// code build_failed, not retryable, and the failing output in log_tail.
func TestEndToEndBuildFails(t *testing.T) {
	t.Parallel()
	requireNPM(t)
	c := startController(t)
	src := project(t, map[string]string{
		"package.json": `{"name":"fixture","private":true,"scripts":{"freeagent:build":"sh ./build.sh"}}`,
		"build.sh":     "#!/bin/sh\necho compiling\necho 'error: something broke in App.tsx' >&2\nexit 3\n",
	})
	j := c.startJob(api.PlatformAndroid, src, nil)
	shared := t.TempDir()
	writeConfig(t, shared, c, j, j.job.OTP)
	vm := startVM(t, shared, nil)
	if code := vm.exitCode(t, 30*time.Second); code != 1 {
		t.Fatalf("exit code %d", code)
	}
	var be vmshare.BuildError
	readJSONFile(t, filepath.Join(shared, vmshare.BuildErrorFile), &be)
	if be.Code != api.CodeBuildFailed || be.Retryable || !strings.Contains(be.Message, "npm run freeagent:build") || !strings.Contains(be.Message, "exit status") {
		t.Fatalf("build-error %+v", be)
	}
	if !strings.Contains(be.LogTail, "error: something broke in App.tsx") || !strings.Contains(be.LogTail, "compiling") {
		t.Fatalf("log_tail %q", be.LogTail)
	}
	if fileExists(filepath.Join(shared, vmshare.BuildCompleteFile)) {
		t.Fatal("build-complete written")
	}
	var p vmshare.Progress
	readJSONFile(t, filepath.Join(shared, vmshare.ProgressFile), &p)
	if p.Phase != vmshare.PhaseFailed {
		t.Fatalf("progress %+v", p)
	}
	log := string(c.log(j.sub.ID))
	if !strings.Contains(log, "error: something broke in App.tsx") || !strings.Contains(log, "✖ `npm run freeagent:build` failed") {
		t.Fatalf("controller log:\n%s", log)
	}
	// The failing phase is the last, and holds the failure.
	phases := splitPhases(log, buildphase.Failed)
	if last := phases[len(phases)-1]; last.ID != buildphase.Build || last.Status != buildphase.Failed ||
		!strings.Contains(phaseText(phases, buildphase.Build), "✖ `npm run freeagent:build` failed") {
		t.Errorf("last phase %+v", last)
	}
}

// TestEndToEndIOSSigning: an iOS build with certificates gets a temporary
// keychain (through the security tool, here a stand-in) and its profile
// installed while the build runs; both are gone afterwards, and the p12
// password never reaches the log.
func TestEndToEndIOSSigning(t *testing.T) {
	t.Parallel()
	requireNPM(t)
	c := startController(t)
	dir := t.TempDir()
	tool, secLog := fakeSecurity(t, dir, "", "")
	home := filepath.Join(dir, "home")
	src := project(t, map[string]string{
		"package.json": `{"name":"fixture","private":true,"scripts":{"freeagent:build":"sh ./build.sh"}}`,
		"build.sh": `#!/bin/sh
ls "$HOME/Library/MobileDevice/Provisioning Profiles"
echo "careless script prints the p12 password: hunter2-p12-secret"
echo IPA > "$FREEAGENT_ARTIFACTS_DIR/App.ipa"
`,
	})
	profile := testProfile("9F2B3C4D-1111-2222-3333-444455556666", "com.example.app", false)
	certs := certsZip(t, map[string][]byte{"dist.p12": []byte("P12-BYTES"), "password.txt": []byte("hunter2-p12-secret\n"), "App.mobileprovision": profile})
	j := c.startJob(api.PlatformIOS, src, certs)
	shared := t.TempDir()
	writeConfig(t, shared, c, j, j.job.OTP)
	vm := startVM(t, shared, []string{"HOME=" + home}, "--security", tool)
	if code := vm.exitCode(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	log := string(c.log(j.sub.ID))
	if !strings.Contains(log, "9F2B3C4D-1111-2222-3333-444455556666.mobileprovision\n") {
		t.Fatalf("the profile was not installed during the build:\n%s", log)
	}
	if strings.Contains(log, "hunter2-p12-secret") || !strings.Contains(log, "prints the p12 password: [REDACTED]") {
		t.Fatalf("the p12 password was not redacted:\n%s", log)
	}
	calls := readCalls(t, secLog)
	var subcommands []string
	for _, c := range calls {
		subcommands = append(subcommands, c[0])
	}
	want := []string{"create-keychain", "set-keychain-settings", "unlock-keychain", "import", "set-key-partition-list", "list-keychains", "list-keychains", "find-identity", "delete-keychain"}
	if !slices.Equal(subcommands, want) {
		t.Fatalf("security calls %v, want %v", subcommands, want)
	}
	if p12pw := calls[3][slices.Index(calls[3], "-P")+1]; p12pw != "hunter2-p12-secret" {
		t.Fatalf("import got p12 password %q", p12pw)
	}
	if b, _ := os.ReadFile(secLog + ".x"); string(b) != "non-extractable\n" {
		t.Fatalf("the key was imported %q, want non-extractable (security import -x)", b)
	}
	for _, d := range profileDirs(home) {
		if entries, _ := os.ReadDir(d); len(entries) != 0 {
			t.Fatalf("profiles left in %s", d)
		}
	}
	if strings.Contains(vm.stderr.String(), "hunter2-p12-secret") {
		t.Fatal("the p12 password is in freeagent-vm's own log")
	}
}

// TestEndToEndSignalled: SIGTERM stops the build's whole process tree and
// still reports build-error with code cancelled.
func TestEndToEndSignalled(t *testing.T) {
	t.Parallel()
	requireNPM(t)
	c := startController(t)
	pidFile := filepath.Join(t.TempDir(), "sleep.pid")
	src := project(t, map[string]string{
		"package.json": `{"name":"fixture","private":true,"scripts":{"freeagent:build":"sh ./build.sh"}}`,
		"build.sh":     "#!/bin/sh\nsleep 60 &\necho $! > '" + pidFile + "'\necho started\nwait\n",
	})
	j := c.startJob(api.PlatformAndroid, src, nil)
	shared := t.TempDir()
	writeConfig(t, shared, c, j, j.job.OTP)
	vm := startVM(t, shared, nil, "--kill-grace", "3s")
	waitFor(t, 20*time.Second, "the build to start", func() bool { return strings.Contains(string(c.log(j.sub.ID)), "started\n") })
	pid := readPid(t, pidFile)
	start := time.Now()
	vm.cmd.Process.Signal(syscall.SIGTERM)
	if code := vm.exitCode(t, 15*time.Second); code != 1 {
		t.Fatalf("exit code %d", code)
	}
	t.Logf("freeagent-vm exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	var be vmshare.BuildError
	readJSONFile(t, filepath.Join(shared, vmshare.BuildErrorFile), &be)
	if be.Code != api.CodeCancelled || be.Retryable || !strings.Contains(be.Message, "terminated") {
		t.Fatalf("build-error %+v", be)
	}
	waitFor(t, 3*time.Second, "the build's processes to die", func() bool { return !alive(pid) })
	if log := string(c.log(j.sub.ID)); !strings.Contains(log, "▸ stopping `npm run freeagent:build`") {
		t.Fatalf("log:\n%s", log)
	}
}

// certsZip builds the certificates archive a developer submits.
func certsZip(t testing.TB, files map[string][]byte) []byte {
	var entries []zipEntry
	for _, name := range slices.Sorted(maps.Keys(files)) {
		entries = append(entries, zipEntry{name: name, body: string(files[name])})
	}
	return zipArchive(t, entries...)
}
