package hostcheck_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/agent/hostcheck"
	"github.com/freeagent-build/freeagent/agent/secrets"
	"github.com/freeagent-build/freeagent/agent/tart"
	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/pgtest"
	"github.com/freeagent-build/freeagent/internal/standins/faketart/faketarttest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func quietLog() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

func fakeTart(t *testing.T, template string) (*tart.Driver, string) {
	bin := faketarttest.Build(t)
	home := faketarttest.Home(t)
	return &tart.Driver{Tart: bin, Template: template, Env: faketarttest.Env(home), Log: quietLog()}, home
}

// runVM boots VM name in the fake (idling) until the test ends.
func runVM(t *testing.T, d *tart.Driver, home, name string) (stop func()) {
	t.Helper()
	faketarttest.Template(t, home, name, nil, nil)
	cmd := faketarttest.Command(d.Tart, d.Env, "run", "--no-graphics", name)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			faketarttest.Run(t, d.Tart, d.Env, "stop", "--timeout", "5", name)
			cmd.Wait()
		})
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		vms, _ := d.List(context.Background())
		for _, vm := range vms {
			if vm.Name == name && vm.State == "running" {
				return stop
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("VM %s never showed as running", name)
	return nil
}

func TestTartTemplateAndVMLimit(t *testing.T) {
	ctx := context.Background()
	missing := &tart.Driver{Tart: filepath.Join(t.TempDir(), "no-tart"), Template: "x", Log: quietLog()}
	if r := hostcheck.Tart(ctx, missing); r.Severity != hostcheck.Fail || !strings.Contains(r.Fix, "brew install") {
		t.Fatalf("no tart: %+v", r)
	}
	// Without tart, the checks that need it are left out rather than repeated.
	rs := hostcheck.Run(ctx, hostcheck.Config{Tart: missing, DataDir: t.TempDir(), MinFree: 1})
	for _, r := range rs {
		if r.ID == hostcheck.IDTemplate || r.ID == hostcheck.IDVMLimit {
			t.Fatalf("template/VM checks ran without tart: %+v", rs)
		}
	}

	d, home := fakeTart(t, "macos-expo")
	if r := hostcheck.Tart(ctx, d); r.Severity != hostcheck.OK || r.Message != "Tart 2.32.0 ("+d.Tart+")" {
		t.Fatalf("tart version: %+v", r)
	}
	if r := hostcheck.Template(ctx, d); r.Severity != hostcheck.Fail || !strings.Contains(r.Message, `"macos-expo" is missing`) || r.Fix == "" {
		t.Fatalf("missing template: %+v", r)
	}
	remote := &tart.Driver{Tart: d.Tart, Env: d.Env, Template: "ghcr.io/acme/macos:15", Log: quietLog()}
	if r := hostcheck.Template(ctx, remote); r.Severity != hostcheck.Warn || !strings.Contains(r.Fix, "tart pull ghcr.io/acme/macos:15") {
		t.Fatalf("remote template not pulled: %+v", r)
	}
	faketarttest.Template(t, home, "macos-expo", nil, nil)
	if r := hostcheck.Template(ctx, d); r.Severity != hostcheck.OK {
		t.Fatalf("template present: %+v", r)
	}

	if r := hostcheck.VMLimit(ctx, d); r.Severity != hostcheck.OK {
		t.Fatalf("no VMs running: %+v", r)
	}
	stopOurs := runVM(t, d, home, "fa-build1-1") // ours: not counted
	if r := hostcheck.VMLimit(ctx, d); r.Severity != hostcheck.OK {
		t.Fatalf("only a Free Agent VM running: %+v", r)
	}
	stopOurs()
	runVM(t, d, home, "personal")
	if r := hostcheck.VMLimit(ctx, d); r.Severity != hostcheck.Warn || !strings.Contains(r.Fix, "personal") {
		t.Fatalf("one other VM: %+v", r)
	}
	runVM(t, d, home, "other")
	r := hostcheck.VMLimit(ctx, d)
	if r.Severity != hostcheck.Fail || !strings.Contains(r.Message, "no build can start") || !strings.Contains(r.Fix, "tart stop") {
		t.Fatalf("VM limit stuck: %+v", r)
	}
}

func TestDisk(t *testing.T) {
	dir := t.TempDir()
	if r := hostcheck.Disk(dir, 1); r.Severity != hostcheck.OK || !strings.Contains(r.Message, "GB free") {
		t.Fatalf("disk ok: %+v", r)
	}
	if r := hostcheck.Disk(dir, 1<<62); r.Severity != hostcheck.Fail || !strings.Contains(r.Message, "low disk space") || r.Fix == "" {
		t.Fatalf("low disk: %+v", r)
	}
	if r := hostcheck.Disk(dir, 0); r.Severity != hostcheck.OK {
		t.Fatalf("no threshold: %+v", r)
	}
	// A data folder not created yet is measured on its parent's disk.
	if r := hostcheck.Disk(filepath.Join(dir, "not", "yet"), 1); r.Severity != hostcheck.OK {
		t.Fatalf("missing folder: %+v", r)
	}
}

func TestControllerAndCredentials(t *testing.T) {
	ctx := context.Background()
	c := controllertest.Start(t, controllertest.Logger(quietLog()))
	workerKey, devKey := c.WorkerKey, c.DeveloperKey

	cases := []struct {
		name, url, key string
		want           hostcheck.Severity
		text           string
	}{
		{"good", c.URL, workerKey, hostcheck.OK, "API key accepted"},
		{"unknown key", c.URL, "fak_nope", hostcheck.Fail, "does not know this API key"},
		{"developer key", c.URL, devKey, hostcheck.Fail, "not a worker key"},
		{"no key", c.URL, "", hostcheck.Warn, "no API key to test"},
		{"down", "http://127.0.0.1:1", workerKey, hostcheck.Fail, "unreachable"},
		{"no url", "", workerKey, hostcheck.Fail, "no controller URL"},
		{"plain http elsewhere", "http://192.0.2.10:8080", workerKey, hostcheck.Fail, "plain http to another machine"},
	}
	for _, tc := range cases {
		r := hostcheck.Controller(ctx, hostcheck.Config{ControllerURL: tc.url, APIKey: tc.key, Timeout: 5 * time.Second})
		if r.Severity != tc.want || !strings.Contains(r.Message, tc.text) || (r.Severity != hostcheck.OK && r.Fix == "") {
			t.Errorf("%s: %+v", tc.name, r)
		}
	}
	// A URL that redirects elsewhere is the finding; the key goes nowhere.
	var leaked atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(api.HeaderAPIKey) != "" {
			leaked.Add(1)
		}
	}))
	defer elsewhere.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	if r := hostcheck.Controller(ctx, hostcheck.Config{ControllerURL: redirector.URL, APIKey: workerKey, Timeout: 5 * time.Second}); r.Severity != hostcheck.Fail ||
		!strings.Contains(r.Fix, "redirects to "+elsewhere.URL) || leaked.Load() != 0 {
		t.Errorf("redirecting URL: %+v, key sent on %d times", r, leaked.Load())
	}
	// The key check registers nothing.
	ws, err := c.Store.ListWorkers(ctx)
	if err != nil || len(ws) != 0 {
		t.Fatalf("the key check registered a worker: %v %v", ws, err)
	}

	store := &secrets.FileStore{Path: filepath.Join(t.TempDir(), "credentials.json")}
	if r := hostcheck.Credentials(hostcheck.Config{KeyStore: store}); r.Severity != hostcheck.Fail || !strings.Contains(r.Fix, "Preferences") {
		t.Fatalf("no key: %+v", r)
	}
	if r := hostcheck.Credentials(hostcheck.Config{APIKey: "k", KeyStore: store}); r.Severity != hostcheck.OK || !strings.Contains(r.Message, store.Path) {
		t.Fatalf("key: %+v", r)
	}
	// The results are what `freeagent doctor --json` prints.
	b, _ := json.Marshal(hostcheck.Run(ctx, hostcheck.Config{ControllerURL: c.URL, APIKey: workerKey, DataDir: t.TempDir(), MinFree: 1}))
	if !strings.Contains(string(b), `"id":"controller","severity":"ok"`) {
		t.Fatalf("json: %s", b)
	}
}

// TestSoftnet: a missing softnet fails with the install command; one
// owned by root with the setuid bit passes; the shared network warns.
func TestSoftnet(t *testing.T) {
	ctx := context.Background()
	d := &tart.Driver{Softnet: filepath.Join(t.TempDir(), "softnet"), Log: quietLog()}
	if r := hostcheck.Softnet(ctx, d); r.Severity != hostcheck.Fail || !strings.Contains(r.Message, "softnet is not installed") || !strings.Contains(r.Fix, "brew install cirruslabs/cli/softnet") {
		t.Fatalf("no softnet: %+v", r)
	}
	d.Network = tart.NetworkShared
	if r := hostcheck.Softnet(ctx, d); r.Severity != hostcheck.Warn || !strings.Contains(r.Message, "LAN") {
		t.Fatalf("shared network: %+v", r)
	}
	d.Network = ""
	bin := faketarttest.Softnet(t)
	d.Softnet = bin
	if os.Geteuid() != 0 {
		t.Log("not root: the setuid-root case is not checked")
		return
	}
	if err := os.Chmod(bin, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if r := hostcheck.Softnet(ctx, d); r.Severity != hostcheck.OK || !strings.Contains(r.Message, "setuid root") {
		t.Fatalf("setuid softnet: %+v", r)
	}
}
