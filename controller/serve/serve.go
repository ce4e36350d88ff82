// Package serve assembles a running controller from its configuration: the
// database (an external one, or a private cluster under the data directory),
// migrations, the file store, the change listener, the reaper and the HTTP
// server, on which it mounts the API and, beside it, the dashboard.
package serve

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/blobs/s3blobs"
	"github.com/freeagent-build/freeagent/controller/dashboard"
	"github.com/freeagent-build/freeagent/controller/gc"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/install"
	"github.com/freeagent-build/freeagent/controller/metrics"
	"github.com/freeagent-build/freeagent/controller/notify"
	"github.com/freeagent-build/freeagent/controller/pgcluster"
	"github.com/freeagent-build/freeagent/controller/reaper"
	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/controller/submit"
	"github.com/freeagent-build/freeagent/controller/webhooks"
	"github.com/freeagent-build/freeagent/internal/config"
	"github.com/freeagent-build/freeagent/internal/datadirlock"
)

// Config is everything `serve` can be told. Every zero field takes its
// default (withDefaults), so a zero Config plus a data directory (and a
// database, or the built-in one) runs a production controller: no caller
// starts one with 0 s leases or 0-byte limits. A setting that can be off
// says how (httpapi.Off, store.Off).
type Config struct {
	Listen string // host:port; port 0 picks a free one; zero: 127.0.0.1:8080
	// Listener, when set, is served instead of listening on Listen (solo
	// mode: loopback and the VM bridge, bound once it exists); the
	// controller closes it.
	Listener net.Listener
	// AllowClients, when set, are the only addresses whose connections are
	// served: any other connection is closed as it is accepted, before a
	// byte is read (solo mode: this Mac and its VMs).
	AllowClients []netip.Prefix
	// TLSCert and TLSKey are PEM files (the certificate chain, leaf first,
	// and its private key): when both are set the controller serves HTTPS
	// only. Read once at start; restart after renewing them.
	TLSCert, TLSKey string
	DataDir         string // files, the certificate key, and the private database when DatabaseURL is empty
	DatabaseURL     string // external Postgres; empty → a private cluster under DataDir/postgres
	CertsKey        string // hex AES-256 key sealing certificates; empty → DataDir/certs.key (created once)
	// BlobStore is where build files live: file://DIR, or
	// s3://BUCKET/PREFIX?endpoint=URL&region=R (credentials from the
	// standard AWS variables or shared files); empty → file://DataDir/files.
	BlobStore string
	// S3Credentials sign an S3 blob store's requests; nil takes them from
	// the standard AWS variables and shared files.
	S3Credentials  *credentials.Credentials
	ReaperInterval time.Duration // how often the reaper sweeps; zero: reaper.DefaultInterval (5 s)
	MetricsPublic  bool          // serve /metrics without an admin key
	// MetricsRefresh is how often the ended-builds counts behind /metrics
	// are recounted; zero: metrics.FinishedRefresh.
	MetricsRefresh time.Duration
	PublicURL      string        // the URL phones reach the controller at, for install links; empty → each request's host
	LinkKey        string        // hex key signing install links; empty → DataDir/links.key (created once)
	LinkTTL        time.Duration // install link lifetime; zero: install.DefaultTTL (7 days)
	// Store is the lifecycle's timings; zero fields take store.DefaultConfig's
	// (store.Config.WithDefaults; zero retention keeps files forever).
	Store store.Config
	// Limits bound requests; zero fields take httpapi.DefaultLimits'.
	Limits httpapi.Limits
	// TrustedProxies are the reverse proxies in front of the controller
	// (--trusted-proxies): a request from one is charged to the client its
	// X-Forwarded-For names (httpapi.Options.TrustedProxies).
	TrustedProxies []netip.Prefix
	// KeyCacheTTL is how long a verified API key is trusted without a
	// query (a revoked key works that much longer); zero: 5 s.
	KeyCacheTTL time.Duration
	Webhooks    webhooks.Config // zero fields take webhooks.DefaultConfig's
	// NoWebhookDelivery makes this replica serve the webhook API but
	// deliver nothing: the other replicas deliver (say, when this one
	// cannot reach the receivers). Tests that run dispatchers by hand set it.
	NoWebhookDelivery bool
	// GC runs the garbage collector (zero fields take gc.DefaultConfig's);
	// what it keeps, and for how long, is Store's RetainArtifacts,
	// RetainSources and RetainLogs.
	GC gc.Config
	// MinFreeDisk is the file store's free-space floor: below it submits
	// answer 507. The zero Floor turns it off; the S3 store has none.
	MinFreeDisk blobs.Floor

	// Name and AdvertiseURL describe this replica in the controller
	// registry; defaults: the host name and the URL it listens on.
	Name         string
	AdvertiseURL string
	// ControllerTTL is how long a replica's registration lasts unrefreshed
	// (zero: 5 min); it is refreshed every 2/5 of that and stale replicas
	// are expired every 1/5.
	ControllerTTL time.Duration
	// SealInterval is how often final audit events are sealed into the
	// hash chain (zero: reaper.DefaultSealInterval, 200 ms).
	SealInterval time.Duration
	// Submit runs submissions to the stores (zero fields take
	// submit.DefaultConfig's; tests point Play at the stand-in).
	Submit submit.Config
}

// withDefaults is cfg with its zero fields filled. Limits, KeyCacheTTL,
// Webhooks and GC are filled by the packages that read them (httpapi.New,
// webhooks.New, gc.New), each from its one DefaultConfig or DefaultLimits.
func (cfg Config) withDefaults() Config {
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:8080"
	}
	if cfg.Name == "" {
		cfg.Name, _ = os.Hostname()
	}
	cfg.ControllerTTL = config.OrDefault(cfg.ControllerTTL, 5*time.Minute)
	cfg.SealInterval = config.OrDefault(cfg.SealInterval, reaper.DefaultSealInterval)
	cfg.ReaperInterval = config.OrDefault(cfg.ReaperInterval, reaper.DefaultInterval)
	cfg.LinkTTL = config.OrDefault(cfg.LinkTTL, install.DefaultTTL)
	cfg.Store = cfg.Store.WithDefaults()
	return cfg
}

// Controller is a running controller.
type Controller struct {
	URL string // http(s)://host:port it listens on
	ID  string // this replica's id in the controller registry

	log         logrus.FieldLogger
	http        *http.Server
	api         *httpapi.Server
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	store       *store.Store
	files       *blobs.Store
	reaper      *reaper.Reaper
	links       *install.Signer
	hooks       *webhooks.Dispatcher
	submissions *submit.Runner
	metrics     *metrics.Metrics
	cluster     *pgcluster.Cluster
	dirLock     *datadirlock.Lock // held while the built-in database is ours
	serveErr    chan error
	registered  bool
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
	cfg = cfg.withDefaults()
	c := &Controller{ID: store.NewID(), log: log, serveErr: make(chan error, 1)}
	cfg.Store.ControllerID = c.ID
	defer func() {
		if err != nil {
			c.closeResources()
		}
	}()
	if cfg.DataDir == "" {
		return nil, errors.New("a data directory is required (--data-dir or FREEAGENT_DATA_DIR)")
	}
	tlsConfig, err := loadTLS(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.DatabaseURL == "" {
		// One controller per built-in database: a second start is refused
		// with the first one's pid and URL, rather than attaching to its
		// database and serving beside it.
		if err := os.MkdirAll(cfg.DataDir, 0o711); err != nil {
			return nil, fmt.Errorf("create data directory: %w", err)
		}
		if c.dirLock, err = lockDataDir(cfg.DataDir); err != nil {
			return nil, err
		}
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
	backend, err := OpenBlobStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	files, err := blobs.New(backend, key)
	if err != nil {
		return nil, err
	}
	if err := files.CheckSealKey(ctx); errors.Is(err, blobs.ErrKeyMismatch) {
		return nil, fmt.Errorf("%w: give every controller sharing the blob store (--blob-store) and the database the same FREEAGENT_CERTS_KEY (without it, each uses its own DATA_DIR/certs.key)", err)
	} else if err != nil {
		return nil, fmt.Errorf("blob store (--blob-store): %w", err)
	}
	links, err := linkSigner(cfg)
	if err != nil {
		return nil, err
	}
	c.files, c.links = files, links
	m := metrics.New(c.store, cfg.MetricsRefresh)
	c.metrics = m
	hooks, err := webhooks.New(c.store, key, cfg.Webhooks, m, log.WithField("component", "webhooks"))
	if err != nil {
		return nil, err
	}
	c.hooks = hooks
	runner, err := submit.New(c.store, files, cfg.Submit, c.ID, log.WithField("component", "submit"))
	if err != nil {
		return nil, err
	}
	c.submissions = runner

	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return nil, fmt.Errorf("listen on %s: %w (is another controller running? choose another with --listen)", cfg.Listen, err)
		}
	}
	if len(cfg.AllowClients) > 0 {
		ln = AllowOnly(ln, cfg.AllowClients, log)
	}
	c.URL = "http://" + ln.Addr().String()
	if tlsConfig != nil {
		c.URL = "https://" + ln.Addr().String()
	}
	if c.dirLock != nil {
		if err := c.dirLock.Note(c.URL); err != nil {
			ln.Close()
			return nil, err
		}
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	hub := notify.New(dsn, log.WithField("component", "notify"))
	rp := reaper.New(c.store, files, cfg.ReaperInterval, log.WithField("component", "reaper"))
	rp.OnSweep = m.Sweep
	c.reaper = rp
	// Builds whose lease ran out while no replica was running are requeued
	// before this one serves; then every ReaperInterval. Likewise the audit
	// events left unsealed are sealed, then every SealInterval.
	rp.Sweep(runCtx)
	rp.Seal(runCtx)
	c.goRun(func() { hub.Run(runCtx) }) //nolint:errcheck // Run returns only when runCtx ends
	c.goRun(func() { rp.Run(runCtx) })
	c.goRun(func() { rp.RunSealer(runCtx, cfg.SealInterval) })
	collector := gc.New(c.store, files, cfg.GC, log.WithField("component", "gc"))
	collector.OnRun = m.GC
	c.goRun(func() { collector.Run(runCtx) })
	c.goRun(func() { runner.Run(runCtx) })
	if !cfg.NoWebhookDelivery {
		c.goRun(func() { hooks.Run(runCtx) })
		c.goRun(func() { kickOnSealedEvents(runCtx, hub, hooks) })
	}
	select {
	case <-hub.Ready():
	case <-time.After(10 * time.Second):
		ln.Close()
		return nil, errors.New("could not LISTEN for changes on the database within 10 s")
	}

	c.api = httpapi.New(httpapi.Options{Store: c.store, Blobs: files, Hub: hub, Limits: cfg.Limits,
		Log: log.WithField("component", "http"), BuildEnded: rp.Kick, Metrics: m, MetricsPublic: cfg.MetricsPublic,
		Links: links, PublicURL: cfg.PublicURL, Webhooks: hooks, Submissions: runner, MinFreeDisk: cfg.MinFreeDisk, KeyCacheTTL: cfg.KeyCacheTTL,
		TrustedProxies: cfg.TrustedProxies})
	// The dashboard serves every path outside the API, behind the API's
	// logging, recovery, rate limits and body guard; what it does with
	// builds' files and streams is the API server's.
	c.api.Mount(dashboard.New(dashboard.Options{Store: c.store, Hub: hub, Log: log.WithField("component", "dashboard"),
		FollowLogs: c.api.FollowLogs, ServeArtifact: c.api.ServeArtifact, Retry: c.api.RetryBuild,
		BuildEnded: c.api.BuildEnded, AuthFailed: c.api.AuthFailed, ServeQR: c.api.ServeQR, Webhooks: hooks, Done: c.api.Done()}))
	c.http = &http.Server{
		Handler:           c.api,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	node := api.Controller{ID: c.ID, Name: cfg.Name, URL: cmp.Or(cfg.AdvertiseURL, c.URL), Version: version()}
	if err := c.store.RegisterController(ctx, node, cfg.ControllerTTL); err != nil {
		ln.Close()
		return nil, err
	}
	c.registered = true
	c.goRun(func() { c.runRegistry(runCtx, node, cfg.ControllerTTL) })
	if tlsConfig != nil {
		c.http.TLSConfig = tlsConfig
		go func() { c.serveErr <- c.http.ServeTLS(ln, "", "") }()
	} else {
		go func() { c.serveErr <- c.http.Serve(ln) }()
	}
	return c, nil
}

// loadTLS reads --tls-cert and --tls-key; nil when neither is set.
func loadTLS(cfg Config) (*tls.Config, error) {
	if cfg.TLSCert == "" && cfg.TLSKey == "" {
		return nil, nil
	}
	if cfg.TLSCert == "" || cfg.TLSKey == "" {
		return nil, errors.New("--tls-cert and --tls-key go together: give both (PEM files) to serve HTTPS, or neither")
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s / --tls-key %s: %w (want PEM files: the certificate chain, leaf first, and its unencrypted private key)", cfg.TLSCert, cfg.TLSKey, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// kickOnSealedEvents starts a webhook pass as soon as any replica's sealer
// has sealed new events, instead of at the dispatcher's next tick.
func kickOnSealedEvents(ctx context.Context, hub *notify.Hub, hooks *webhooks.Dispatcher) {
	w := hub.Watch(func(c store.Change) bool { return c.Kind == "events" })
	defer w.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.C:
			hooks.Kick()
		}
	}
}

// runRegistry keeps this replica registered and expires replicas that
// stopped refreshing (any replica may; each expiry happens once).
func (c *Controller) runRegistry(ctx context.Context, node api.Controller, ttl time.Duration) {
	refresh := time.NewTicker(ttl * 2 / 5)
	defer refresh.Stop()
	expire := time.NewTicker(ttl / 5)
	defer expire.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-refresh.C:
			ok, err := c.store.RefreshController(ctx, node.ID, ttl)
			if err == nil && !ok {
				c.log.Warn("this controller's registration had expired; registering again")
				err = c.store.RegisterController(ctx, node, ttl)
			}
			if err != nil && ctx.Err() == nil {
				c.log.WithError(err).Warn("refreshing the controller registration failed; will retry")
			}
		case <-expire.C:
			ids, err := c.store.ExpireControllers(ctx)
			if err != nil && ctx.Err() == nil {
				c.log.WithError(err).Warn("expiring stale controllers failed; will retry")
			}
			for _, id := range ids {
				c.log.WithField("controller", id).Info("expired a controller that stopped refreshing its registration")
			}
		}
	}
}

// version is the VCS revision the binary was built from, or "dev".
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return s.Value[:12]
		}
	}
	return "dev"
}

func (c *Controller) goRun(f func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// Store is the controller's database, for callers that run it in-process
// and manage keys themselves (the Mac app's solo mode).
func (c *Controller) Store() *store.Store { return c.store }

// Blobs is the controller's file store (for tests that inspect or break it).
func (c *Controller) Blobs() *blobs.Store { return c.files }

// Reaper is the controller's reaper: a test sweeps at once with
// Reaper().Sweep instead of waiting for ReaperInterval.
func (c *Controller) Reaper() *reaper.Reaper { return c.reaper }

// Links signs the controller's install links.
func (c *Controller) Links() *install.Signer { return c.links }

// Submissions is the controller's runner of submissions to the stores.
func (c *Controller) Submissions() *submit.Runner { return c.submissions }

// Webhooks is the controller's webhook dispatcher.
func (c *Controller) Webhooks() *webhooks.Dispatcher { return c.hooks }

// Metrics is what the controller serves on /metrics.
func (c *Controller) Metrics() *metrics.Metrics { return c.metrics }

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
	if c.registered {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if derr := c.store.DeregisterController(dctx, c.ID); derr != nil {
			c.log.WithError(derr).Warn("removing this controller from the registry failed; it expires on its own")
		}
		cancel()
	}
	c.closeResources()
	return err
}

// closeResources stops the background loops and waits for them before it
// closes what they use: on New's failure path too, where a loop started
// before the failure may still be in a query.
func (c *Controller) closeResources() {
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
	if c.store != nil {
		c.store.Close()
	}
	if c.cluster != nil {
		if err := c.cluster.Stop(); err != nil {
			c.log.WithError(err).Warn("stopping the built-in PostgreSQL")
		}
	}
	c.dirLock.Release() // last: the database is down before another may start it
}

// OpenBlobStore opens the store cfg.BlobStore names, checking that it can
// be used: an S3 bucket must exist and take the credentials. The error
// names the setting and what to fix.
func OpenBlobStore(ctx context.Context, cfg Config) (blobs.Backend, error) {
	setting := "--blob-store (FREEAGENT_BLOB_STORE)"
	raw := cfg.BlobStore
	if raw == "" {
		return blobs.NewDir(filepath.Join(cfg.DataDir, "files"))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", setting, raw, err)
	}
	switch u.Scheme {
	case "file":
		if (u.Host != "" && u.Host != "localhost") || u.Path == "" || !filepath.IsAbs(filepath.FromSlash(u.Path)) || u.RawQuery != "" {
			return nil, fmt.Errorf("%s %q: want file:///absolute/directory", setting, raw)
		}
		d, err := blobs.NewDir(filepath.FromSlash(u.Path))
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", setting, raw, err)
		}
		return d, nil
	case "s3":
		s3cfg, err := s3blobs.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", setting, raw, err)
		}
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		st, err := s3blobs.Open(ctx, s3cfg, s3blobs.Options{SpoolDir: filepath.Join(cfg.DataDir, "spool"), Credentials: cfg.S3Credentials})
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", setting, s3cfg, err)
		}
		return st, nil
	}
	return nil, fmt.Errorf("%s %q: want file:///DIR or s3://BUCKET/PREFIX?endpoint=URL&region=R", setting, raw)
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
