// Package metrics is the controller's Prometheus instrumentation: one
// registry per controller (never the global default), the counters and
// histograms its components feed, and gauges read from the database when
// scraped.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/gc"
	"github.com/freeagent-build/freeagent/controller/store"
)

// Metrics holds a controller's collectors. A nil *Metrics records nothing,
// so components can run without instrumentation (tests, tools).
type Metrics struct {
	reg *prometheus.Registry

	polls        *prometheus.CounterVec
	claims       prometheus.Counter
	pollSeconds  *prometheus.HistogramVec
	pickup       prometheus.Histogram
	leaseExpired prometheus.Counter
	requeued     prometheus.Counter
	deadLetters  prometheus.Counter
	timedOut     prometheus.Counter
	webhooks     *prometheus.CounterVec
	httpSeconds  *prometheus.HistogramVec
	gcRuns       prometheus.Counter
	gcDeleted    *prometheus.CounterVec
	gcErrors     prometheus.Counter
	gcLastRun    prometheus.Gauge
	spares       *prometheus.CounterVec
	vmSeconds    *prometheus.HistogramVec
}

// StatsSource reads the queue's state at scrape time, and the audit log's
// chain in the background.
type StatsSource interface {
	LiveStats(ctx context.Context) (store.LiveStats, error)
	FinishedCounts(ctx context.Context) (map[string]int, error)
	VerifyEvents(ctx context.Context) (api.EventVerification, error)
}

// ScrapeTimeout bounds the database queries behind the queue gauges: a slow
// database makes a scrape miss those gauges rather than hang.
const ScrapeTimeout = 2 * time.Second

// New creates the collectors and registers them, with the database-backed
// gauges read from src on scrapes (ended builds recounted at most every
// finishedRefresh; 0 means FinishedRefresh), and Go runtime and process metrics.
func New(src StatsSource, finishedRefresh time.Duration) *Metrics {
	latency := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "freeagent_polls_total",
			Help: "Worker long polls answered, by result (job, empty, capacity)."}, []string{"result"}),
		claims: prometheus.NewCounter(prometheus.CounterOpts{Name: "freeagent_claims_total",
			Help: "Builds claimed by workers (new attempts handed out)."}),
		pollSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "freeagent_poll_duration_seconds",
			Help: "How long a worker long poll was held before it answered, by result.", Buckets: latency}, []string{"result"}),
		pickup: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "freeagent_pickup_latency_seconds",
			Help: "Time from when a build became claimable (submitted or backoff over) to its claim.", Buckets: latency}),
		leaseExpired: prometheus.NewCounter(prometheus.CounterOpts{Name: "freeagent_lease_expiries_total",
			Help: "Build leases the reaper found expired."}),
		requeued: prometheus.NewCounter(prometheus.CounterOpts{Name: "freeagent_requeues_total",
			Help: "Builds the reaper returned to pending after an expired lease or an offline worker."}),
		deadLetters: prometheus.NewCounter(prometheus.CounterOpts{Name: "freeagent_dead_letters_total",
			Help: "Builds the reaper failed with max_attempts (no attempts left)."}),
		timedOut: prometheus.NewCounter(prometheus.CounterOpts{Name: "freeagent_build_timeouts_total",
			Help: "Running builds the reaper failed for exceeding their timeout."}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "freeagent_webhook_deliveries_total",
			Help: "Webhook delivery attempts, by outcome (delivered, failed, dead)."}, []string{"outcome"}),
		httpSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "freeagent_http_request_duration_seconds",
			Help: "HTTP request durations by route pattern, method and status code.", Buckets: prometheus.DefBuckets},
			[]string{"route", "method", "code"}),
		gcRuns: prometheus.NewCounter(prometheus.CounterOpts{Name: "freeagent_gc_runs_total",
			Help: "Garbage collection passes this replica ran (one replica at a time runs one)."}),
		gcDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "freeagent_gc_deleted_total",
			Help: "What the garbage collector removed, by kind (stray_artifact, expired_artifacts, expired_source, expired_log: builds; orphan, staging, leftover: objects)."}, []string{"kind"}),
		gcErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "freeagent_gc_errors_total",
			Help: "Deletions the garbage collector could not make (retried on its next pass)."}),
		gcLastRun: prometheus.NewGauge(prometheus.GaugeOpts{Name: "freeagent_gc_last_run_timestamp_seconds",
			Help: "When this replica last finished a garbage collection pass (Unix time)."}),
		spares: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "freeagent_warm_spare_claims_total",
			Help: "Build attempts on workers that keep warm spares, by whether their VM was a warm spare (hit) or booted fresh (miss)."}, []string{"result"}),
		vmSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "freeagent_vm_phase_duration_seconds",
			Help: "From an attempt's claim to its VM ready for the build, by VM (warm_spare, fresh).", Buckets: latency}, []string{"vm"}),
	}
	// Every label value exists from the start at 0, so a rate() or an
	// increase() in an alert sees its first event rather than a new series.
	for _, r := range []string{"job", "empty", "capacity"} {
		m.polls.WithLabelValues(r)
		m.pollSeconds.WithLabelValues(r)
	}
	for _, o := range []string{WebhookDelivered, WebhookFailed, WebhookDead} {
		m.webhooks.WithLabelValues(o)
	}
	for kind := range gcDeleted(gc.Report{}) {
		m.gcDeleted.WithLabelValues(kind)
	}
	for _, r := range []string{api.SpareHit, api.SpareMiss} {
		m.spares.WithLabelValues(r)
	}
	for _, vm := range []string{vmWarmSpare, vmFresh} {
		m.vmSeconds.WithLabelValues(vm)
	}
	m.reg.MustRegister(m.polls, m.claims, m.pollSeconds, m.pickup, m.leaseExpired, m.requeued, m.deadLetters,
		m.timedOut, m.webhooks, m.httpSeconds, m.gcRuns, m.gcDeleted, m.gcErrors, m.gcLastRun, m.spares, m.vmSeconds, newQueueCollector(src, finishedRefresh),
		newChainCollector(src, ChainRefresh),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Poll records one answered long poll: held for d; claimed says a new build
// was claimed (pickup is then how long it had been claimable).
func (m *Metrics) Poll(d time.Duration, res store.PollResult) {
	if m == nil {
		return
	}
	result := "empty"
	switch {
	case res.Job != nil:
		result = "job"
	case res.AtCapacity:
		result = "capacity"
	}
	m.polls.WithLabelValues(result).Inc()
	m.pollSeconds.WithLabelValues(result).Observe(d.Seconds())
	if res.Job != nil && res.Claimed {
		m.claims.Inc()
		m.pickup.Observe(res.Pickup.Seconds())
	}
}

// The vm label of freeagent_vm_phase_duration_seconds.
const (
	vmWarmSpare = "warm_spare"
	vmFresh     = "fresh"
)

// AttemptVM records an attempt's VM, once (the first heartbeat that
// reports it): a spare hit or miss on a worker that keeps spares, and the
// VM phase's duration on any.
func (m *Metrics) AttemptVM(v api.AttemptVM) {
	if m == nil {
		return
	}
	if v.Spare != "" {
		m.spares.WithLabelValues(v.Spare).Inc()
	}
	vm := vmFresh
	if v.WarmSpare() {
		vm = vmWarmSpare
	}
	m.vmSeconds.WithLabelValues(vm).Observe(v.PhaseSeconds)
}

// Sweep records what one reaper sweep changed.
func (m *Metrics) Sweep(r store.SweepReport) {
	if m == nil {
		return
	}
	m.leaseExpired.Add(float64(r.LeasesExpired))
	m.requeued.Add(float64(r.Requeued))
	m.deadLetters.Add(float64(r.DeadLettered))
	m.timedOut.Add(float64(r.TimedOut))
}

// GC records one garbage collection pass.
func (m *Metrics) GC(r gc.Report) {
	if m == nil {
		return
	}
	for kind, n := range gcDeleted(r) {
		m.gcDeleted.WithLabelValues(kind).Add(float64(n))
	}
	m.gcErrors.Add(float64(r.Errors))
	if !r.StagingOnly { // runs and the last run are the full passes', which alerts watch
		m.gcRuns.Inc()
		m.gcLastRun.SetToCurrentTime()
	}
}

// gcDeleted is what a pass removed, by the kind label.
func gcDeleted(r gc.Report) map[string]int {
	return map[string]int{"stray_artifact": r.StrayArtifacts, "expired_artifacts": r.ExpiredArtifacts,
		"expired_source": r.ExpiredSources, "expired_log": r.ExpiredLogs, "orphan": r.Orphans, "staging": r.Staging, "leftover": r.Leftovers}
}

// Webhook outcomes.
const (
	WebhookDelivered = "delivered" // a 2xx answer
	WebhookFailed    = "failed"    // an attempt failed; another is scheduled
	WebhookDead      = "dead"      // the last attempt failed
)

// Webhook records one delivery attempt's outcome.
func (m *Metrics) Webhook(outcome string) {
	if m == nil {
		return
	}
	m.webhooks.WithLabelValues(outcome).Inc()
}

// Request records one HTTP request. route is the ServeMux pattern that
// matched (never the raw path, which would make a series per build id).
func (m *Metrics) Request(route, method string, code int, d time.Duration) {
	if m == nil {
		return
	}
	if route == "" {
		route = "unmatched"
	}
	m.httpSeconds.WithLabelValues(route, method, strconv.Itoa(code)).Observe(d.Seconds())
}

// queueCollector reads the queue gauges from the database on each scrape:
// live builds exactly every time, ended builds (a scan of the history) at
// most once per FinishedRefresh.
type queueCollector struct {
	src                           StatsSource
	buildsDesc, depthDesc, oldest *prometheus.Desc
	workersDesc, slotsDesc        *prometheus.Desc

	refresh    time.Duration
	mu         sync.Mutex
	finished   map[string]int
	finishedAt time.Time
}

// FinishedRefresh is how stale the counts of ended builds may be by default.
const FinishedRefresh = time.Minute

func newQueueCollector(src StatsSource, refresh time.Duration) *queueCollector {
	if refresh <= 0 {
		refresh = FinishedRefresh
	}
	return &queueCollector{src: src, refresh: refresh,
		buildsDesc: prometheus.NewDesc("freeagent_builds",
			"Builds by status; the ended statuses (completed, failed, cancelled) are recounted at most once a minute.", []string{"status"}, nil),
		depthDesc: prometheus.NewDesc("freeagent_queue_depth", "Pending builds (waiting for a worker or a backoff).", nil, nil),
		oldest: prometheus.NewDesc("freeagent_queue_oldest_pending_seconds",
			"How long the longest-waiting pending build has waited since it was submitted; 0 when none waits.", nil, nil),
		workersDesc: prometheus.NewDesc("freeagent_workers_online", "Workers registered and heard from within --worker-offline-after.", nil, nil),
		slotsDesc: prometheus.NewDesc("freeagent_worker_slots",
			"Builds the online workers announce they can run at once (the sum of their max_concurrent_builds): utilisation is assigned plus building over this.", nil, nil),
	}
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.buildsDesc
	ch <- c.depthDesc
	ch <- c.oldest
	ch <- c.workersDesc
	ch <- c.slotsDesc
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), ScrapeTimeout)
	defer cancel()
	live, err := c.src.LiveStats(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.buildsDesc, err)
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.buildsDesc, float64(live.Pending), "pending")
	gauge(c.buildsDesc, float64(live.Assigned), "assigned")
	gauge(c.buildsDesc, float64(live.Building), "building")
	gauge(c.depthDesc, float64(live.Pending))
	gauge(c.oldest, live.OldestPending.Seconds())
	gauge(c.workersDesc, float64(live.OnlineWorkers))
	gauge(c.slotsDesc, float64(live.WorkerSlots))

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finished == nil || time.Since(c.finishedAt) >= c.refresh {
		finished, err := c.src.FinishedCounts(ctx)
		if err != nil && c.finished == nil {
			ch <- prometheus.NewInvalidMetric(c.buildsDesc, err)
			return
		}
		if err == nil { // on an error, the last counts stand until the next scrape retries
			c.finished, c.finishedAt = finished, time.Now()
		}
	}
	for status, n := range c.finished {
		gauge(c.buildsDesc, float64(n), status)
	}
}

// ChainRefresh is how often each replica re-verifies the audit log's hash
// chain for freeagent_events_chain_valid.
const ChainRefresh = 5 * time.Minute

// chainCheckTimeout bounds one verification of the whole chain.
const chainCheckTimeout = 5 * time.Minute

// chainCollector exports the last verification of the audit log's hash
// chain. Verifying reads every event (seconds per million), far too slow
// for a scrape, so a scrape that finds the result stale starts one check in
// the background and reports the last result meanwhile; until the first
// check ends the series is absent.
type chainCollector struct {
	src                 StatsSource
	refresh             time.Duration
	validDesc, whenDesc *prometheus.Desc

	mu        sync.Mutex
	running   bool
	checked   time.Time
	valid     bool
	checkedOK bool
}

func newChainCollector(src StatsSource, refresh time.Duration) *chainCollector {
	return &chainCollector{src: src, refresh: refresh,
		validDesc: prometheus.NewDesc("freeagent_events_chain_valid",
			"1 when the audit log's hash chain verified at the last check (as `events verify`), 0 when it is broken; absent until the first check of this replica ends.", nil, nil),
		whenDesc: prometheus.NewDesc("freeagent_events_chain_checked_timestamp_seconds",
			"When this replica last finished verifying the audit log's hash chain (Unix time).", nil, nil),
	}
}

func (c *chainCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.validDesc
	ch <- c.whenDesc
}

func (c *chainCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running && time.Since(c.checked) >= c.refresh {
		c.running = true
		go c.check()
	}
	if !c.checkedOK {
		return
	}
	valid := 0.0
	if c.valid {
		valid = 1
	}
	ch <- prometheus.MustNewConstMetric(c.validDesc, prometheus.GaugeValue, valid)
	ch <- prometheus.MustNewConstMetric(c.whenDesc, prometheus.GaugeValue, float64(c.checked.UnixNano())/1e9)
}

// check verifies the chain once; a failed check (database down) keeps the
// last result and is retried on the next scrape after the refresh period.
func (c *chainCollector) check() {
	ctx, cancel := context.WithTimeout(context.Background(), chainCheckTimeout)
	defer cancel()
	v, err := c.src.VerifyEvents(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running, c.checked = false, time.Now()
	if err == nil {
		c.valid, c.checkedOK = v.Valid, true
	}
}
