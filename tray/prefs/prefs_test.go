package prefs

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/tray/prefs/prefstest"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/agent/hostcheck"
	"github.com/freeagent-build/freeagent/agent/secrets"
	"github.com/freeagent-build/freeagent/tray/conffile"
)

type fixture struct {
	t      *testing.T
	srv    *Server
	dir    string
	store  *secrets.FileStore
	saved  atomic.Int32
	tested atomic.Value // the key "Test Connection" was given
}

func start(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir()}
	f.store = &secrets.FileStore{Path: filepath.Join(f.dir, "credentials.json")}
	log := logrus.New()
	log.SetOutput(io.Discard)
	srv, err := Start(Config{DataDir: f.dir, Secrets: f.store, Log: log,
		Defaults: Values{MaxBuilds: 1, BuildTimeout: 2 * time.Hour, Template: "freeagent-template"},
		Saved:    func() { f.saved.Add(1) },
		Test: func(_ context.Context, u, key string) hostcheck.Result {
			f.tested.Store(key)
			if u == "http://good.example" {
				return hostcheck.Result{Severity: hostcheck.OK, Message: "controller reachable; API key accepted"}
			}
			return hostcheck.Result{Severity: hostcheck.Fail, Message: "controller unreachable", Fix: "check the URL"}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(context.Background()) })
	f.srv = srv
	return f
}

func validForm(csrf string) url.Values {
	return url.Values{"csrf": {csrf}, "controller_url": {"https://builds.example.com"}, "api_key": {"fak_secret_worker_key"},
		"max_builds": {"2"}, "cpu": {"6"}, "memory_gb": {"12"}, "build_timeout_minutes": {"45"}, "template": {"ghcr.io/acme/macos-xcode:16"},
		"cache_gb": {"30"}}
}

func TestTokenAndCSRF(t *testing.T) {
	f := start(t)
	base := f.srv.base
	c := prefstest.Browser()
	if code, body := prefstest.Get(t, c, base+"/"); code != http.StatusForbidden || !strings.Contains(body, "Preferences…") {
		t.Fatalf("no token: %d %s", code, body)
	}
	if code, _ := prefstest.Get(t, c, base+"/?token=wrong"); code != http.StatusForbidden {
		t.Fatalf("wrong token: %d", code)
	}
	link, err := f.srv.NewURL()
	if err != nil {
		t.Fatal(err)
	}
	code, page := prefstest.Get(t, c, link)
	if code != http.StatusOK || !strings.Contains(page, "Free Agent Preferences") {
		t.Fatalf("with the token: %d %s", code, page)
	}
	u, _ := url.Parse(base)
	var session *http.Cookie
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == cookieName {
			session = ck
		}
	}
	if session == nil {
		t.Fatal("no session cookie")
	}
	// The token works once: another browser cannot reuse it.
	if code, _ := prefstest.Get(t, prefstest.Browser(), link); code != http.StatusForbidden {
		t.Fatalf("a used token was accepted again: %d", code)
	}
	// The cookie is HttpOnly and SameSite=Strict.
	resp, err := noRedirect(prefstest.Browser()).Get(mustURL(t, f))
	if err != nil {
		t.Fatal(err)
	}
	sc := resp.Header.Get("Set-Cookie")
	resp.Body.Close()
	if !strings.Contains(sc, "HttpOnly") || !strings.Contains(sc, "SameSite=Strict") || resp.Header.Get("Location") != "/" {
		t.Fatalf("cookie: %q", sc)
	}

	// A form without the CSRF token, or from a browser without the session, is refused.
	form := validForm("")
	if code, _ := prefstest.Post(t, c, base+"/save", form); code != http.StatusForbidden {
		t.Fatalf("no CSRF: %d", code)
	}
	if code, _ := prefstest.Post(t, prefstest.Browser(), base+"/save", validForm(prefstest.CSRF(t, page))); code != http.StatusForbidden {
		t.Fatalf("CSRF without the session: %d", code)
	}
	// Another host name (DNS rebinding) is refused.
	req, _ := http.NewRequest("GET", link, nil)
	req.Host = "evil.example:80"
	if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign Host: %v %v", resp, err)
	}
	if f.saved.Load() != 0 {
		t.Fatal("a refused form saved settings")
	}
}

func mustURL(t *testing.T, f *fixture) string {
	t.Helper()
	u, err := f.srv.NewURL()
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// noRedirect stops at the 303 so its target can be checked.
func noRedirect(c *http.Client) *http.Client {
	cc := *c
	cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cc
}

func TestSaveAndReread(t *testing.T) {
	f := start(t)
	c := prefstest.Browser()
	_, page := prefstest.Get(t, c, mustURL(t, f))
	if !strings.Contains(page, `value="freeagent-template"`) || !strings.Contains(page, `name="build_timeout_minutes" min="1" max="1440" value="120"`) {
		t.Fatalf("defaults not shown:\n%s", page)
	}
	csrf := prefstest.CSRF(t, page)

	// Bad values: 422, each problem named, nothing written.
	bad := validForm(csrf)
	bad.Set("max_builds", "3")
	bad.Set("controller_url", "builds.example.com")
	code, body := prefstest.Post(t, c, f.srv.base+"/save", bad)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "macOS runs at most 2 VMs") || !strings.Contains(body, "e.g. https://builds.example.com") {
		t.Fatalf("bad values: %d %s", code, body)
	}
	if m, _ := conffile.Read(filepath.Join(f.dir, conffile.Name)); len(m) != 0 {
		t.Fatalf("bad values were written: %v", m)
	}
	if strings.Contains(body, "fak_secret_worker_key") {
		t.Fatal("the key was rendered back")
	}

	resp, err := noRedirect(c).PostForm(f.srv.base+"/save", validForm(csrf))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/?saved=1" || f.saved.Load() != 1 {
		t.Fatalf("save: %d %q saved=%d", resp.StatusCode, resp.Header.Get("Location"), f.saved.Load())
	}
	m, err := conffile.Read(filepath.Join(f.dir, conffile.Name))
	want := map[string]string{"controller-url": "https://builds.example.com", "max-builds": "2", "cpu": "6", "memory-mb": "12288",
		"build-timeout": "45m", "template": "ghcr.io/acme/macos-xcode:16", "cache-gb": "30"}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("agent.conf %s = %q, want %q (err %v)", k, m[k], v, err)
		}
	}
	if key, err := f.store.Get(secrets.KeyAPIKey); err != nil || key != "fak_secret_worker_key" {
		t.Fatalf("stored key: %q %v", key, err)
	}

	// Re-read: the page shows the saved values, says the key is stored, never shows it.
	_, page = prefstest.Get(t, c, f.srv.base+"/?saved=1")
	for _, s := range []string{`id="saved"`, `value="https://builds.example.com"`, `name="max_builds" min="1" max="2" value="2"`,
		`name="cpu" min="0" value="6"`, `name="memory_gb" min="0" value="12"`, `value="45"`, `value="ghcr.io/acme/macos-xcode:16"`, `name="cache_gb" min="0" value="30"`, "stored — leave empty to keep it"} {
		if !strings.Contains(page, s) {
			t.Errorf("re-read page lacks %s", s)
		}
	}
	if strings.Contains(page, "fak_secret_worker_key") {
		t.Fatal("the key is in the page")
	}

	// An empty key field keeps the stored key.
	keep := validForm(prefstest.CSRF(t, page))
	keep.Set("api_key", "")
	keep.Set("cpu", "0")
	prefstest.Post(t, c, f.srv.base+"/save", keep)
	if key, _ := f.store.Get(secrets.KeyAPIKey); key != "fak_secret_worker_key" {
		t.Fatalf("an empty key field replaced the key: %q", key)
	}
	if m, _ := conffile.Read(filepath.Join(f.dir, conffile.Name)); m["cpu"] != "0" {
		t.Fatalf("second save: %v", m)
	}
}

func TestTestConnection(t *testing.T) {
	f := start(t)
	f.store.Set(secrets.KeyAPIKey, "fak_stored")
	c := prefstest.Browser()
	_, page := prefstest.Get(t, c, mustURL(t, f))
	form := validForm(prefstest.CSRF(t, page))
	form.Set("controller_url", "http://good.example")
	form.Set("api_key", "")
	code, body := prefstest.Post(t, c, f.srv.base+"/test", form)
	if code != http.StatusOK || !strings.Contains(body, `class="note ok" id="test-result">controller reachable; API key accepted`) {
		t.Fatalf("test: %d %s", code, body)
	}
	if f.tested.Load() != "fak_stored" {
		t.Fatalf("an empty key field tests the stored key, got %v", f.tested.Load())
	}
	form.Set("controller_url", "http://down.example")
	form.Set("api_key", "fak_typed")
	_, body = prefstest.Post(t, c, f.srv.base+"/test", form)
	if !strings.Contains(body, "controller unreachable<br>Fix: check the URL") || f.tested.Load() != "fak_typed" || strings.Contains(body, "fak_typed") {
		t.Fatalf("failed test: %s", body)
	}
	if m, _ := conffile.Read(filepath.Join(f.dir, conffile.Name)); len(m) != 0 || f.saved.Load() != 0 {
		t.Fatalf("testing saved settings: %v", m)
	}
}

func TestSoloModeNeedsNoControllerURL(t *testing.T) {
	f := start(t)
	f.srv.cfg.SoloURL, f.srv.cfg.SoloKeyFile = "http://127.0.0.1:8420", "/data/controller/developer-key"
	c := prefstest.Browser()
	_, page := prefstest.Get(t, c, mustURL(t, f))
	if strings.Contains(page, "EXPO_CONTROLLER_URL") {
		t.Fatal("expo-build hint shown with solo mode off")
	}
	form := validForm(prefstest.CSRF(t, page))
	form.Set("controller_url", "")
	form.Set("api_key", "")
	if code, body := prefstest.Post(t, c, f.srv.base+"/save", form); code != http.StatusUnprocessableEntity || !strings.Contains(body, "controller&#39;s address") {
		t.Fatalf("no URL without solo mode: %d %s", code, body)
	}
	form.Set("solo", "on")
	code, page := prefstest.Post(t, c, f.srv.base+"/save", form)
	if code != http.StatusOK || !strings.Contains(page, `id="saved"`) {
		t.Fatalf("solo save: %d %s", code, page)
	}
	m, _ := conffile.Read(filepath.Join(f.dir, conffile.Name))
	if m["solo"] != "true" || m["controller-url"] != "" {
		t.Fatalf("agent.conf: %v", m)
	}
	if !strings.Contains(page, `id="solo" name="solo" checked`) ||
		!strings.Contains(page, "EXPO_CONTROLLER_URL=http://127.0.0.1:8420") || !strings.Contains(page, "/data/controller/developer-key") {
		t.Fatalf("solo page:\n%s", page)
	}
}

// The owner's rules are saved to agent.conf with the keys the worker reads,
// checked with the worker's own parsers, and shown again.
func TestRulesSaveAndReread(t *testing.T) {
	f := start(t)
	c := prefstest.Browser()
	_, page := prefstest.Get(t, c, mustURL(t, f))
	form := validForm(prefstest.CSRF(t, page))
	form.Set("schedule", "Mon-Fry 22:00-07:00")
	form.Set("idle_minutes", "soon")
	form.Set("pause_thermal", "toasty")
	code, body := prefstest.Post(t, c, f.srv.base+"/save", form)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "Mon-Fry") || !strings.Contains(body, "or auto (10 on a laptop") ||
		!strings.Contains(body, "serious, critical or off") {
		t.Fatalf("bad rules: %d %s", code, body)
	}
	form.Set("schedule", "Mon-Fri 22:00-07:00, Sat-Sun 00:00-24:00")
	form.Set("idle_minutes", "15")
	form.Set("pause_thermal", "critical")
	form.Set("build_on_battery", "on")
	form.Set("min_battery_percent", "40")
	form.Set("min_free_gb", "20")
	if code, body := prefstest.Post(t, c, f.srv.base+"/save", form); code != http.StatusOK {
		t.Fatalf("save: %d %s", code, body)
	}
	m, err := conffile.Read(filepath.Join(f.dir, conffile.Name))
	want := map[string]string{"schedule": "Mon-Fri 22:00-07:00, Sat-Sun 00:00-24:00", "idle-minutes": "15", "pause-thermal": "critical",
		"build-on-battery": "true", "min-battery-percent": "40", "min-free-gb": "20"}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("agent.conf %s = %q, want %q (err %v)", k, m[k], v, err)
		}
	}
	_, page = prefstest.Get(t, c, f.srv.base+"/?saved=1")
	for _, s := range []string{`value="Mon-Fri 22:00-07:00, Sat-Sun 00:00-24:00"`, `name="idle_minutes" value="15"`, `<option value="critical" selected>`,
		`name="build_on_battery" checked`, `value="40"`, `name="min_free_gb" min="0" value="20"`} {
		if !strings.Contains(page, s) {
			t.Errorf("re-read page lacks %s", s)
		}
	}
}
