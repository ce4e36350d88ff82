package dashboard_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/pgtest"
	"github.com/freeagent-build/freeagent/controller/store"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// farm is a real controller (controllertest: the composition root) on a
// fresh database, with keys of every role and API clients for them.
type farm struct {
	t                         testing.TB
	url                       string
	dsn                       string
	store                     *store.Store
	adminKey, devKey, workKey string
	admin, dev, worker        *api.Client
	shutdown                  func() error // stops the controller (once)
}

func newFarm(t testing.TB) *farm {
	t.Helper()
	c := controllertest.Start(t, controllertest.Logger(quiet()))
	f := &farm{t: t, url: c.URL, dsn: c.DSN, store: c.Store, shutdown: c.Stop}
	// The pages show key names: these are the ones the tests look for.
	f.adminKey, f.admin = c.Key("ops", api.RoleAdmin)
	f.devKey, f.dev = c.Key("alice", api.RoleDeveloper)
	f.workKey, f.worker = c.Key("mac-key", api.RoleWorker)
	return f
}

// quiet discards the controller's log: the dashboard's tests fail requests
// on purpose.
func quiet() *logrus.Logger {
	log := logrus.New()
	log.SetOutput(io.Discard)
	return log
}

// project is a small tar.gz project archive.
// project is the smallest project archive: a package.json.
func project(t testing.TB) []byte {
	return controllertest.Project(t, map[string]string{"package.json": `{"name":"app"}`})
}

func (f *farm) submit(platform string) api.SubmitResponse {
	f.t.Helper()
	resp, err := f.dev.Submit(context.Background(), api.SubmitRequest{Platform: platform, Profile: "preview", Source: bytes.NewReader(project(f.t))})
	if err != nil {
		f.t.Fatalf("submit: %v", err)
	}
	return resp
}

// workerSession drives the worker protocol through the API client.
type workerSession struct {
	f     *farm
	id    string
	token string
}

func (f *farm) register(name string, caps api.Capabilities) *workerSession {
	f.t.Helper()
	resp, err := f.worker.Register(context.Background(), api.RegisterRequest{Name: name, Capabilities: caps})
	if err != nil {
		f.t.Fatalf("register: %v", err)
	}
	return &workerSession{f: f, id: resp.ID, token: resp.AccessToken}
}

func (w *workerSession) keep(g api.TokenGrant) {
	if g.AccessToken != "" {
		w.token = g.AccessToken
	}
}

func (w *workerSession) poll() *api.Job {
	w.f.t.Helper()
	resp, err := w.f.worker.Poll(context.Background(), w.token, 0)
	if err != nil {
		w.f.t.Fatalf("poll: %v", err)
	}
	w.keep(resp.TokenGrant)
	return resp.Job
}

func (w *workerSession) heartbeat(j *api.Job) {
	w.f.t.Helper()
	resp, err := w.f.worker.Heartbeat(context.Background(), w.token, api.HeartbeatRequest{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken})
	if err != nil {
		w.f.t.Fatalf("heartbeat: %v", err)
	}
	w.keep(resp.TokenGrant)
}

func (w *workerSession) complete(j *api.Job, r api.Result) api.ResultResponse {
	w.f.t.Helper()
	r.BuildID, r.AttemptID, r.LeaseToken = j.ID, j.AttemptID, j.LeaseToken
	resp, err := w.f.worker.Upload(context.Background(), w.token, r)
	if err != nil {
		w.f.t.Fatalf("upload result: %v", err)
	}
	return resp
}

// vmToken authenticates as the build's VM, to write its log.
func (f *farm) vmToken(j *api.Job) string {
	f.t.Helper()
	resp, err := f.worker.VMAuth(context.Background(), j.ID, j.OTP)
	if err != nil {
		f.t.Fatalf("vm auth: %v", err)
	}
	return resp.VMToken
}

func (f *farm) buildStatus(id string) api.BuildStatus {
	f.t.Helper()
	b, err := f.admin.GetBuild(context.Background(), id)
	if err != nil {
		f.t.Fatalf("get build: %v", err)
	}
	return b.Status
}

// browser is a plain HTTP client with a cookie jar, for the server-side
// checks that need no JavaScript.
type browser struct {
	t    testing.TB
	base string
	c    *http.Client
}

func (f *farm) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: f.t, base: f.url, c: &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(method, path string, form url.Values, header ...string) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	return page{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}

func (b *browser) get(path string) page { return b.do(http.MethodGet, path, nil) }

func (b *browser) post(path string, form url.Values) page { return b.do(http.MethodPost, path, form) }

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the form token a page carries.
func (p page) csrf(t testing.TB) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("page has no CSRF token: %.400s", p.body)
	}
	return m[1]
}

// login signs in through the login form.
func (b *browser) login(key string) page {
	b.t.Helper()
	form := b.get("/login")
	if form.status != http.StatusOK {
		b.t.Fatalf("login page: %d", form.status)
	}
	return b.post("/login", url.Values{"csrf": {form.csrf(b.t)}, "api_key": {key}, "next": {"/"}})
}

func (b *browser) mustLogin(key string) {
	b.t.Helper()
	if p := b.login(key); p.status != http.StatusSeeOther {
		b.t.Fatalf("login: want 303, got %d: %.500s", p.status, p.body)
	}
}

func wantContains(t testing.TB, p page, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(p.body, s) {
			t.Errorf("page (%d) lacks %q:\n%.1500s", p.status, s, p.body)
		}
	}
}
