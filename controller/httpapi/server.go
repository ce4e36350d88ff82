// Package httpapi is the controller's HTTP API: the worker protocol, the
// developers' build endpoints and the VM endpoints of docs/design.md.
package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/install"
	"github.com/freeagent-build/freeagent/controller/metrics"
	"github.com/freeagent-build/freeagent/controller/notify"
	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/controller/submit"
	"github.com/freeagent-build/freeagent/controller/webhooks"
	"github.com/freeagent-build/freeagent/internal/config"
)

// Off, set in a Limits field whose zero takes the default (RatePerKey,
// AuthFailuresPerIP, BodyGrace, ArtifactsPerBuild, DirectUploadsPerAttempt),
// turns that limit off.
const Off = -1

// Limits bound what a client may send. A zero field takes DefaultLimits'
// value (New fills them), so a zero Limits is the production one; the limits
// that can be turned off say so and take Off.
type Limits struct {
	JSONBody    int64 // any JSON request body
	Source      int64 // a submitted project archive
	Certs       int64 // a certificates zip
	Credentials int64 // a submit's credentials file (api.BuildCredentials JSON)
	Artifact    int64 // one artifact
	// ArtifactsPerBuild is the most artifacts one attempt of a build may
	// upload (Off: no limit).
	ArtifactsPerBuild int
	// DirectUploadsPerAttempt is the most direct uploads (signed URLs to
	// the object store) one attempt may open, retries included (Off: no
	// limit).
	DirectUploadsPerAttempt int
	LogChunk                int64 // one log append
	LogTotal                int64 // a build's whole log
	LogRead                 int   // bytes per plain log read
	PollMaxWait             time.Duration
	// A long poll re-checks every PollBackstop even without a wake-up, in
	// case a notification was missed (after a reconnect the hub wakes
	// every waiter anyway); every PollRecheck while its worker cannot take
	// a build (at capacity or paused), which no notification announces.
	PollBackstop time.Duration
	PollRecheck  time.Duration
	// A request body must arrive within BodyGrace plus one second per
	// BodyMinRate bytes (a slow-body guard; BodyGrace Off turns it off).
	BodyGrace   time.Duration
	BodyMinRate int64
	// RatePerWorker requests per second (RateWorkerBurst at once) per
	// worker for the worker protocol, whatever key its fleet shares; a
	// heartbeat or a result for a lease the worker holds is served even
	// over it. RatePerKey requests per second (RateKeyBurst at once) per
	// API key for every other request; AuthFailuresPerIP failed
	// authentications per second (AuthFailureBurst at once) per client
	// address, whose further failures are then answered 429 until its
	// budget refills (valid credentials from it are served). Off turns a
	// limit off.
	RatePerWorker     float64
	RateWorkerBurst   int
	RatePerKey        float64
	RateKeyBurst      int
	AuthFailuresPerIP float64
	AuthFailureBurst  int
}

// DefaultLimits are the production limits.
func DefaultLimits() Limits {
	return Limits{
		JSONBody:          1 << 20,
		Source:            2 << 30,
		Certs:             10 << 20,
		Credentials:       1 << 20,
		Artifact:          8 << 30,
		ArtifactsPerBuild: 32,
		// Two fresh starts for each of the most artifacts an attempt keeps.
		DirectUploadsPerAttempt: 64,
		LogChunk:                1 << 20,
		LogTotal:                64 << 20,
		LogRead:                 4 << 20,
		PollMaxWait:             30 * time.Second,
		// Wake-ups reach a worker that can take the build (a declined one
		// passes on): the backstop is a safety net, and every parked long
		// poll's re-read costs a query per interval (docs/performance.md).
		PollBackstop: 10 * time.Second,
		PollRecheck:  2 * time.Second,
		BodyGrace:    10 * time.Second,
		BodyMinRate:  64 << 10,
		// A worker makes well under one request a second (a long poll
		// per 25 s, a heartbeat per 30 s, a cancel watch per 25 s per
		// build; docs/performance.md): 10 a second is a loop, not a
		// worker. A CLI or a dashboard stays far below a key's 100.
		RatePerWorker:     10,
		RateWorkerBurst:   40, // raised to 4 s worth when RatePerWorker is set
		RatePerKey:        100,
		RateKeyBurst:      400, // raised to 4 s worth when RatePerKey is set
		AuthFailuresPerIP: 1,
		AuthFailureBurst:  20,
	}
}

// withDefaults fills l's zero fields from DefaultLimits and turns the
// limits set to Off (any negative value) into the 0 the handlers read as "no limit".
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	l.JSONBody = config.OrDefault(l.JSONBody, d.JSONBody)
	l.Source = config.OrDefault(l.Source, d.Source)
	l.Certs = config.OrDefault(l.Certs, d.Certs)
	l.Credentials = config.OrDefault(l.Credentials, d.Credentials)
	l.Artifact = config.OrDefault(l.Artifact, d.Artifact)
	l.LogChunk = config.OrDefault(l.LogChunk, d.LogChunk)
	l.LogTotal = config.OrDefault(l.LogTotal, d.LogTotal)
	l.BodyMinRate = config.OrDefault(l.BodyMinRate, d.BodyMinRate)
	l.LogRead = config.OrDefault(l.LogRead, d.LogRead)
	l.PollMaxWait = config.OrDefault(l.PollMaxWait, d.PollMaxWait)
	l.PollBackstop = config.OrDefault(l.PollBackstop, d.PollBackstop)
	l.PollRecheck = config.OrDefault(l.PollRecheck, d.PollRecheck)
	l.RateKeyBurst = config.OrDefault(l.RateKeyBurst, d.RateKeyBurst)
	l.RateWorkerBurst = config.OrDefault(l.RateWorkerBurst, d.RateWorkerBurst)
	l.AuthFailureBurst = config.OrDefault(l.AuthFailureBurst, d.AuthFailureBurst)
	l.ArtifactsPerBuild = config.OrOff(l.ArtifactsPerBuild, d.ArtifactsPerBuild)
	l.DirectUploadsPerAttempt = config.OrOff(l.DirectUploadsPerAttempt, d.DirectUploadsPerAttempt)
	l.BodyGrace = config.OrOff(l.BodyGrace, d.BodyGrace)
	l.RatePerKey = config.OrOff(l.RatePerKey, d.RatePerKey)
	l.RatePerWorker = config.OrOff(l.RatePerWorker, d.RatePerWorker)
	l.AuthFailuresPerIP = config.OrOff(l.AuthFailuresPerIP, d.AuthFailuresPerIP)
	return l
}

// Server serves the API.
type Server struct {
	store  *store.Store
	blobs  *blobs.Store
	hub    *notify.Hub
	limits Limits
	log    logrus.FieldLogger
	kick   func() // Options.BuildEnded
	// metrics may be nil (records nothing); metricsPublic serves /metrics without a key.
	metrics       *metrics.Metrics
	metricsPublic bool
	links         *install.Signer // nil: no install links
	webhooks      *webhooks.Dispatcher
	submissions   *submit.Runner // nil: no submissions to the stores
	publicURL     string
	minFree       blobs.Floor

	keyCache   keyCache
	rates      *rateLimits
	gzips      sync.Pool // *gunzipper, for measureTarGz
	queueDepth depthCache
	mux        *http.ServeMux
	draining   chan struct{} // closed by Drain
	drainOne   sync.Once
}

// Options configure a Server.
type Options struct {
	Store  *store.Store
	Blobs  *blobs.Store
	Hub    *notify.Hub
	Limits Limits
	Log    logrus.FieldLogger
	// BuildEnded is called after a request moved a build to a terminal
	// state (the reaper then deletes its certificates at once). A worker's
	// result calls it only when the build still holds certificates or
	// credentials (store.Completion.SecretsLeft).
	BuildEnded func()
	// Metrics records request, poll and claim figures and serves GET
	// /metrics; nil leaves /metrics answering 404.
	Metrics *metrics.Metrics
	// MetricsPublic serves /metrics without an API key (for a scraper on
	// an internal network); otherwise it needs an admin key, sent as
	// X-API-Key or as "Authorization: Bearer <key>".
	MetricsPublic bool
	// Links signs the install links of completed builds (install page,
	// downloads, iOS manifest, QR code); nil turns them off.
	Links *install.Signer
	// PublicURL is the controller's URL as phones reach it, used in install
	// links and QR codes; empty takes the scheme and host of each request.
	PublicURL string
	// Webhooks serves the /api/webhooks admin API; nil leaves it out.
	Webhooks *webhooks.Dispatcher
	// Submissions runs submissions to the stores; nil refuses them.
	Submissions *submit.Runner
	// KeyCacheTTL is how long a verified API key is trusted without a
	// query; a revoked key stops working within it. Zero: 5 s.
	KeyCacheTTL time.Duration
	// TrustedProxies are the reverse proxies in front of the controller:
	// a request from one is charged to the client address its
	// X-Forwarded-For names (rateLimits.clientAddr). Empty: every request
	// is charged to its connection's peer.
	TrustedProxies []netip.Prefix
	// MinFreeDisk is the file store's free-space floor (--min-free-disk):
	// below it, submits and retries answer 507 Insufficient Storage. The
	// zero Floor, or the S3 store, takes every submit.
	MinFreeDisk blobs.Floor
}

// New builds the API handler. Zero Limits fields take DefaultLimits'.
func New(o Options) *Server {
	o.Limits = o.Limits.withDefaults()
	s := &Server{store: o.Store, blobs: o.Blobs, hub: o.Hub, limits: o.Limits, log: o.Log, kick: o.BuildEnded,
		metrics: o.Metrics, metricsPublic: o.MetricsPublic, links: o.Links, webhooks: o.Webhooks, submissions: o.Submissions, publicURL: strings.TrimRight(o.PublicURL, "/"), minFree: o.MinFreeDisk,
		keyCache: keyCache{ttl: o.KeyCacheTTL, entries: map[string]cachedKey{}}, rates: newRateLimits(o.Limits, o.TrustedProxies), draining: make(chan struct{})}
	s.keyCache.ttl = config.OrDefault(s.keyCache.ttl, 5*time.Second)
	if s.kick == nil {
		s.kick = func() {}
	}
	s.routes()
	return s
}

// Drain makes long polls answer now (with no job) and live log follows end,
// so a graceful shutdown does not wait out a 30-second poll.
func (s *Server) Drain() { s.drainOne.Do(func() { close(s.draining) }) }

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /health", s.health)
	m.HandleFunc("GET /health/ready", s.ready)
	if s.metrics != nil {
		m.Handle("GET /metrics", s.metricsAuth(s.metrics.Handler()))
	}

	m.HandleFunc("POST /api/workers/register", s.workerKey(s.register))
	m.HandleFunc("GET /api/workers/poll", s.worker(s.poll))
	m.HandleFunc("POST /api/workers/heartbeat", s.leaseWorker(s.heartbeat))
	m.HandleFunc("GET /api/workers/builds/{id}/cancel", s.worker(s.watchCancel))
	m.HandleFunc("POST /api/workers/upload", s.leaseWorker(s.upload))
	m.HandleFunc("POST /api/workers/unregister", s.worker(s.unregister))
	m.HandleFunc("PUT /api/workers/pause", s.worker(s.reportPause))
	m.HandleFunc("PUT /api/workers/cache", s.worker(s.workerCache))
	m.HandleFunc("GET /api/workers", s.admin(s.listWorkers))
	m.HandleFunc("POST /api/workers/{id}/pause", s.admin(s.pauseWorker))
	m.HandleFunc("POST /api/workers/{id}/resume", s.admin(s.resumeWorker))
	m.HandleFunc("POST /api/workers/{id}/acknowledge", s.admin(s.acknowledgeWorker))
	m.HandleFunc("GET /api/events", s.admin(s.listEvents))
	m.HandleFunc("GET /api/events/verify", s.admin(s.verifyEvents))
	m.HandleFunc("GET /api/controllers", s.admin(s.listControllers))
	m.HandleFunc("GET /api/pools", s.admin(s.listPools))
	m.HandleFunc("PUT /api/pools/{name}", s.admin(s.setPool))
	m.HandleFunc("DELETE /api/pools/{name}", s.admin(s.deletePool))
	m.HandleFunc("GET /api/projects/{project}/pools", s.admin(s.projectPools))
	m.HandleFunc("PUT /api/projects/{project}/pools", s.admin(s.setProjectPools))

	m.HandleFunc("POST /api/builds", s.developer(s.submit))
	m.HandleFunc("POST /api/builds/uploads", s.developer(s.startSourceUpload))
	m.HandleFunc("POST /api/builds/reuse", s.developer(s.reusableBuild))
	m.HandleFunc("GET /api/builds", s.developer(s.listBuilds))
	m.HandleFunc("GET /api/queue", s.developer(s.queue))
	m.HandleFunc("GET /api/limits", s.developer(s.getLimits))
	m.HandleFunc("GET /api/farm/offers", s.developer(s.farmOffers))
	m.HandleFunc("GET /api/builds/{id}", s.buildReader(s.getBuild))
	m.HandleFunc("POST /api/builds/{id}/cancel", s.buildReader(s.cancel))
	m.HandleFunc("POST /api/builds/{id}/retry", s.buildReader(s.retry))
	m.HandleFunc("GET /api/builds/{id}/logs", s.buildReader(s.readLogs))
	m.HandleFunc("GET /api/builds/{id}/artifacts/{name}", s.buildReader(s.downloadArtifact))

	m.HandleFunc("POST /api/projects/{project}/env", s.developer(s.setVariable))
	m.HandleFunc("GET /api/projects/{project}/env", s.developer(s.listVariables))
	m.HandleFunc("DELETE /api/projects/{project}/env/{name}", s.developer(s.deleteVariable))
	m.HandleFunc("PUT /api/projects/{project}/credentials/{platform}/{name}", s.developer(s.setCredential))
	m.HandleFunc("GET /api/projects/{project}/credentials", s.developer(s.listCredentials))
	m.HandleFunc("DELETE /api/projects/{project}/credentials/{platform}/{name}", s.developer(s.deleteCredential))
	m.HandleFunc("PUT /api/projects/{project}/submit-credentials/{platform}/{name}", s.developer(s.setSubmitCredential))
	m.HandleFunc("GET /api/projects/{project}/submit-credentials", s.developer(s.listSubmitCredentials))
	m.HandleFunc("DELETE /api/projects/{project}/submit-credentials/{platform}/{name}", s.developer(s.deleteSubmitCredential))
	m.HandleFunc("POST /api/submissions", s.developer(s.createSubmission))
	m.HandleFunc("GET /api/submissions/{id}", s.developer(s.getSubmission))
	m.HandleFunc("GET /api/builds/{id}/submissions", s.buildReader(s.buildSubmissions))
	m.HandleFunc("GET /api/projects/{project}/app-versions/{platform}/{application_id}", s.developer(s.getAppVersion))
	m.HandleFunc("PUT /api/projects/{project}/app-versions/{platform}/{application_id}", s.developer(s.setAppVersion))

	if s.links != nil {
		m.HandleFunc("GET /api/builds/{id}/qr.png", s.buildReader(s.qrCode))
		m.HandleFunc("GET /install/{id}", s.installPage)
		m.HandleFunc("GET /install/{id}/manifest.plist", s.installManifest)
		m.HandleFunc("GET /install/{id}/files/{name}", s.installFile)
	}

	if s.webhooks != nil {
		m.HandleFunc("POST /api/webhooks", s.admin(s.createWebhook))
		m.HandleFunc("GET /api/webhooks", s.admin(s.listWebhooks))
		m.HandleFunc("DELETE /api/webhooks/{id}", s.admin(s.deleteWebhook))
		m.HandleFunc("POST /api/webhooks/{id}/ping", s.admin(s.pingWebhook))
		m.HandleFunc("GET /api/webhooks/{id}/deliveries", s.admin(s.webhookDeliveries))
		m.HandleFunc("POST /api/webhooks/{id}/deliveries/{delivery_id}/redeliver", s.admin(s.redeliverWebhook))
	}

	m.HandleFunc("POST /api/vm/auth", s.vmAuth)
	m.HandleFunc("GET /api/builds/{id}/source", s.sourceReader(s.downloadSource))
	m.HandleFunc("GET /api/builds/{id}/certs-secure", s.vm(s.certsSecure))
	m.HandleFunc("GET /api/builds/{id}/spec", s.vm(s.buildJob))
	m.HandleFunc("GET /api/builds/{id}/credentials", s.vm(s.buildCredentials))
	m.HandleFunc("POST /api/builds/{id}/logs", s.vm(s.appendLog))
	m.HandleFunc("POST /api/builds/{id}/artifacts", s.vm(s.uploadArtifact))
	m.HandleFunc("PUT /api/builds/{id}/artifacts/{name}", s.vm(s.putArtifact))
	m.HandleFunc("POST /api/builds/{id}/artifacts/direct", s.vm(s.startDirectUpload))
	m.HandleFunc("POST /api/builds/{id}/artifacts/direct/complete", s.vm(s.completeDirectUpload))

	noEndpoint := func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path)
	}
	m.HandleFunc("/api", noEndpoint)
	m.HandleFunc("/api/", noEndpoint)
	s.mux = m
}

// Mount serves every path outside the API with ui (the dashboard), behind
// the same request logging, panic recovery, rate limits and body guard as
// the API. The composition root calls it once, before serving; without it
// those paths answer 404.
func (s *Server) Mount(ui http.Handler) { s.mux.Handle("/", ui) }

// BuildEnded tells the reaper a request moved a build to a terminal state
// (Options.BuildEnded), for handlers mounted beside the API.
func (s *Server) BuildEnded() { s.kick() }

// AuthFailed charges a failed authentication outside the API (a wrong key
// at the dashboard's sign-in form) to the client address's budget, so that
// form is no way around the guard against guessing keys. It says how long
// the address must wait when it has spent its budget (answer 429 with
// Retry-After), 0 while it has not.
func (s *Server) AuthFailed(r *http.Request) time.Duration {
	if e := s.rates.authFailed(r); e != nil {
		return time.Duration(retrySeconds(e.retry)) * time.Second
	}
	return 0
}

// Done is closed by Drain: live streams end on it, so a graceful shutdown
// does not wait for them.
func (s *Server) Done() <-chan struct{} { return s.draining }

// ServeQR answers with the QR code of build id's install link, or 404 when
// the controller signs no install links. The caller has checked access.
func (s *Server) ServeQR(w http.ResponseWriter, r *http.Request, id string) {
	if s.links == nil {
		writeError(w, r, http.StatusNotFound, "not_found", "install links are off on this controller")
		return
	}
	s.qrCode(w, r, buildAccess{ID: id})
}

// ServeHTTP implements http.Handler with request logging and panic recovery.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.WithField("panic", p).WithField("path", r.URL.Path).Error("handler panicked")
			if !rec.wrote {
				writeError(rec, r, http.StatusInternalServerError, "internal", "internal error; see the controller log")
			}
		}
		s.metrics.Request(r.Pattern, r.Method, rec.status, time.Since(start))
		if s.log != nil {
			entry := s.log.WithFields(logrus.Fields{"method": r.Method, "path": r.URL.Path, "status": rec.status,
				"ms": time.Since(start).Milliseconds()})
			if rec.status >= 500 {
				entry.Warn("request failed")
			} else {
				entry.Debug("request")
			}
		}
	}()
	s.guardBody(w, r)
	s.mux.ServeHTTP(rec, r)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

// ReadFrom hands a body copied from a reader (http.ServeContent's stored
// file) to the connection's own ReadFrom, so a download goes from the page
// cache to the socket by sendfile, as it would unwrapped, instead of
// through two user-space copies.
func (r *statusRecorder) ReadFrom(src io.Reader) (int64, error) {
	r.wrote = true
	return io.Copy(r.ResponseWriter, src)
}

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	body := map[string]string{"status": "ready", "database": "ok", "migrations": "current"}
	status := http.StatusOK
	if err := s.store.Ping(ctx); err != nil {
		// The cause goes to the log: an anonymous caller learns only that
		// the database is unreachable, not its address, user or error text.
		if s.log != nil {
			s.log.WithError(err).Warn("readiness: the database does not answer")
		}
		body["status"], body["database"] = "unavailable", "unreachable (see the controller's log)"
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	// A schema newer than this release's is a newer release's expansion
	// (migrations only add; docs/operations.md): this replica keeps
	// serving beside it during a rolling upgrade.
	v, err := s.store.SchemaVersion(ctx)
	if err != nil || v < store.LatestMigration() {
		body["status"], body["migrations"], status = "unavailable", "pending: run `freeagent-controller migrate`", http.StatusServiceUnavailable
	}
	writeJSON(w, status, body)
}

// keyCache keeps recently verified API keys for a few seconds, so the hot
// worker endpoints do not pay a query per request. A revoked key stops
// working within the TTL.
type keyCache struct {
	ttl     time.Duration
	mu      sync.Mutex
	entries map[string]cachedKey
}

type cachedKey struct {
	key     store.APIKey
	expires time.Time
}
