package vmbootstrap

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/vmshare"
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
probe '` + filepath.Join(shared, vmshare.BuildConfigFile) + `' build-config
if sudo -n true 2>/dev/null; then echo "probe: sudo allowed"; else echo "probe: sudo denied"; fi
echo "uid=$(id -u) home=$HOME"
id -u > "$FREEAGENT_ARTIFACTS_DIR/uid.txt"
echo node_modules > generated.txt
mkdir -m 755 from-a-tarball && echo x > from-a-tarball/file && chmod 644 from-a-tarball/file
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
	var done vmshare.Complete
	readJSONFile(t, filepath.Join(shared, vmshare.BuildCompleteFile), &done)
	names := map[string]int64{}
	for _, a := range done.Artifacts {
		names[a.Name] = a.Size
	}
	if names["app-release.apk"] != 4000 || names["uid.txt"] != int64(len(strconv.Itoa(u.uid))+1) {
		t.Fatalf("artifacts: %+v", done.Artifacts)
	}
	if left := survivorsOf(t, u.uid); len(left) != 0 {
		t.Fatalf("processes of the build user left after the build: %v", left)
	}
	// The work directory goes, also what the build user made 0755.
	if entries, err := os.ReadDir(filepath.Join(base, "work")); err != nil || len(entries) != 0 {
		t.Fatalf("the work directory is left: %v %v", entries, err)
	}
}

// TestEndToEndBuildUserSession: freeagent-vm runs in its own user's
// launchd session, as launchd starts the LaunchAgent; the build's
// commands, the keychain's among them, run in the build user's own
// session, where Xcode's resource compilers reach their simulator
// service. A launchctl the template does not allow leaves them in
// freeagent-vm's session with a warning naming the fix, and the build
// still runs.
func TestEndToEndBuildUserSession(t *testing.T) {
	t.Parallel()
	requireNPM(t)
	u := testBuildUser(t)
	c := startController(t)
	launchctl := launchctlBinary(t)
	src := project(t, map[string]string{
		"package.json": `{"name":"fixture","version":"1.0.0","private":true,"scripts":{"freeagent:build":"sh ./build.sh"}}`,
		"build.sh":     "#!/bin/sh\necho \"session=$('" + launchctl + "' manageruid) uid=$(id -u)\"\necho APK > \"$FREEAGENT_ARTIFACTS_DIR/app.apk\"\n",
	})
	for _, c2 := range []struct {
		name, launchctl, want, warning string
	}{
		{"its own session", launchctl, "session=" + strconv.Itoa(u.uid) + " uid=" + strconv.Itoa(u.uid) + "\n", ""},
		{"a launchctl that refuses", "/bin/false", "session=0 uid=" + strconv.Itoa(u.uid) + "\n", "▸ warning: build commands run as " + u.name + " in this VM's login session"},
	} {
		t.Run(c2.name, func(t *testing.T) {
			base := sharedTempDir(t)
			j := c.startJob(api.PlatformAndroid, src, nil)
			shared := t.TempDir()
			writeConfig(t, shared, c, j, j.job.OTP)
			vm := startVMVia(t, []string{launchctl, "asuser", "0"}, shared, []string{"FREEAGENT_LAUNCHCTL=" + c2.launchctl},
				"--build-user", u.name, "--work-dir", filepath.Join(base, "work"))
			if code := vm.exitCode(t, time.Minute); code != 0 {
				t.Fatalf("exit code %d\n%s", code, c.log(j.sub.ID))
			}
			log := string(c.log(j.sub.ID))
			if !strings.Contains(log, c2.want) {
				t.Errorf("the log lacks %q:\n%s", c2.want, log)
			}
			if got := strings.Contains(log, "▸ warning: build commands run as"); got != (c2.warning != "") || !strings.Contains(log, c2.warning) {
				t.Errorf("want the warning %q, got the log:\n%s", c2.warning, log)
			}
		})
	}
}

// TestEndToEndBuildUserCancel: a build stopped by SIGTERM (the host
// cancelling) leaves no process of the build user, also none that left
// the step's process group and ignores SIGTERM, with the steps started in
// the build user's session as on macOS.
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
	// As on macOS: freeagent-vm in its user's session, the steps in the
	// build user's (through root's launchctl and sudo).
	launchctl := launchctlBinary(t)
	vm := startVMVia(t, []string{launchctl, "asuser", "0"}, shared, []string{"FREEAGENT_LAUNCHCTL=" + launchctl},
		"--build-user", u.name, "--work-dir", filepath.Join(base, "work"), "--kill-grace", "2s")
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
	if left := survivorsOf(t, u.uid); len(left) != 0 {
		t.Fatalf("processes of the build user left after the build was stopped: %v\n%s", left, c.log(j.sub.ID))
	}
}

// TestEndToEndBuildUserIOSSigning: with a build user the keychain is the
// build user's (every security call runs as it), the key is imported
// non-extractable, and the provisioning profile lands in the build user's
// home for the build and is gone afterwards.
func TestEndToEndBuildUserIOSSigning(t *testing.T) {
	t.Parallel()
	requireNPM(t)
	u := testBuildUser(t)
	c := startController(t)
	base := sharedTempDir(t)
	tools := filepath.Join(base, "tools")
	if err := os.Mkdir(tools, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tools, 0o777); err != nil { // the fake writes its log here as the build user
		t.Fatal(err)
	}
	fake, secLog := fakeSecurity(t, tools, "", "")
	tool := filepath.Join(tools, "security-as")
	writeExecutable(t, tool, "#!/bin/sh\nid -u >> '"+secLog+".uid'\nexec '"+fake+"' \"$@\"\n")
	src := project(t, map[string]string{
		"package.json": `{"name":"fixture","private":true,"scripts":{"freeagent:build":"sh ./build.sh"}}`,
		"build.sh": `#!/bin/sh
ls "$HOME/Library/MobileDevice/Provisioning Profiles"
echo IPA > "$FREEAGENT_ARTIFACTS_DIR/App.ipa"
`,
	})
	profile := testProfile("9F2B3C4D-1111-2222-3333-444455556666", "com.example.app", false)
	certs := certsZip(t, map[string][]byte{"dist.p12": []byte("P12-BYTES"), "password.txt": []byte("hunter2-p12-secret\n"), "App.mobileprovision": profile})
	j := c.startJob(api.PlatformIOS, src, certs)
	shared := t.TempDir()
	writeConfig(t, shared, c, j, j.job.OTP)
	vm := startVM(t, shared, nil, "--security", tool, "--build-user", u.name, "--work-dir", filepath.Join(base, "work"))
	if code := vm.exitCode(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d\n%s", code, c.log(j.sub.ID))
	}
	log := string(c.log(j.sub.ID))
	if !strings.Contains(log, "9F2B3C4D-1111-2222-3333-444455556666.mobileprovision\n") {
		t.Fatalf("the profile was not in the build user's home during the build:\n%s", log)
	}
	uids, _ := os.ReadFile(secLog + ".uid")
	lines := strings.Fields(string(uids))
	if len(lines) != 9 || slices.ContainsFunc(lines, func(l string) bool { return l != strconv.Itoa(u.uid) }) {
		t.Fatalf("security ran as uids %q, want 9 calls as the build user's %d", lines, u.uid)
	}
	if b, _ := os.ReadFile(secLog + ".x"); string(b) != "non-extractable\n" {
		t.Fatalf("the key was imported %q, want non-extractable (security import -x)", b)
	}
	if b, _ := os.ReadFile(secLog + ".p12"); string(b) != "P12-BYTES" {
		t.Fatalf("security imported %q", b)
	}
	for _, d := range profileDirs(u.home) {
		if entries, err := os.ReadDir(d); err != nil || len(entries) != 0 {
			t.Fatalf("profiles left in %s (%v)", d, err)
		}
	}
}
