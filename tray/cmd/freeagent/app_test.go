package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/internal/testsupport/syncbuf"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
	"github.com/freeagent-build/freeagent/tray/prefs/prefstest"

	"github.com/godbus/dbus/v5"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/pgcluster"
)

// sessionBus returns the address of a session bus: the one this test runs
// under, else a private dbus-daemon started for the test.
func sessionBus(t *testing.T) string {
	t.Helper()
	if addr := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); addr != "" {
		return addr
	}
	cmd := exec.Command(testtool.Path(t, "dbus-daemon"), "--session", "--nofork", "--print-address")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("dbus-daemon printed no address: %v", err)
	}
	return strings.TrimSpace(line)
}

var (
	appBinOnce           sync.Once
	appBinDir, appBinErr = "", error(nil)
)

// appBinaries builds freeagent and freeagent-vm once per test binary.
func appBinaries(t *testing.T) (string, string) {
	t.Helper()
	appBinOnce.Do(func() {
		appBinDir, appBinErr = os.MkdirTemp("", "freeagent-app-bin-")
		if appBinErr != nil {
			return
		}
		for _, pkg := range []string{".", "../../../vmbootstrap/cmd/freeagent-vm"} {
			if out, err := exec.Command("go", "build", "-o", appBinDir+"/", pkg).CombinedOutput(); err != nil {
				appBinErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	if appBinErr != nil {
		t.Fatal(appBinErr)
	}
	return filepath.Join(appBinDir, "freeagent"), filepath.Join(appBinDir, "freeagent-vm")
}

// menuItem is one entry of the com.canonical.dbusmenu layout.
type menuItem struct {
	ID       int32
	Label    string
	Enabled  bool
	Visible  bool
	Toggle   int32 // toggle-state: 1 checked
	Children []menuItem
}

func parseLayout(id int32, props map[string]dbus.Variant, children []dbus.Variant) menuItem {
	it := menuItem{ID: id, Enabled: true, Visible: true}
	if v, ok := props["label"]; ok {
		it.Label, _ = v.Value().(string)
	}
	if v, ok := props["enabled"]; ok {
		it.Enabled, _ = v.Value().(bool)
	}
	if v, ok := props["visible"]; ok {
		it.Visible, _ = v.Value().(bool)
	}
	if v, ok := props["toggle-state"]; ok {
		it.Toggle, _ = v.Value().(int32)
	}
	for _, c := range children {
		f := c.Value().([]any)
		it.Children = append(it.Children, parseLayout(f[0].(int32), f[1].(map[string]dbus.Variant), f[2].([]dbus.Variant)))
	}
	return it
}

// trayMenu reads and clicks the app's menu over DBus, as a desktop's tray does.
type trayMenu struct {
	t   *testing.T
	obj dbus.BusObject
}

func (m *trayMenu) layout() (menuItem, error) {
	var rev uint32
	var root struct {
		ID       int32
		Props    map[string]dbus.Variant
		Children []dbus.Variant
	}
	call := m.obj.Call("com.canonical.dbusmenu.GetLayout", 0, int32(0), int32(-1), []string{})
	if call.Err != nil {
		return menuItem{}, call.Err
	}
	if err := call.Store(&rev, &root); err != nil {
		return menuItem{}, err
	}
	return parseLayout(root.ID, root.Props, root.Children), nil
}

func (m *trayMenu) item(label string) menuItem {
	m.t.Helper()
	root, err := m.layout()
	if err != nil {
		m.t.Fatal(err)
	}
	for _, it := range root.Children {
		if it.Label == label {
			return it
		}
	}
	m.t.Fatalf("no menu item %q in %+v", label, root.Children)
	return menuItem{}
}

func (m *trayMenu) click(label string) {
	m.t.Helper()
	it := m.item(label)
	if call := m.obj.Call("com.canonical.dbusmenu.Event", 0, it.ID, "clicked", dbus.MakeVariant(""), uint32(0)); call.Err != nil {
		m.t.Fatalf("click %q: %v", label, call.Err)
	}
}

// waitStatus waits until the first menu line satisfies cond.
func (m *trayMenu) waitStatus(what string, cond func(menuItem) bool) menuItem {
	m.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last menuItem
	for time.Now().Before(deadline) {
		root, err := m.layout()
		if err == nil && len(root.Children) > 0 {
			last = root.Children[0]
			if cond(last) {
				return last
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	m.t.Fatalf("status line never became %s; last: %+v", what, last)
	return last
}

func statusIs(prefix string) func(menuItem) bool {
	return func(it menuItem) bool { return strings.HasPrefix(it.Label, prefix) }
}

func projectWaitingFor(t *testing.T, file string) []byte {
	t.Helper()
	files := map[string]string{
		"package.json": `{"name":"fixture","version":"1.0.0","scripts":{"freeagent:build":"sh ./build.sh"}}`,
		"app.json":     `{"expo":{"name":"fixture","slug":"fixture"}}`,
		"build.sh":     fmt.Sprintf("while [ ! -e %q ]; do sleep 0.05; done\nmkdir -p \"$FREEAGENT_ARTIFACTS_DIR\"\necho ok > \"$FREEAGENT_ARTIFACTS_DIR/app.apk\"\n", file),
	}
	return controllertest.Project(t, files)
}

// TestMenuBarOverDBus runs `freeagent app` against a real controller and
// drives its menu over DBus: the status line follows the builds, "Accept
// Builds" pauses the worker, and Quit drains it before the app exits 0.
func TestMenuBarOverDBus(t *testing.T) {
	url, workerKey, devKey := controllerWithDev(t)
	dev := &api.Client{BaseURL: url, APIKey: devKey}
	a := startApp(t, []string{"--controller-url", url}, "FREEAGENT_API_KEY="+workerKey)
	m, exited, dir := a.menu, a.exited, a.dir

	m.waitStatus("online and idle", statusIs("Online, Idle"))
	if acc := m.item("Accept Builds"); acc.Toggle != 1 || !acc.Enabled {
		t.Fatalf("accepting builds at start: %+v", acc)
	}

	// idle → building (one submenu entry for the build) → idle.
	release1 := filepath.Join(dir, "release1")
	b1, err := dev.Submit(context.Background(), api.SubmitRequest{Platform: "android", Source: bytes.NewReader(projectWaitingFor(t, release1))})
	if err != nil {
		t.Fatal(err)
	}
	st := m.waitStatus("building", statusIs("Building "+b1.ID[:min(12, len(b1.ID))]))
	if len(st.Children) != 1 || !strings.HasPrefix(st.Children[0].Label, b1.ID[:min(12, len(b1.ID))]) || !st.Children[0].Visible {
		t.Fatalf("one submenu entry per running build: %+v", st.Children)
	}
	os.WriteFile(release1, nil, 0o600)
	st = m.waitStatus("idle again", statusIs("Online, Idle"))
	if len(st.Children) == 1 && st.Children[0].Visible {
		t.Fatalf("a finished build is still listed: %+v", st.Children)
	}
	if b, _ := dev.GetBuild(context.Background(), b1.ID); b.Status != "completed" {
		t.Fatalf("first build: %+v", b)
	}

	// Accept Builds off: paused, and a new build waits.
	m.click("Accept Builds")
	m.waitStatus("paused", statusIs("Paused: not accepting builds"))
	if acc := m.item("Accept Builds"); acc.Toggle != 0 {
		t.Fatalf("Accept Builds still ticked while paused: %+v", acc)
	}
	release2 := filepath.Join(dir, "release2")
	b2, err := dev.Submit(context.Background(), api.SubmitRequest{Platform: "android", Source: bytes.NewReader(projectWaitingFor(t, release2))})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if b, _ := dev.GetBuild(context.Background(), b2.ID); b.Status != "pending" {
		t.Fatalf("a paused worker took a build: %+v", b)
	}

	// Accept Builds on: the waiting build starts.
	m.click("Accept Builds")
	m.waitStatus("building the second build", statusIs("Building "+b2.ID[:min(12, len(b2.ID))]))

	// Quit drains: the app stays up until the running build has finished,
	// which completes (it is not handed back), then exits 0.
	m.click("Quit")
	m.waitStatus("draining", statusIs("Draining: finishing 1 build"))
	if q := m.item("Quit Now (hand back running builds)"); !q.Enabled {
		t.Fatalf("second quit: %+v", q)
	}
	select {
	case err := <-exited:
		t.Fatalf("the app exited before its build finished: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	os.WriteFile(release2, nil, 0o600)
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("the app did not exit 0 after draining: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the app did not exit after its build finished")
	}
	if b, _ := dev.GetBuild(context.Background(), b2.ID); b.Status != "completed" {
		t.Fatalf("the build running at Quit did not finish: %+v", b)
	}
	if out := a.output(); !strings.Contains(out, "unregistered") {
		t.Fatalf("the worker did not unregister:\n%s", out)
	}
}

// runningApp is a `freeagent app` child process and its menu.
type runningApp struct {
	menu   *trayMenu
	exited chan error
	dir    string // test scratch: data/, opened.txt
	out    syncbuf.Buffer
}

func (a *runningApp) output() string {
	return a.out.String()
}

// opened is what the app asked the desktop to show (URLs, files).
func (a *runningApp) opened() []string {
	b, _ := os.ReadFile(filepath.Join(a.dir, "opened.txt"))
	return strings.Fields(string(b))
}

// startApp runs `freeagent app` with the local driver on a private data
// folder, an --open-command that records what it is given, and waits for
// its menu on the session bus.
func startApp(t *testing.T, args []string, env ...string) *runningApp {
	t.Helper()
	testtool.Need(t, "npm") // the builds run `npm run freeagent:build`
	bus := sessionBus(t)
	appBin, vmBin := appBinaries(t)
	a := &runningApp{exited: make(chan error, 1), dir: t.TempDir()}
	// Traversable, for the solo controller's PostgreSQL, which runs as the
	// postgres user when the tests run as root.
	os.Chmod(filepath.Dir(a.dir), 0o711)
	os.Chmod(a.dir, 0o711)
	os.Mkdir(filepath.Join(a.dir, "data"), 0o711)
	openScript := filepath.Join(a.dir, "open.sh")
	os.WriteFile(openScript, []byte("#!/bin/sh\necho \"$1\" >> "+filepath.Join(a.dir, "opened.txt")+"\n"), 0o755)
	cmd := exec.Command(appBin, append([]string{"app", "--data-dir", filepath.Join(a.dir, "data"),
		// The test projects bring their own build script, not Gradle: android
		// is set, not left to the toolchain check (hostcheck.LocalPlatforms).
		"--vm-driver", "local", "--platforms", "android", "--bootstrap", vmBin, "--poll-wait", "1s", "--backoff-min", "200ms",
		"--open-command", openScript, "--min-free-gb", "0"}, args...)...)
	cmd.Env = []string{"DBUS_SESSION_BUS_ADDRESS=" + bus}
	for _, kv := range os.Environ() { // the settings come from the test alone
		if !strings.HasPrefix(kv, "FREEAGENT_") && !strings.HasPrefix(kv, "DBUS_SESSION_BUS_ADDRESS=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = &a.out, &a.out
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { a.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		a.exited <- <-a.exited
		if t.Failed() {
			t.Logf("app output:\n%s", a.output())
		}
	})
	conn, err := dbus.Connect(bus)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	a.menu = &trayMenu{t: t, obj: conn.Object(fmt.Sprintf("org.kde.StatusNotifierItem-%d-1", cmd.Process.Pid), "/StatusNotifierItem/menu")}
	// The first GetLayout answers one level only (systray's workaround for
	// GTK clients); later ones the whole tree.
	deadline := time.Now().Add(15 * time.Second)
	for _, err := a.menu.layout(); err != nil; _, err = a.menu.layout() {
		if time.Now().After(deadline) {
			t.Fatalf("the app's menu never appeared on the bus: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return a
}

// TestFirstRunThroughPreferences starts the app with nothing set up: the
// menu says so, Preferences… opens the page (a real HTTP round trip with
// its one-time token), and saving a controller and key starts the worker.
func TestFirstRunThroughPreferences(t *testing.T) {
	url, workerKey := controller(t)
	a := startApp(t, nil)
	m := a.menu
	m.waitStatus("needs setup", statusIs("Needs Setup"))
	if acc := m.item("Accept Builds"); acc.Enabled {
		t.Fatalf("Accept Builds enabled before setup: %+v", acc)
	}
	if fix := m.item("Open Preferences… to set them up"); !fix.Visible || !fix.Enabled {
		t.Fatalf("setup line: %+v", fix)
	}

	m.click("Preferences…")
	var link string
	deadline := time.Now().Add(10 * time.Second)
	for link == "" && time.Now().Before(deadline) {
		for _, o := range a.opened() {
			if strings.Contains(o, "/?token=") {
				link = o
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.HasPrefix(link, "http://127.0.0.1:") {
		t.Fatalf("Preferences… opened %v", a.opened())
	}
	c := prefstest.Browser()
	code, page := prefstest.Get(t, c, link)
	if code != http.StatusOK {
		t.Fatalf("preferences page: %d %s", code, page)
	}
	form := url2Values(map[string]string{"csrf": prefstest.CSRF(t, page), "controller_url": url, "api_key": workerKey,
		"max_builds": "1", "cpu": "0", "memory_gb": "0", "build_timeout_minutes": "30", "template": "freeagent-template"})
	base := link[:strings.Index(link, "/?token=")]
	if code, body := prefstest.Post(t, c, base+"/test", form); code != http.StatusOK || !strings.Contains(body, "API key accepted") {
		t.Fatalf("test connection: %d %s", code, body)
	}
	if code, body := prefstest.Post(t, c, base+"/save", form); code != http.StatusOK || !strings.Contains(body, `id="saved"`) {
		t.Fatalf("save: %d %s", code, body)
	}
	m.waitStatus("online after setup", statusIs("Online, Idle"))

	m.click("Open Dashboard")
	m.click("Open Logs")
	deadline = time.Now().Add(10 * time.Second)
	for len(a.opened()) < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if o := a.opened(); len(o) != 3 || o[1] != url+"/" || !strings.HasSuffix(o[2], filepath.Join("data", "logs", "agent.log")) {
		t.Fatalf("opened: %v", o)
	}
	m.click("Quit")
	select {
	case err := <-a.exited:
		a.exited <- err
		if err != nil {
			t.Fatalf("quit: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the app did not quit")
	}
}

func url2Values(m map[string]string) url.Values {
	v := url.Values{}
	for k, x := range m {
		v.Set(k, x)
	}
	return v
}

// TestSoloMode: one Mac, no server. The app runs the controller itself on
// its own PostgreSQL; a developer submits with the key the app wrote, and
// the build runs on this Mac's worker.
func TestSoloMode(t *testing.T) {
	if _, err := pgcluster.FindBinDir(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	a := startApp(t, []string{"--solo", "--solo-listen", fmt.Sprintf("127.0.0.1:%d", port)})
	a.menu.waitStatus("online on its own controller", statusIs("Online, Idle"))
	key, err := os.ReadFile(filepath.Join(a.dir, "data", "controller", "developer-key"))
	if err != nil {
		t.Fatal(err)
	}
	dev := &api.Client{BaseURL: fmt.Sprintf("http://127.0.0.1:%d", port), APIKey: strings.TrimSpace(string(key))}
	release := filepath.Join(a.dir, "release")
	b, err := dev.Submit(context.Background(), api.SubmitRequest{Platform: "android", Source: bytes.NewReader(projectWaitingFor(t, release))})
	if err != nil {
		t.Fatal(err)
	}
	a.menu.waitStatus("building", statusIs("Building "+b.ID[:min(12, len(b.ID))]))
	os.WriteFile(release, nil, 0o600)
	a.menu.waitStatus("idle", statusIs("Online, Idle"))
	if got, _ := dev.GetBuild(context.Background(), b.ID); got.Status != "completed" || len(got.Artifacts) != 1 {
		t.Fatalf("solo build: %+v", got)
	}
	// doctor finds the same controller and key as the app.
	var stdout, stderr bytes.Buffer
	code := run([]string{"doctor", "--data-dir", filepath.Join(a.dir, "data"), "--solo", "--solo-listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--vm-driver", "local", "--platforms", "android", "--min-free-gb", "0"}, strings.NewReader(""), &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), "✓ controller  controller http://127.0.0.1:") {
		t.Fatalf("doctor in solo mode: %d\n%s%s", code, stdout.String(), stderr.String())
	}
	a.menu.click("Quit")
	select {
	case err := <-a.exited:
		a.exited <- err
		if err != nil {
			t.Fatalf("quit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the app did not quit")
	}
	// The controller (and its database) stopped with the app.
	if _, err := dev.ListBuilds(context.Background(), api.ListOptions{}); err == nil {
		t.Fatal("the solo controller outlived the app")
	}
}

// TestAppWithoutADesktop: with no session bus there is no menu to show;
// the app says so and how to run headless, rather than run invisibly.
func TestAppWithoutADesktop(t *testing.T) {
	appBin, _ := appBinaries(t)
	// Inside an app bundle, no arguments means `app` (Finder passes none).
	bundled := filepath.Join(t.TempDir(), "FreeAgent.app", "Contents", "MacOS", "freeagent")
	os.MkdirAll(filepath.Dir(bundled), 0o755)
	b, err := os.ReadFile(appBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bundled, b, 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	// Finder's first launch of a quarantined app (after the Gatekeeper
	// dialog) passes a process serial number: still `app`.
	for _, argv := range [][]string{{appBin, "app", "--data-dir", t.TempDir()}, {bundled}, {bundled, "-psn_0_1234567"}} {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = []string{"PATH=/nonexistent", "HOME=" + home, "XDG_DATA_HOME=" + home, "XDG_RUNTIME_DIR=" + t.TempDir()}
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "no DBus session bus") ||
			!strings.Contains(string(out), "freeagent run") {
			t.Fatalf("%v: %v\n%s", argv, err, out)
		}
	}
	// Outside a bundle, no arguments is a usage error.
	cmd := exec.Command(appBin)
	if out, err := cmd.CombinedOutput(); !strings.Contains(string(out), "Usage:") || cmd.ProcessState.ExitCode() != 2 {
		t.Fatalf("no arguments: %v\n%s", err, out)
	}
}

// Once the app ends (from macOS's applicationWillTerminate too, after which
// the process exits at once), no solo controller starts again: a reload
// racing the end cannot leave one running with nobody to stop it.
func TestSoloControllerEndsForGood(t *testing.T) {
	h := &soloHolder{log: logrus.New()}
	h.end()
	h.end()
	url, err := h.want(context.Background(), &Config{Solo: true, DataDir: t.TempDir()}, nil)
	if err == nil || url != "" || h.ctl != nil {
		t.Fatalf("a solo controller after the end: %q %v", url, err)
	}
}
