package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/blobs/s3blobs/s3test"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/install"
	"github.com/freeagent-build/freeagent/controller/metrics"
	"github.com/freeagent-build/freeagent/controller/pgtest"
	"github.com/freeagent-build/freeagent/controller/reaper"
	"github.com/freeagent-build/freeagent/controller/serve"
	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/controller/webhooks"
)

func TestMain(m *testing.M) { os.Exit(s3test.Main(s3test.Run(func() int { return pgtest.Main(m) }))) }

// env is a real controller (controllertest: the composition root) on a
// fresh database, with one key of each role, and the parts tests reach
// into: the store, the file store, the reaper, the install links.
type env struct {
	t       *testing.T
	c       *controllertest.Controller
	dsn     string
	dataDir string
	URL     string
	store   *store.Store
	blobs   *blobs.Store
	reaper  *reaper.Reaper
	links   *install.Signer
	hooks   *webhooks.Dispatcher
	metrics *metrics.Metrics
	key     []byte // the certificate key
	cfg     store.Config
	limits  httpapi.Limits
	minFree blobs.Floor // serve.Config.MinFreeDisk, applied by restart

	admin, developer, worker  *api.Client
	adminKey, devKey, workKey string
}

type envOption func(*store.Config, *httpapi.Limits)

// byHand leaves webhook delivery and event sealing to the tests: the
// controller delivers no webhooks (the webhook tests run dispatchers by
// hand, as replicas they stop mid-attempt, run none of while events happen,
// or run two of at once) and seals events only as it starts (the tests
// seal with e.seal or e.runSealer, and see events unsealed before that).
var byHand = controllertest.Configure(func(c *serve.Config) { c.NoWebhookDelivery, c.SealInterval = true, time.Hour })

// noRateLimits turns the request budgets off, for tests that drive many
// workers through one key or fail authentication on purpose, hundreds of
// times a second.
func noRateLimits(_ *store.Config, l *httpapi.Limits) {
	l.RatePerKey, l.RatePerWorker, l.AuthFailuresPerIP = httpapi.Off, httpapi.Off, httpapi.Off
}

func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	return newEnvOn(t, nil, opts...)
}

// newEnvOn is newEnv with the files in bucket (nil: in a directory).
func newEnvOn(t *testing.T, bucket *s3test.Bucket, opts ...envOption) *env {
	t.Helper()
	e := &env{t: t, cfg: store.DefaultConfig(), limits: httpapi.DefaultLimits()}
	e.limits.PollBackstop, e.limits.PollRecheck = 200*time.Millisecond, 200*time.Millisecond
	for _, o := range opts {
		o(&e.cfg, &e.limits)
	}
	start := []controllertest.Option{controllertest.Configure(func(c *serve.Config) { c.Store, c.Limits = e.cfg, e.limits }), byHand}
	if bucket != nil {
		start = append(start, controllertest.S3(*bucket, ""))
	}
	e.c = controllertest.Start(t, start...)
	e.dsn, e.dataDir = e.c.DSN, e.c.DataDir
	e.adminKey, e.admin = e.c.AdminKey, e.c.Admin
	e.devKey, e.developer = e.c.DeveloperKey, e.c.Developer
	e.workKey, e.worker = e.c.WorkerKey, e.c.Worker
	key, err := blobs.LoadOrCreateKey(filepath.Join(e.dataDir, "certs.key"))
	if err != nil {
		t.Fatal(err)
	}
	e.key = key
	e.adopt()
	return e
}

// adopt takes the running controller's parts.
func (e *env) adopt() {
	s := e.c.Serve
	e.URL, e.store, e.blobs, e.reaper, e.links, e.hooks, e.metrics = e.c.URL, s.Store(), s.Blobs(), s.Reaper(), s.Links(), s.Webhooks(), s.Metrics()
}

// replica starts another controller process on e's database and data
// directory, its limits tuned; it has keys of its own.
func (e *env) replica(tune func(*httpapi.Limits)) *env {
	e.t.Helper()
	r := &env{t: e.t, cfg: e.cfg, limits: e.limits, key: e.key}
	tune(&r.limits)
	r.c = controllertest.Start(e.t, controllertest.Database(e.dsn),
		controllertest.Configure(func(c *serve.Config) {
			c.DataDir, c.Store, c.Limits, c.NoWebhookDelivery = e.dataDir, r.cfg, r.limits, true
		}))
	r.dsn, r.dataDir = e.dsn, e.dataDir
	r.adminKey, r.admin = r.c.AdminKey, r.c.Admin
	r.devKey, r.developer = r.c.DeveloperKey, r.c.Developer
	r.workKey, r.worker = r.c.WorkerKey, r.c.Worker
	r.adopt()
	return r
}

// restart simulates a controller restart: a new process on the same
// database and files (with e.minFree as its free-space floor).
func (e *env) restart() {
	e.c.Restart(controllertest.Configure(func(c *serve.Config) { c.MinFreeDisk = e.minFree }))
	e.adopt()
}

// loopbackAllowed lets deliveries reach the tests' receivers on 127.0.0.1,
// as an admin's --webhook-allow 127.0.0.0/8 would.
var loopbackAllowed = controllertest.Loopback

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

func testLogger(t *testing.T) *logrus.Logger { return controllertest.TestLogger(t) }

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (e *env) submit(platform string) (api.SubmitResponse, []byte) {
	e.t.Helper()
	src := controllertest.Project(e.t, map[string]string{"package.json": `{"name":"app"}`, "app.json": `{"expo":{}}`})
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

// listedWorker is worker id as GET /api/workers shows it.
func (e *env) listedWorker(id string) api.Worker {
	e.t.Helper()
	list, err := e.admin.ListWorkers(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	for _, wk := range list.Workers {
		if wk.ID == id {
			return wk
		}
	}
	e.t.Fatalf("worker %s not listed", id)
	return api.Worker{}
}

func (e *env) build(id string) api.Build {
	e.t.Helper()
	b, err := e.admin.GetBuild(context.Background(), id)
	if err != nil {
		e.t.Fatalf("get build %s: %v", id, err)
	}
	return b
}
