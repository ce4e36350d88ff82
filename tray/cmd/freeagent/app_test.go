package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/freeagent-build/freeagent/controller/api"
)

// sessionBus returns the address of a session bus: the one this test runs
// under, else a private dbus-daemon started for the test.
func sessionBus(t *testing.T) string {
	t.Helper()
	if addr := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); addr != "" {
		return addr
	}
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("dbus-daemon is required for the menu-bar test (apt-get install dbus)")
		}
		t.Skip("no dbus-daemon: the menu bar is read over DBus (apt-get install dbus)")
	}
	cmd := exec.Command(daemon, "--session", "--nofork", "--print-address")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
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
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(body))})
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// TestMenuBarOverDBus runs `freeagent app` against a real controller and
// drives its menu over DBus: the status line follows the builds, "Accept
// Builds" pauses the worker, and Quit drains it before the app exits 0.
func TestMenuBarOverDBus(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("npm is required: the builds run `npm run freeagent:build` (apt-get install npm)")
		}
		t.Skip("npm not installed: the fixture project builds with `npm run freeagent:build`")
	}
	bus := sessionBus(t)
	appBin, vmBin := appBinaries(t)
	url, workerKey, devKey := controllerWithDev(t)
	dev := &api.Client{BaseURL: url, APIKey: devKey}
	dir := t.TempDir()
	opened := filepath.Join(dir, "opened.txt")
	openScript := filepath.Join(dir, "open.sh")
	os.WriteFile(openScript, []byte("#!/bin/sh\necho \"$1\" >> "+opened+"\n"), 0o755)

	cmd := exec.Command(appBin, "app", "--data-dir", filepath.Join(dir, "data"), "--controller-url", url,
		"--vm-driver", "local", "--bootstrap", vmBin, "--poll-wait", "1s", "--backoff-min", "200ms",
		"--open-command", openScript, "--min-free-gb", "0")
	cmd.Env = append(os.Environ(), "DBUS_SESSION_BUS_ADDRESS="+bus, "FREEAGENT_API_KEY="+workerKey)
	var out bytes.Buffer
	var outMu sync.Mutex
	cmd.Stdout = syncWriter{&outMu, &out}
	cmd.Stderr = syncWriter{&outMu, &out}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		exited <- nil
		if t.Failed() {
			outMu.Lock()
			t.Logf("app output:\n%s", out.String())
			outMu.Unlock()
		}
	})

	conn, err := dbus.Connect(bus)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	m := &trayMenu{t: t, obj: conn.Object(fmt.Sprintf("org.kde.StatusNotifierItem-%d-1", cmd.Process.Pid), "/StatusNotifierItem/menu")}
	// The first GetLayout answers one level only (systray's workaround for
	// GTK clients); later ones the whole tree.
	deadline := time.Now().Add(15 * time.Second)
	for _, err := m.layout(); err != nil; _, err = m.layout() {
		if time.Now().After(deadline) {
			t.Fatalf("the app's menu never appeared on the bus: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

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
	outMu.Lock()
	defer outMu.Unlock()
	if !strings.Contains(out.String(), "unregistered") {
		t.Fatalf("the worker did not unregister:\n%s", out.String())
	}
}

type syncWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
