package httpapi_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/controller/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/blobs/s3blobs"
	"github.com/freeagent-build/freeagent/controller/blobs/s3blobs/s3test"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/install"
	"github.com/freeagent-build/freeagent/controller/metrics"
	"github.com/freeagent-build/freeagent/controller/notify"
	"github.com/freeagent-build/freeagent/controller/pgtest"
	"github.com/freeagent-build/freeagent/controller/reaper"
	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/controller/webhooks"
)

func TestMain(m *testing.M) { os.Exit(s3test.Main(s3test.Run(func() int { return pgtest.Main(m) }))) }

// env is a real controller (HTTP server, store, hub, file store) on a fresh
// database, with one key of each role.
type env struct {
	t       *testing.T
	dsn     string
	dataDir string
	URL     string
	store   *store.Store
	blobs   *blobs.Store
	reaper  *reaper.Reaper
	metrics *metrics.Metrics
	links   *install.Signer
	hooks   *webhooks.Dispatcher
	key     []byte // the certificate key
	cfg     store.Config
	limits  httpapi.Limits
	minFree blobs.Floor    // httpapi.Options.MinFreeDisk
	bucket  *s3test.Bucket // when set, files live in this bucket (direct transfers on), not in dataDir

	admin, developer, worker  *api.Client
	adminKey, devKey, workKey string
	stop                      func()
}

type envOption func(*store.Config, *httpapi.Limits)

// noRateLimits turns the request budgets off, for tests that drive many
// workers through one key or fail authentication on purpose, hundreds of
// times a second.
func noRateLimits(_ *store.Config, l *httpapi.Limits) { l.RatePerKey, l.AuthFailuresPerIP = httpapi.Off, httpapi.Off }

func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	return newEnvOn(t, nil, opts...)
}

// newEnvOn is newEnv with the files in bucket (nil: in a directory).
func newEnvOn(t *testing.T, bucket *s3test.Bucket, opts ...envOption) *env {
	t.Helper()
	e := &env{t: t, dsn: pgtest.NewDatabase(t), dataDir: t.TempDir(), cfg: store.DefaultConfig(), limits: httpapi.DefaultLimits(), bucket: bucket}
	e.limits.PollBackstop = 200 * time.Millisecond
	for _, o := range opts {
		o(&e.cfg, &e.limits)
	}
	e.start()
	ctx := context.Background()
	mk := func(name, role string) (string, *api.Client) {
		_, secret, err := e.store.CreateKey(ctx, name, role)
		if err != nil {
			t.Fatal(err)
		}
		return secret, &api.Client{BaseURL: e.URL, APIKey: secret}
	}
	e.adminKey, e.admin = mk("admin", "admin")
	e.devKey, e.developer = mk("dev", "developer")
	e.workKey, e.worker = mk("worker", "worker")
	return e
}

// start (re)starts the controller on the env's database and data directory.
func (e *env) start() {
	t := e.t
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, e.dsn, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	key, err := blobs.LoadOrCreateKey(filepath.Join(e.dataDir, "certs.key"))
	if err != nil {
		t.Fatal(err)
	}
	var files *blobs.Store
	if e.bucket != nil {
		cfg, err := s3blobs.ParseURL(e.bucket.URL(""))
		if err != nil {
			t.Fatal(err)
		}
		backend, err := s3blobs.Open(ctx, cfg, s3blobs.Options{SpoolDir: filepath.Join(e.dataDir, "spool"), Credentials: e.bucket.Credentials()})
		if err != nil {
			t.Fatal(err)
		}
		files, err = blobs.New(backend, key)
	} else {
		files, err = blobs.Open(filepath.Join(e.dataDir, "files"), key)
	}
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(testWriter{t})
	log.SetLevel(logrus.WarnLevel)
	hub := notify.New(e.dsn, log)
	hubDone := make(chan struct{})
	go func() { hub.Run(ctx); close(hubDone) }()
	<-hub.Ready()
	linkKey, err := blobs.LoadOrCreateKey(filepath.Join(e.dataDir, "links.key"))
	if err != nil {
		t.Fatal(err)
	}
	if e.links, err = install.NewSigner(linkKey, 0); err != nil {
		t.Fatal(err)
	}
	e.metrics = metrics.New(st, time.Nanosecond) // ended builds recounted on every scrape
	e.key = key
	e.hooks = e.dispatcher(st)
	e.reaper = reaper.New(st, files, time.Hour, log)
	e.reaper.OnSweep = e.metrics.Sweep
	srv := httpapi.New(httpapi.Options{Store: st, Blobs: files, Hub: hub, Limits: e.limits, Log: log, KeyCacheTTL: time.Nanosecond,
		Metrics: e.metrics, Links: e.links, Webhooks: e.hooks, MinFreeDisk: e.minFree})
	hs := httptest.NewServer(srv)
	e.URL, e.store, e.blobs = hs.URL, st, files
	for _, c := range []*api.Client{e.admin, e.developer, e.worker} {
		if c != nil {
			c.BaseURL = hs.URL
		}
	}
	stopped := false
	e.stop = func() {
		if stopped {
			return
		}
		stopped = true
		srv.Drain()
		hs.Close()
		cancel()
		<-hubDone
		st.Close()
	}
	t.Cleanup(e.stop)
}

// loopbackAllowed lets deliveries reach the tests' receivers on 127.0.0.1,
// as an admin's --webhook-allow 127.0.0.0/8 would.
var loopbackAllowed = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// dispatcher returns a webhook dispatcher (not running) with test timings:
// checks every 50 ms, 2 s timeout, backoff 200 ms doubling; loopback allowed.
func (e *env) dispatcher(st *store.Store) *webhooks.Dispatcher {
	e.t.Helper()
	d, err := webhooks.New(st, e.key, webhooks.Config{Interval: 50 * time.Millisecond, Timeout: 2 * time.Second,
		BackoffBase: 200 * time.Millisecond, Allow: loopbackAllowed}, e.metrics, testLogger(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

func testLogger(t *testing.T) *logrus.Logger {
	log := logrus.New()
	log.SetOutput(testWriter{t})
	log.SetLevel(logrus.WarnLevel)
	return log
}

// restart simulates a controller restart: a new process on the same
// database and files.
func (e *env) restart() {
	e.stop()
	e.start()
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// project returns a small tar.gz project archive.
func project(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (e *env) submit(platform string) (api.SubmitResponse, []byte) {
	e.t.Helper()
	src := project(e.t, map[string]string{"package.json": `{"name":"app"}`, "app.json": `{"expo":{}}`})
	resp, err := e.developer.Submit(context.Background(), api.SubmitRequest{Platform: platform, Source: bytes.NewReader(src)})
	if err != nil {
		e.t.Fatalf("submit: %v", err)
	}
	return resp, src
}

// registeredWorker registers a worker and returns its token holder.
type workerSession struct {
	e     *env
	id    string
	token string
}

func (e *env) register(name string, caps api.Capabilities) *workerSession {
	e.t.Helper()
	resp, err := e.worker.Register(context.Background(), api.RegisterRequest{Name: name, Capabilities: caps})
	if err != nil {
		e.t.Fatalf("register: %v", err)
	}
	return &workerSession{e: e, id: resp.ID, token: resp.AccessToken}
}

// keep adopts the newest token grant, as an agent does.
func (w *workerSession) keep(g api.TokenGrant) {
	if g.AccessToken != "" {
		w.token = g.AccessToken
	}
}

func (w *workerSession) poll(wait time.Duration) *api.Job {
	w.e.t.Helper()
	resp, err := w.e.worker.Poll(context.Background(), w.token, wait)
	if err != nil {
		w.e.t.Fatalf("poll: %v", err)
	}
	w.keep(resp.TokenGrant)
	return resp.Job
}

func (w *workerSession) heartbeat(j *api.Job) (api.HeartbeatResponse, error) {
	resp, err := w.e.worker.Heartbeat(context.Background(), w.token, api.HeartbeatRequest{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken})
	if err == nil {
		w.keep(resp.TokenGrant)
	}
	return resp, err
}

func (w *workerSession) complete(j *api.Job, r api.Result) (api.ResultResponse, error) {
	r.BuildID, r.AttemptID, r.LeaseToken = j.ID, j.AttemptID, j.LeaseToken
	return w.e.worker.Upload(context.Background(), w.token, r)
}

func wantStatus(t testing.TB, err error, status int) {
	t.Helper()
	if got := api.StatusOf(err); got != status {
		t.Fatalf("want HTTP %d, got %d (%v)", status, got, err)
	}
}

func (e *env) build(id string) api.Build {
	e.t.Helper()
	b, err := e.admin.GetBuild(context.Background(), id)
	if err != nil {
		e.t.Fatalf("get build %s: %v", id, err)
	}
	return b
}
