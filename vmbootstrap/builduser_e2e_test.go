package vmbootstrap

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/controller/api"
)

// TestEndToEndBuildUser runs a real build with --build-user: the build's
// commands run under the build user's uid, cannot read what belongs to the
// bootstrap's user (a 0600 file of its own, its process environment with a
// worker key the host passed down), cannot sudo, and their artifacts upload.
func TestEndToEndBuildUser(t *testing.T) {
	t.Parallel()
	requireNPM(t)
	u := testBuildUser(t)
	c := startController(t)
	base := sharedTempDir(t)
	private := filepath.Join(t.TempDir(), "vm-token") // the bootstrap user's, outside the work tree
	if err := os.WriteFile(private, []byte("fa-vm-token-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	shared := t.TempDir()
	vm := startVM(t, shared, []string{"FREEAGENT_API_KEY=fa-worker-key-secret"}, "--build-user", u.name, "--work-dir", filepath.Join(base, "work"))
	bootstrapEnv := "/proc/" + strconv.Itoa(vm.cmd.Process.Pid) + "/environ"
	src := project(t, map[string]string{
		"package.json": `{"name":"fixture","version":"1.0.0","private":true,"scripts":{"freeagent:build":"sh ./build.sh"}}`,
		"build.sh": `#!/bin/sh
probe() { if cat "$1" >/dev/null 2>&1; then echo "probe: read $2"; else echo "probe: denied $2"; fi; }
probe '` + private + `' private-file
probe '` + bootstrapEnv + `' bootstrap-environ
probe '` + filepath.Join(shared, BuildConfigFile) + `' build-config
if sudo -n true 2>/dev/null; then echo "probe: sudo allowed"; else echo "probe: sudo denied"; fi
echo "uid=$(id -u) home=$HOME"
id -u > "$FREEAGENT_ARTIFACTS_DIR/uid.txt"
echo node_modules > generated.txt
yes APK | head -n 1000 > "$FREEAGENT_ARTIFACTS_DIR/app-release.apk"
`,
	})
	j := c.startJob(api.PlatformAndroid, src, nil)
	writeConfig(t, shared, c, j, j.job.OTP)
	if code := vm.exitCode(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d\n%s", code, c.log(j.sub.ID))
	}
	log := string(c.log(j.sub.ID))
	for _, want := range []string{
		"build commands run as the build user " + u.name,
		"uid=" + strconv.Itoa(u.uid) + " home=" + u.home + "\n",
		"probe: denied private-file\n", "probe: denied bootstrap-environ\n", "probe: denied build-config\n", "probe: sudo denied\n",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "fa-vm-token-secret") {
		t.Errorf("the private file reached the log")
	}
	var done Complete
	readJSONFile(t, filepath.Join(shared, BuildCompleteFile), &done)
	names := map[string]int64{}
	for _, a := range done.Artifacts {
		names[a.Name] = a.Size
	}
	if names["app-release.apk"] != 4000 || names["uid.txt"] != int64(len(strconv.Itoa(u.uid))+1) {
		t.Fatalf("artifacts: %+v", done.Artifacts)
	}
	if left := processesOf(t, u.uid); len(left) != 0 {
		t.Fatalf("processes of the build user left after the build: %v", left)
	}
}

// TestEndToEndBuildUserCancel: a build stopped by SIGTERM (the host
// cancelling) leaves no process of the build user, also none that left
// the step's process group and ignores SIGTERM.
func TestEndToEndBuildUserCancel(t *testing.T) {
	t.Parallel()
	requireNPM(t)
	u := testBuildUser(t)
	c := startController(t)
	base := sharedTempDir(t)
	src := project(t, map[string]string{
		"package.json": `{"name":"fixture","version":"1.0.0","private":true,"scripts":{"freeagent:build":"sh ./build.sh"}}`,
		"build.sh": `#!/bin/sh
setsid sh -c 'trap "" TERM; while :; do sleep 1; done' &
sleep 600 &
echo "build is running"
wait
`,
	})
	j := c.startJob(api.PlatformAndroid, src, nil)
	shared := t.TempDir()
	writeConfig(t, shared, c, j, j.job.OTP)
	vm := startVM(t, shared, nil, "--build-user", u.name, "--work-dir", filepath.Join(base, "work"), "--kill-grace", "2s")
	waitFor(t, time.Minute, "the build to run", func() bool { return strings.Contains(string(c.log(j.sub.ID)), "build is running") })
	if n := len(processesOf(t, u.uid)); n < 3 {
		t.Fatalf("the build user runs %d processes", n)
	}
	if err := vm.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := vm.exitCode(t, time.Minute); code != 1 {
		t.Fatalf("exit code %d", code)
	}
	if left := processesOf(t, u.uid); len(left) != 0 {
		t.Fatalf("processes of the build user left after the build was stopped: %v\n%s", left, c.log(j.sub.ID))
	}
}
