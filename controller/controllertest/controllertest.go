// Package controllertest starts a real controller for tests: the
// composition root (serve.Start) on its own pgtest database, a file store in
// a temporary directory and real HTTP on 127.0.0.1, with one API key of
// each role. Every test that needs a controller starts it here, so each runs
// what the binary runs.
//
// A test binary using it runs pgtest.Main from its TestMain.
package controllertest

import (
	"bytes"
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs/s3blobs/s3test"
	"github.com/freeagent-build/freeagent/controller/gc"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/pgtest"
	"github.com/freeagent-build/freeagent/controller/serve"
	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/controller/webhooks"
)

// Controller is a running controller and what tests reach it with.
type Controller struct {
	URL     string // http(s)://127.0.0.1:port
	DSN     string // its database
	DataDir string // its data directory (files, keys)
	// Store is the controller's own database handle; a Restart replaces it.
	Store *store.Store
	// Serve is the running composition root (its Reaper, Blobs, Links, Webhooks).
	Serve *serve.Controller

	// One key of each role, made at start, and clients sending them.
	AdminKey, DeveloperKey, WorkerKey string
	Admin, Developer, Worker          *api.Client

	t    testing.TB
	cfg  serve.Config
	log  logrus.FieldLogger
	mu   sync.Mutex
	stop func() error // shuts the running controller down, once
}

// Option changes what Start starts.
type Option func(*options)

type options struct {
	cfg serve.Config
	log logrus.FieldLogger
}

// Limits tunes the request limits (from the test defaults: the production
// limits with a 200 ms poll backstop).
func Limits(f func(*httpapi.Limits)) Option { return func(o *options) { f(&o.cfg.Limits) } }

// StoreConfig tunes the lifecycle timings (from store.DefaultConfig).
func StoreConfig(f func(*store.Config)) Option { return func(o *options) { f(&o.cfg.Store) } }

// Configure changes anything else of the serve.Config Start uses (TLS,
// install links, the reaper's interval, the webhooks' timings, …).
func Configure(f func(*serve.Config)) Option { return func(o *options) { f(&o.cfg) } }

// NoRateLimits turns the request budgets off, for tests that drive many
// workers through one key or fail authentication on purpose, hundreds of
// times a second.
func NoRateLimits() Option {
	return Limits(func(l *httpapi.Limits) {
		l.RatePerKey, l.RatePerWorker, l.AuthFailuresPerIP = httpapi.Off, httpapi.Off, httpapi.Off
	})
}

// Database runs the controller on dsn (another replica's database, say)
// instead of a fresh pgtest database.
func Database(dsn string) Option { return func(o *options) { o.cfg.DatabaseURL = dsn } }

// S3 keeps the files in bucket under prefix (may be "") instead of under
// the data directory (direct transfers on). The credentials go in the configuration, not the
// environment, so the test may be parallel. The test binary's TestMain runs
// s3test.Main.
func S3(bucket s3test.Bucket, prefix string) Option {
	return func(o *options) { o.cfg.BlobStore, o.cfg.S3Credentials = bucket.URL(prefix), bucket.Credentials() }
}

// Logger sends the controller's log to log instead of the test's log
// (warnings and errors only).
func Logger(log logrus.FieldLogger) Option { return func(o *options) { o.log = log } }

// Loopback lets webhook deliveries reach receivers on 127.0.0.1, as an
// admin's --webhook-allow 127.0.0.0/8 would.
var Loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// Start starts a controller for t and stops it when t ends (waiting for
// every loop it started). The test defaults differ from production only
// where a test would otherwise wait, or race a loop of the controller's:
// the reaper sweeps once as the controller starts and then hourly (sweep
// with Serve.Reaper().Sweep, and every terminal result kicks it), the
// garbage collector runs hourly (collect with gc.Collector.Collect), long polls
// re-check every 200 ms, API keys and ended-build counts are never cached,
// and webhooks are tried every 50 ms (2 s timeout, backoff from 200 ms) and
// may reach loopback receivers.
func Start(t testing.TB, opts ...Option) *Controller {
	t.Helper()
	o := options{cfg: serve.Config{
		Listen:         "127.0.0.1:0",
		DataDir:        t.TempDir(),
		ReaperInterval: time.Hour,
		GC:             gc.Config{Interval: time.Hour},
		KeyCacheTTL:    time.Nanosecond,
		MetricsRefresh: time.Nanosecond,
		Store:          store.DefaultConfig(),
		Limits:         httpapi.DefaultLimits(),
		Webhooks: webhooks.Config{Interval: 50 * time.Millisecond, Timeout: 2 * time.Second,
			BackoffBase: 200 * time.Millisecond, Allow: Loopback},
	}}
	o.cfg.Limits.PollBackstop, o.cfg.Limits.PollRecheck = 200*time.Millisecond, 200*time.Millisecond
	for _, opt := range opts {
		opt(&o)
	}
	if o.cfg.DatabaseURL == "" {
		o.cfg.DatabaseURL = pgtest.NewDatabase(t)
	}
	if o.log == nil {
		o.log = TestLogger(t)
	}
	c := &Controller{t: t, cfg: o.cfg, log: o.log, DSN: o.cfg.DatabaseURL, DataDir: o.cfg.DataDir}
	c.start()
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("controller shutdown: %v", err)
		}
	})
	c.AdminKey, c.Admin = c.Key("admin", api.RoleAdmin)
	c.DeveloperKey, c.Developer = c.Key("developer", api.RoleDeveloper)
	c.WorkerKey, c.Worker = c.Key("worker", api.RoleWorker)
	return c
}

func (c *Controller) start() {
	c.t.Helper()
	ctl, err := serve.Start(context.Background(), c.cfg, c.log)
	if err != nil {
		c.t.Fatalf("start the controller: %v", err)
	}
	var once sync.Once
	var stopErr error
	c.mu.Lock()
	c.Serve, c.Store, c.URL = ctl, ctl.Store(), ctl.URL
	c.stop = func() error {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			stopErr = ctl.Shutdown(ctx)
		})
		return stopErr
	}
	c.mu.Unlock()
	for _, cl := range []*api.Client{c.Admin, c.Developer, c.Worker} {
		if cl != nil {
			cl.BaseURL = c.URL
		}
	}
}

// Stop shuts the controller down: long polls answer, requests in flight
// finish, the loops stop and are waited for. Calling it again does nothing.
func (c *Controller) Stop() error {
	c.mu.Lock()
	stop := c.stop
	c.mu.Unlock()
	return stop()
}

// Restart stops the controller and starts a new one on the same database
// and data directory, as a restarted process would, with opts applied on
// top of the configuration it ran with; the URL may change (the clients
// follow it).
func (c *Controller) Restart(opts ...Option) {
	c.t.Helper()
	if err := c.Stop(); err != nil {
		c.t.Fatalf("stop the controller: %v", err)
	}
	o := options{cfg: c.cfg, log: c.log}
	for _, opt := range opts {
		opt(&o)
	}
	c.cfg, c.log = o.cfg, o.log
	c.start()
}

// Key makes an API key with role and returns it and a client sending it.
func (c *Controller) Key(name, role string) (string, *api.Client) {
	c.t.Helper()
	_, secret, err := c.Store.CreateKey(context.Background(), name, role)
	if err != nil {
		c.t.Fatalf("create %s key %q: %v", role, name, err)
	}
	return secret, &api.Client{BaseURL: c.URL, APIKey: secret}
}

// ProjectKey makes a developer key bound to project. Once any key is bound
// to a project, unbound developer keys (Developer) see no project.
func (c *Controller) ProjectKey(name, project string) (string, *api.Client) {
	c.t.Helper()
	k, secret, err := c.Store.CreateKey(context.Background(), name, api.RoleDeveloper)
	if err == nil {
		err = c.Store.BindKey(context.Background(), k.ID, []string{project}, nil)
	}
	if err != nil {
		c.t.Fatalf("create a developer key for project %q: %v", project, err)
	}
	return secret, &api.Client{BaseURL: c.URL, APIKey: secret}
}

// TestLogger logs warnings and errors to t's log.
func TestLogger(t testing.TB) *logrus.Logger {
	log := logrus.New()
	log.SetOutput(testWriter{t})
	log.SetLevel(logrus.WarnLevel)
	return log
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}
