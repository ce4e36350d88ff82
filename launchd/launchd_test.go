package launchd

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/internal/plist"
)

var update = flag.Bool("update", false, "rewrite the checked-in guest plist from GuestJob")

// parseGeneric reads a plist into plain maps, independent of Job, so a
// field the struct renders wrongly cannot also be read back wrongly.
func parseGeneric(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	format, err := plist.Unmarshal(b, &m)
	if err != nil {
		t.Fatalf("plist does not parse: %v\n%s", err, b)
	}
	if format != plist.XML {
		t.Fatalf("plist format %d, want XML", format)
	}
	return m
}

// checkKeys compares every key and value, and refuses extra keys.
func checkKeys(t *testing.T, got, want map[string]any) {
	t.Helper()
	for k, w := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("key %s missing", k)
		} else if !reflect.DeepEqual(g, w) {
			t.Errorf("key %s = %#v, want %#v", k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected key %s = %#v", k, got[k])
		}
	}
}

func TestHostPlist(t *testing.T) {
	h := HostAgent{Executable: "/Applications/Free Agent & Co.app/Contents/MacOS/freeagent", Args: []string{"app"}, Home: "/Users/ann"}
	j, err := h.Job()
	if err != nil {
		t.Fatal(err)
	}
	b, err := j.Render()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte(`<?xml version="1.0" encoding="UTF-8"?>`)) || !bytes.Contains(b, []byte("<!DOCTYPE plist")) {
		t.Fatalf("not an XML plist with its doctype:\n%s", b)
	}
	if !bytes.Contains(b, []byte("Free Agent &amp; Co.app")) {
		t.Fatalf("& not escaped:\n%s", b)
	}
	checkKeys(t, parseGeneric(t, b), map[string]any{
		"Label":                       "build.freeagent.agent",
		"ProgramArguments":            []any{"/Applications/Free Agent & Co.app/Contents/MacOS/freeagent", "app"},
		"RunAtLoad":                   true,
		"KeepAlive":                   map[string]any{"SuccessfulExit": false},
		"ProcessType":                 "Interactive",
		"LimitLoadToSessionType":      "Aqua",
		"StandardOutPath":             "/Users/ann/Library/Logs/FreeAgent/agent.out.log",
		"StandardErrorPath":           "/Users/ann/Library/Logs/FreeAgent/agent.err.log",
		"AssociatedBundleIdentifiers": []any{"build.freeagent.FreeAgent"},
		// launchd's own PATH (/usr/bin:/bin:/usr/sbin:/sbin) has no Homebrew,
		// where tart is: Homebrew's bin folders come first.
		"EnvironmentVariables": map[string]any{
			"PATH": "/opt/homebrew/bin:/opt/homebrew/sbin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
		},
	})
	if back, err := Parse(b); err != nil || !reflect.DeepEqual(back, j) {
		t.Fatalf("Parse(Render(j)) = %+v, %v; want %+v", back, err, j)
	}
	if h.PlistPath() != "/Users/ann/Library/LaunchAgents/build.freeagent.agent.plist" {
		t.Fatalf("plist path %s", h.PlistPath())
	}
}

func TestHostJobRefusesBadPaths(t *testing.T) {
	for _, h := range []HostAgent{
		{Executable: "freeagent", Home: "/Users/ann"},
		{Executable: "/a/freeagent", Home: "~"},
		{Executable: "/Apps/{{.Name}}/freeagent", Home: "/Users/ann"},
		// Opened from the mounted disk image, or from the read-only copy
		// macOS runs a downloaded app from: both gone after a restart.
		{Executable: "/Volumes/Free Agent/FreeAgent.app/Contents/MacOS/freeagent", Home: "/Users/ann"},
		{Executable: "/private/var/folders/xy/abc/T/AppTranslocation/1A2B/d/FreeAgent.app/Contents/MacOS/freeagent", Home: "/Users/ann"},
	} {
		if _, err := h.Job(); err == nil {
			t.Errorf("%+v: no error", h)
		}
		if err := (HostAgent{Executable: h.Executable, Home: t.TempDir()}).SetEnabled(true); h.Home == "/Users/ann" && err == nil {
			t.Errorf("%+v: SetEnabled wrote a plist", h)
		}
	}
}

func TestLoginItem(t *testing.T) {
	home := t.TempDir()
	h := HostAgent{Executable: "/Applications/FreeAgent.app/Contents/MacOS/freeagent", Args: []string{"app"}, Home: home}
	var item interface {
		Enabled() (bool, error)
		SetEnabled(bool) error
	} = h
	if on, err := item.Enabled(); on || err != nil {
		t.Fatalf("fresh home: enabled=%v err=%v", on, err)
	}
	if err := item.SetEnabled(true); err != nil {
		t.Fatal(err)
	}
	if on, err := item.Enabled(); !on || err != nil {
		t.Fatalf("after enabling: enabled=%v err=%v", on, err)
	}
	path := filepath.Join(home, "Library", "LaunchAgents", "build.freeagent.agent.plist")
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("plist %s: %v %v", path, st, err)
	}
	if st, err := os.Stat(filepath.Join(home, "Library", "Logs", "FreeAgent")); err != nil || !st.IsDir() {
		t.Fatalf("log folder not created: %v", err)
	}
	b, _ := os.ReadFile(path)
	got := parseGeneric(t, b)
	if got["ProgramArguments"].([]any)[0] != h.Executable || got["RunAtLoad"] != true {
		t.Fatalf("installed plist: %v", got)
	}
	// The app's tart is in Homebrew's bin, not on launchd's own PATH.
	env, _ := got["EnvironmentVariables"].(map[string]any)
	if p, _ := env["PATH"].(string); !slices.Contains(filepath.SplitList(p), "/opt/homebrew/bin") {
		t.Fatalf("installed plist's PATH %q lacks /opt/homebrew/bin", p)
	}

	// The app moved: enabling again rewrites the path.
	h.Executable = "/Users/ann/Applications/FreeAgent.app/Contents/MacOS/freeagent"
	if err := h.SetEnabled(true); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	if got := parseGeneric(t, b); got["ProgramArguments"].([]any)[0] != h.Executable {
		t.Fatalf("plist not rewritten: %v", got["ProgramArguments"])
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".freeagent-*")); len(left) != 0 {
		t.Fatalf("temp files left: %v", left)
	}

	if err := h.SetEnabled(false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("plist still there after disabling: %v", err)
	}
	if on, err := h.Enabled(); on || err != nil {
		t.Fatalf("after disabling: enabled=%v err=%v", on, err)
	}
	if err := h.SetEnabled(false); err != nil {
		t.Fatalf("disabling twice: %v", err)
	}

	// Someone else's file under our name is reported, with the fix.
	os.WriteFile(path, []byte("not a plist"), 0o644)
	if _, err := h.Enabled(); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "delete it") {
		t.Fatalf("a corrupt plist: %v", err)
	}
	other, _ := Job{Label: "com.example.other", ProgramArguments: []string{"/bin/true"}}.Render()
	os.WriteFile(path, other, 0o644)
	if _, err := h.Enabled(); err == nil || !strings.Contains(err.Error(), `Label is "com.example.other"`) {
		t.Fatalf("another job's plist: %v", err)
	}
}

func TestGuestPlistIsCheckedIn(t *testing.T) {
	b, err := GuestJob().Render()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("guest", GuestLabel+".plist")
	if *update {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	onDisk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, b) {
		t.Fatalf("%s differs from GuestJob(); regenerate it with: go test ./launchd -run TestGuestPlistIsCheckedIn -update\n--- on disk\n%s\n--- rendered\n%s", path, onDisk, b)
	}
	checkKeys(t, parseGeneric(t, onDisk), map[string]any{
		"Label":                  "build.freeagent.vm",
		"ProgramArguments":       []any{"/usr/local/libexec/freeagent/freeagent-vm-launcher"},
		"RunAtLoad":              true,
		"KeepAlive":              map[string]any{"Crashed": true},
		"LimitLoadToSessionType": "Aqua",
		"StandardOutPath":        "/tmp/freeagent-vm.log",
		"StandardErrorPath":      "/tmp/freeagent-vm.log",
		"EnvironmentVariables": map[string]any{
			"PATH": "/opt/homebrew/bin:/opt/homebrew/sbin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
			"LANG": "en_US.UTF-8",
		},
	})
	if filepath.Base(GuestLauncherPath) != "freeagent-vm-launcher" {
		t.Fatalf("the plist runs %s, but the checked-in launcher is guest/freeagent-vm-launcher", GuestLauncherPath)
	}
}

// launcherEnv lays out a fake guest: the share (with a space in its path,
// like "My Shared Files") and the image's libexec folder.
type launcherEnv struct {
	shared, baked, out, env, local string
}

func newLauncherEnv(t *testing.T) launcherEnv {
	root := t.TempDir()
	e := launcherEnv{
		shared: filepath.Join(root, "Volumes", "My Shared Files", "build-config"),
		baked:  filepath.Join(root, "usr", "local", "libexec", "freeagent", "freeagent-vm"),
		out:    filepath.Join(root, "ran"),
		env:    filepath.Join(root, "usr", "local", "libexec", "freeagent", "freeagent-vm.env"),
		local:  filepath.Join(root, "usr", "local", "libexec", "freeagent", "run"),
	}
	os.MkdirAll(filepath.Dir(e.baked), 0o755)
	return e
}

// fakeVM writes a freeagent-vm stand-in that records who ran, its
// arguments, the shared-dir variable and JAVA_HOME it saw, then exits 7.
func (e launcherEnv) fakeVM(t *testing.T, path, name string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	script := "#!/bin/sh\nprintf '%s|%s|%s|%s' " + name + " \"$*\" \"$FREEAGENT_SHARED_DIR\" \"${JAVA_HOME:-}\" > \"" + e.out + "\"\nexit 7\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

func (e launcherEnv) run(t *testing.T, wait string) (code int, stderr, ran string) {
	t.Helper()
	cmd := exec.Command("./guest/freeagent-vm-launcher", "--log-level", "debug")
	cmd.Env = append(os.Environ(), "FREEAGENT_SHARED_DIR="+e.shared, "FREEAGENT_VM_BAKED="+e.baked, "FREEAGENT_LAUNCHER_WAIT="+wait, "FREEAGENT_VM_ENV="+e.env, "FREEAGENT_VM_LOCAL="+e.local, "JAVA_HOME=")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(e.out)
	return code, errb.String(), string(b)
}

func TestLauncherPrefersTheSharedBinary(t *testing.T) {
	e := newLauncherEnv(t)
	e.fakeVM(t, e.baked, "baked")
	e.fakeVM(t, filepath.Join(e.shared, "freeagent-vm"), "shared")
	code, stderr, ran := e.run(t, "5")
	if code != 7 || ran != "shared|--log-level debug|"+e.shared+"|" {
		t.Fatalf("exit %d, ran %q, stderr %s", code, ran, stderr)
	}
}

// The build user runs freeagent-vm too: the launcher runs a copy on local
// disk (the template makes run/ for it), not the host's share; a template
// without run/ runs the share's, saying so.
func TestLauncherRunsALocalCopy(t *testing.T) {
	e := newLauncherEnv(t)
	shared := filepath.Join(e.shared, "freeagent-vm")
	e.fakeVM(t, shared, "shared")
	code, stderr, ran := e.run(t, "5")
	if code != 7 || !strings.HasPrefix(ran, "shared|") || !strings.Contains(stderr, "no local copy") {
		t.Fatalf("without run/: exit %d, ran %q, stderr %s", code, ran, stderr)
	}
	os.MkdirAll(e.local, 0o755)
	code, stderr, ran = e.run(t, "5")
	copied, err := os.ReadFile(filepath.Join(e.local, "freeagent-vm"))
	want, _ := os.ReadFile(shared)
	if code != 7 || !strings.HasPrefix(ran, "shared|") || err != nil || !bytes.Equal(copied, want) ||
		!strings.Contains(stderr, "running "+filepath.Join(e.local, "freeagent-vm")+", copied from") {
		t.Fatalf("with run/: exit %d, ran %q, copy %v, stderr %s", code, ran, err, stderr)
	}
}

func TestLauncherWaitsForTheShare(t *testing.T) {
	e := newLauncherEnv(t)
	e.fakeVM(t, e.baked, "baked")
	timer := time.AfterFunc(1200*time.Millisecond, func() { e.fakeVM(t, filepath.Join(e.shared, "freeagent-vm"), "shared") })
	defer timer.Stop()
	start := time.Now()
	code, stderr, ran := e.run(t, "10")
	if code != 7 || !strings.HasPrefix(ran, "shared|") {
		t.Fatalf("exit %d, ran %q, stderr %s", code, ran, stderr)
	}
	if d := time.Since(start); d < time.Second || d > 5*time.Second {
		t.Fatalf("took %v: did not wait for the share, or waited too long", d)
	}
}

func TestLauncherFallsBackToTheImage(t *testing.T) {
	e := newLauncherEnv(t)
	e.fakeVM(t, e.baked, "baked")
	// The share brings the build's config but no binary (an agent without
	// --bootstrap): the image's copy runs at once.
	os.MkdirAll(e.shared, 0o755)
	os.WriteFile(filepath.Join(e.shared, "build-config.json"), []byte("{}"), 0o644)
	code, stderr, ran := e.run(t, "100")
	if code != 7 || ran != "baked|--log-level debug|"+e.shared+"|" || !strings.Contains(stderr, "running the image's") {
		t.Fatalf("exit %d, ran %q, stderr %s", code, ran, stderr)
	}
	// The share never mounted: the image's copy after the wait.
	os.RemoveAll(filepath.Dir(e.shared))
	os.Remove(e.out)
	if code, stderr, ran := e.run(t, "1"); code != 7 || !strings.HasPrefix(ran, "baked|") || !strings.Contains(stderr, "waited 1s") {
		t.Fatalf("no share: exit %d, ran %q, stderr %s", code, ran, stderr)
	}
}

// TestLauncherWaitsOnASpare: a mounted, empty share is a warm spare. The
// launcher says so (vm-waiting) and waits past FREEAGENT_LAUNCHER_WAIT for
// the build's files rather than falling back to the image's copy, which
// would then give up waiting for a build-config.json.
func TestLauncherWaitsOnASpare(t *testing.T) {
	e := newLauncherEnv(t)
	e.fakeVM(t, e.baked, "baked")
	os.MkdirAll(e.shared, 0o755)
	claimed := make(chan struct{})
	go func() {
		defer close(claimed)
		waiting := filepath.Join(e.shared, "vm-waiting")
		for range 100 {
			if _, err := os.Stat(waiting); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(1500 * time.Millisecond) // past the launcher's wait of 1 s
		e.fakeVM(t, filepath.Join(e.shared, ".freeagent-vm.tmp"), "shared")
		os.Rename(filepath.Join(e.shared, ".freeagent-vm.tmp"), filepath.Join(e.shared, "freeagent-vm"))
	}()
	code, stderr, ran := e.run(t, "1")
	<-claimed
	if code != 7 || !strings.HasPrefix(ran, "shared|") || !strings.Contains(stderr, "a warm spare") {
		t.Fatalf("exit %d, ran %q, stderr %s", code, ran, stderr)
	}
}

func TestLauncherExportsTheImageEnvironment(t *testing.T) {
	e := newLauncherEnv(t)
	e.fakeVM(t, filepath.Join(e.shared, "freeagent-vm"), "shared")
	os.WriteFile(e.env, []byte("JAVA_HOME=/opt/homebrew/opt/openjdk@17\n"), 0o644)
	code, stderr, ran := e.run(t, "0")
	if code != 7 || ran != "shared|--log-level debug|"+e.shared+"|/opt/homebrew/opt/openjdk@17" {
		t.Fatalf("exit %d, ran %q, stderr %s", code, ran, stderr)
	}
}

func TestLauncherWithNothingToRun(t *testing.T) {
	e := newLauncherEnv(t)
	code, stderr, ran := e.run(t, "0")
	if code != 1 || ran != "" || !strings.Contains(stderr, "build-vm-template.sh") {
		t.Fatalf("exit %d, ran %q, stderr %s", code, ran, stderr)
	}
	if code, stderr, _ := e.run(t, "soon"); code != 2 || !strings.Contains(stderr, "FREEAGENT_LAUNCHER_WAIT") {
		t.Fatalf("bad wait: exit %d, stderr %s", code, stderr)
	}
}
