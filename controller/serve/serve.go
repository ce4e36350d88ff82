// Package serve assembles a running controller from its configuration: the
// database (an external one, or a private cluster under the data directory),
// migrations, the file store, the change listener, the reaper and the HTTP
// server.
package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/install"
	"github.com/freeagent-build/freeagent/controller/metrics"
	"github.com/freeagent-build/freeagent/controller/notify"
	"github.com/freeagent-build/freeagent/controller/pgcluster"
	"github.com/freeagent-build/freeagent/controller/reaper"
	"github.com/freeagent-build/freeagent/controller/server"
	"github.com/freeagent-build/freeagent/controller/store"
)

// Config is everything `serve` can be told.
type Config struct {
	Listen         string // host:port; port 0 picks a free one
	DataDir        string // files, the certificate key, and the private database when DatabaseURL is empty
	DatabaseURL    string // external Postgres; empty → a private cluster under DataDir/postgres
	CertsKey       string // hex AES-256 key sealing certificates; empty → DataDir/certs.key (created once)
	ReaperInterval time.Duration
	MetricsPublic  bool          // serve /metrics without an admin key
	PublicURL      string        // the URL phones reach the controller at, for install links; empty → each request's host
	LinkKey        string        // hex key signing install links; empty → DataDir/links.key (created once)
	LinkTTL        time.Duration // install link lifetime; 0 → 7 days
	Store          store.Config
	Limits         server.Limits
}

// Controller is a running controller.
type Controller struct {
	URL string // http://host:port it listens on

	log      logrus.FieldLogger
	http     *http.Server
	api      *server.Server
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	store    *store.Store
	cluster  *pgcluster.Cluster
	serveErr chan error
}

// OpenDatabase returns a DSN for cfg: DatabaseURL, or the private cluster
// under DataDir, started (and created on first use). The cluster is nil when
// an external database is used; the caller stops it.
func OpenDatabase(ctx context.Context, cfg Config, log logrus.FieldLogger) (string, *pgcluster.Cluster, error) {
	if cfg.DatabaseURL != "" {
		return cfg.DatabaseURL, nil, nil
	}
	if cfg.DataDir == "" {
		return "", nil, errors.New("no database: set DATABASE_URL, or a data directory (--data-dir) for the built-in one")
	}
	// Traversable but not listable: as root the private cluster runs as the
	// postgres user, who must reach DataDir/postgres; everything else under
	// the data directory keeps its own 0700/0600 modes.
	if err := os.MkdirAll(cfg.DataDir, 0o711); err != nil {
		return "", nil, fmt.Errorf("create data directory: %w", err)
	}
	dir := filepath.Join(cfg.DataDir, "postgres")
	if dsn, ok := pgcluster.Attach(dir, pgcluster.DefaultDatabase); ok {
		return dsn, nil, nil // a controller already runs it: share it
	}
	log.WithField("dir", dir).Info("starting the built-in PostgreSQL (set DATABASE_URL to use your own server)")
	c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Durable: true})
	if err != nil {
		return "", nil, err
	}
	return c.DSN(pgcluster.DefaultDatabase), c, nil
}

// Start brings a controller up and returns once it accepts requests.
func Start(ctx context.Context, cfg Config, log logrus.FieldLogger) (_ *Controller, err error) {
	c := &Controller{log: log, serveErr: make(chan error, 1)}
	defer func() {
		if err != nil {
			c.closeResources()
		}
	}()
	if cfg.DataDir == "" {
		return nil, errors.New("a data directory is required (--data-dir or FREEAGENT_DATA_DIR)")
	}
	dsn, cluster, err := OpenDatabase(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	c.cluster = cluster
	if c.store, err = store.Open(ctx, dsn, cfg.Store); err != nil {
		return nil, err
	}
	applied, err := c.store.Migrate(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range applied {
		log.WithField("migration", m).Info("applied database migration")
	}
	key, err := certsKey(cfg)
	if err != nil {
		return nil, err
	}
	files, err := blobs.Open(filepath.Join(cfg.DataDir, "files"), key)
	if err != nil {
		return nil, err
	}
	links, err := linkSigner(cfg)
	if err != nil {
		return nil, err
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w (is another controller running? choose another with --listen)", cfg.Listen, err)
	}
	c.URL = "http://" + ln.Addr().String()

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	hub := notify.New(dsn, log.WithField("component", "notify"))
	m := metrics.New(c.store)
	rp := reaper.New(c.store, files, cfg.ReaperInterval, log.WithField("component", "reaper"))
	rp.OnSweep = m.Sweep
	c.goRun(func() { hub.Run(runCtx) }) //nolint:errcheck // Run returns only when runCtx ends
	c.goRun(func() { rp.Run(runCtx) })
	select {
	case <-hub.Ready():
	case <-time.After(10 * time.Second):
		ln.Close()
		return nil, errors.New("could not LISTEN for changes on the database within 10 s")
	}

	c.api = server.New(server.Options{Store: c.store, Blobs: files, Hub: hub, Limits: cfg.Limits,
		Log: log.WithField("component", "http"), BuildEnded: rp.Kick, Metrics: m, MetricsPublic: cfg.MetricsPublic,
		Links: links, PublicURL: cfg.PublicURL})
	c.http = &http.Server{
		Handler:           c.api,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	go func() { c.serveErr <- c.http.Serve(ln) }()
	return c, nil
}

func (c *Controller) goRun(f func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// Done reports a fatal HTTP server error.
func (c *Controller) Done() <-chan error { return c.serveErr }

// Shutdown stops accepting requests, answers long polls at once, waits for
// requests in flight (uploads; up to ctx), then stops the background loops
// and the database.
func (c *Controller) Shutdown(ctx context.Context) error {
	var err error
	if c.http != nil {
		c.api.Drain()
		err = c.http.Shutdown(ctx)
	}
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
	c.closeResources()
	return err
}

func (c *Controller) closeResources() {
	if c.cancel != nil {
		c.cancel()
	}
	if c.store != nil {
		c.store.Close()
	}
	if c.cluster != nil {
		if err := c.cluster.Stop(); err != nil {
			c.log.WithError(err).Warn("stopping the built-in PostgreSQL")
		}
	}
}

func certsKey(cfg Config) ([]byte, error) {
	if cfg.CertsKey != "" {
		key, err := blobs.ParseKey(cfg.CertsKey)
		if err != nil {
			return nil, fmt.Errorf("certificate key (FREEAGENT_CERTS_KEY): %w", err)
		}
		return key, nil
	}
	return blobs.LoadOrCreateKey(filepath.Join(cfg.DataDir, "certs.key"))
}

// linkSigner signs install links with the configured key, else one kept in
// the data directory. Replicas behind one URL must share the key (set
// FREEAGENT_LINK_KEY on each), or a link works only on the replica that made it.
func linkSigner(cfg Config) (*install.Signer, error) {
	var key []byte
	var err error
	if cfg.LinkKey != "" {
		if key, err = blobs.ParseKey(cfg.LinkKey); err != nil {
			return nil, fmt.Errorf("install link key (FREEAGENT_LINK_KEY): %w", err)
		}
	} else if key, err = blobs.LoadOrCreateKey(filepath.Join(cfg.DataDir, "links.key")); err != nil {
		return nil, err
	}
	return install.NewSigner(key, cfg.LinkTTL)
}
