// Package agent is the Free Agent worker: it registers with the controller,
// long-polls for builds, keeps each build's lease alive with heartbeats,
// runs every build in a fresh environment from its Driver, reports the
// result, and drains on shutdown.
package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/agent/cache"
	"github.com/freeagent-build/freeagent/api"
)

// MaxMacOSVMs is Apple's licence limit of concurrent macOS VMs per host.
const MaxMacOSVMs = 2

// Config is what the agent needs to run.
type Config struct {
	ControllerURL string
	APIKey        string
	// GuestControllerURL is the controller as the build environment sees it
	// (a loopback URL is unreachable from inside a VM); empty: ControllerURL.
	GuestControllerURL string
	WorkerID           string // remembered id; empty registers a new worker
	Name               string
	Capabilities       api.Capabilities
	MaxBuilds          int // concurrent builds
	Resources          Resources
	BootstrapBinary    string        // freeagent-vm copied into every shared dir
	WorkDir            string        // shared dirs are created under it
	PollWait           time.Duration // long-poll hold asked of the controller (job polls and cancel watches; it caps them at 30 s by default)
	BootTimeout        time.Duration // from start until vm-ready
	BackoffMin         time.Duration // network/5xx errors: exponential with jitter
	BackoffMax         time.Duration
	FileWatchInterval  time.Duration // how often signal files are checked
	// AnswerGrace is how long past its own wait a call to the controller
	// may go unanswered before it is abandoned with its connection (default
	// 15 s; a heartbeat gets two heartbeat intervals). A connection can die
	// without either end hearing of it (a Mac that slept or changed
	// networks, a NAT that forgot it): a request on it would wait until TCP
	// gave up, minutes later or, behind a proxy that keeps its side alive,
	// never, while the lease it should renew expires.
	AnswerGrace time.Duration
	// MaxBuildTimeout caps every build's own timeout on this worker (the
	// Mac owner's limit); zero: the build's timeout alone.
	MaxBuildTimeout time.Duration
	// OnWorkerID is told the worker id after every registration, to persist it.
	OnWorkerID func(string)
	// Awake keeps the host awake while builds run (power.ForHost); nil: nothing.
	Awake Awake
	// Host says, from the owner's rules, whether the host may take a build
	// now (hostsignals.Gate); nil: always. It is asked every
	// HostCheckInterval (at most 5 s, so a cleared condition resumes the
	// worker within 10 s).
	Host              HostGate
	HostCheckInterval time.Duration
	// CacheDir holds the dependency caches (agent/cache), at most
	// CacheMaxBytes in all; either unset: builds run without caches.
	CacheDir      string
	CacheMaxBytes int64
	// WarmSpare keeps a warm spare (spare.go) when the driver can; with
	// SuspendSpares a ready spare is suspended where the host allows it.
	// SpareAnswerTimeout bounds the wait, after a build's files reached a
	// spare, for its bootstrap's first sign; without one the spare is
	// destroyed and the build boots a fresh VM (default 30 s).
	WarmSpare          bool
	SuspendSpares      bool
	SpareAnswerTimeout time.Duration
}

// Agent is one worker process.
type Agent struct {
	cfg    Config
	driver Driver
	client *api.Client
	log    logrus.FieldLogger

	tokens tokenHolder
	caches *cache.Store // nil: no dependency caches

	mu          sync.Mutex
	workerID    string
	heartbeat   time.Duration
	running     map[string]*build // by build id
	slotFreed   chan struct{}
	draining    chan struct{} // closed by Drain
	drainOnce   sync.Once
	cancelBuild chan struct{} // closed by CancelBuilds
	cancelOnce  sync.Once
	paused      bool               // the owner's pause (SetPaused)
	hostPause   string             // why the host's rules hold builds back; "" when they do not
	pauseSent   chan struct{}      // wakes the pause reporter (reportPauses)
	pauseGen    int                // counts pause changes and registrations (pauseChanged)
	pollCancel  context.CancelFunc // ends the poll in flight (SetPaused, a host pause)
	status      Status
	awakeMu     sync.Mutex // orders the calls to cfg.Awake (reportBusy)
	// After the host refused a VM (CodeVMLimit), no build is taken until
	// hostFullUntil, or until one of this agent's own VMs ends.
	vmLimit       *api.BackoffSequence
	hostFullUntil time.Time
	// reports owns the cache reports sent after a registration; Run waits
	// for them before it returns.
	reports sync.WaitGroup
	// The warm spare (spare.go): the keeper's, until a build takes it.
	spare         *spare
	spareKick     chan struct{}
	spareSeq      int
	spareRetryAt  time.Time // after a failed start
	spareBackoff  *api.BackoffSequence
	suspendBroken bool // a suspension failed: spares stay running
	foreignVMs    int  // running VMs of the host this agent did not start
}

// New returns an agent; Run starts it.
func New(cfg Config, driver Driver, log logrus.FieldLogger) (*Agent, error) {
	if cfg.ControllerURL == "" {
		return nil, errors.New("no controller URL: set --controller-url or FREEAGENT_CONTROLLER_URL")
	}
	if cfg.APIKey == "" {
		return nil, errors.New("no API key: set FREEAGENT_API_KEY or store one with `freeagent setup`")
	}
	if cfg.MaxBuilds < 1 {
		cfg.MaxBuilds = 1
	}
	if cfg.GuestControllerURL == "" {
		cfg.GuestControllerURL = cfg.ControllerURL
	}
	if cfg.Name == "" {
		cfg.Name, _ = os.Hostname()
	}
	defaults := map[*time.Duration]time.Duration{&cfg.PollWait: 25 * time.Second, &cfg.BootTimeout: 5 * time.Minute,
		&cfg.BackoffMin: 5 * time.Second, &cfg.BackoffMax: 2 * time.Minute, &cfg.FileWatchInterval: 100 * time.Millisecond, &cfg.AnswerGrace: 15 * time.Second,
		&cfg.HostCheckInterval: 5 * time.Second, &cfg.SpareAnswerTimeout: 30 * time.Second}
	for p, d := range defaults {
		if *p <= 0 {
			*p = d
		}
	}
	cfg.Capabilities.MaxConcurrentBuilds = cfg.MaxBuilds
	caches, err := openCaches(cfg)
	if err != nil {
		return nil, fmt.Errorf("the dependency caches in %s: %w", cfg.CacheDir, err)
	}
	return &Agent{
		cfg:          cfg,
		driver:       driver,
		client:       &api.Client{BaseURL: cfg.ControllerURL, APIKey: cfg.APIKey, HTTP: &http.Client{Transport: controllerTransport(cfg)}, UserAgent: "freeagent-agent"},
		log:          log,
		caches:       caches,
		workerID:     cfg.WorkerID,
		heartbeat:    30 * time.Second,
		running:      map[string]*build{},
		slotFreed:    make(chan struct{}, 1),
		pauseSent:    make(chan struct{}, 1),
		draining:     make(chan struct{}),
		cancelBuild:  make(chan struct{}),
		status:       Status{State: StateConnecting},
		vmLimit:      cfg.backoff().Sequence(),
		spareKick:    make(chan struct{}, 1),
		spareBackoff: cfg.backoff().Sequence(),
	}, nil
}

// Drain stops taking builds; running builds finish, then Run unregisters
// and returns. The first SIGTERM, or the tray's Quit.
func (a *Agent) Drain() {
	a.drainOnce.Do(func() {
		a.log.Info("draining: no new builds; running builds finish, then the worker unregisters")
		close(a.draining)
		a.setState(StateDraining, "")
		a.kickSpare()
	})
}

// CancelBuilds stops the running builds' environments and hands the builds
// back to the controller for another worker (the second SIGTERM).
func (a *Agent) CancelBuilds() {
	a.Drain()
	a.cancelOnce.Do(func() {
		a.log.Warn("stopping running builds and handing them back")
		close(a.cancelBuild)
	})
}

// Run registers, polls and runs builds until ctx ends or a drain completes.
func (a *Agent) Run(ctx context.Context) error {
	defer a.reports.Wait()
	if err := a.driver.Cleanup(ctx); err != nil {
		a.log.WithError(err).Warn("could not clean up environments left by a previous run")
	}
	if err := a.register(ctx); err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	stopWatch := a.watchHost(ctx)
	defer stopWatch()
	if d, ok := a.spareDriver(); ok {
		spareCtx, stopSpare := context.WithCancel(ctx)
		var keeper sync.WaitGroup
		keeper.Go(func() { a.keepSpare(spareCtx, d) })
		defer func() {
			stopSpare()
			keeper.Wait()
		}()
	}
	backoff := a.cfg.backoff().Sequence()
	for {
		if a.isDraining() || ctx.Err() != nil {
			break
		}
		if !a.waitForSlot(ctx) {
			continue
		}
		resp, err := a.poll(ctx)
		if err != nil {
			if ctx.Err() != nil || a.isDraining() {
				break
			}
			if a.isPaused() { // the pause ended the poll
				continue
			}
			if a.recover(ctx, err, backoff) {
				continue
			}
			return err
		}
		backoff.Reset()
		a.tokens.keep(resp.TokenGrant)
		a.setOnline()
		if resp.Job == nil {
			continue
		}
		b := a.startBuild(ctx, resp.Job)
		if a.isDraining() || a.isPaused() { // claimed just as the drain or pause began: hand it straight back
			b.report(ctx, outcome{code: api.CodeReleased, message: "the worker is stopping or paused; build handed back"})
			a.finishBuild(b)
			continue
		}
		// The controller re-delivers an unacknowledged job on our next poll,
		// so acknowledge it (first heartbeat) before polling again.
		if err := b.acknowledge(ctx); err != nil {
			a.log.WithError(err).WithField("build", resp.Job.ID).Warn("could not acknowledge the build; dropping it")
			a.finishBuild(b)
			continue
		}
		a.reportBusy()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer a.finishBuild(b)
			b.run(ctx)
		}()
	}
	wg.Wait()
	stopWatch()
	a.dropSpare(ctx, "the worker stopped")
	a.unregister()
	return ctx.Err()
}

// controllerTransport carries the agent's calls to the controller. Over
// HTTP/2 one connection carries them all, and giving up a call only resets
// its stream: a connection that died unheard (see Config.AnswerGrace) is
// found by a ping that goes unanswered, and closed, so the next call dials
// a new one.
func controllerTransport(cfg Config) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 8
	t.HTTP2 = &http.HTTP2Config{SendPingTimeout: cfg.AnswerGrace, PingTimeout: cfg.AnswerGrace}
	return t
}

// poll long-polls for a job; a drain or a pause ends the wait at once,
// and a poll unanswered AnswerGrace past its wait is abandoned.
func (a *Agent) poll(ctx context.Context) (api.PollResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.PollWait+a.cfg.AnswerGrace)
	defer cancel()
	a.mu.Lock()
	a.pollCancel = cancel
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.pollCancel = nil
		a.mu.Unlock()
	}()
	go func() {
		select {
		case <-a.draining:
			cancel()
		case <-ctx.Done():
		}
	}()
	return a.client.Poll(ctx, a.tokens.get(), a.cfg.PollWait)
}

// recover handles a failed worker call: re-register on 401/404, back off on
// network trouble and 5xx. It returns false for errors that end the agent.
func (a *Agent) recover(ctx context.Context, err error, b *api.BackoffSequence) bool {
	switch status := api.StatusOf(err); {
	case status == http.StatusUnauthorized || status == http.StatusNotFound:
		a.log.WithError(err).Warn("worker token refused; registering again")
		if err := a.register(ctx); err != nil {
			return false
		}
		return true
	case status == http.StatusForbidden:
		a.setState(StateNeedsAttention, "the API key is not allowed to act as a worker: use a worker or admin key")
		a.log.WithError(err).Error("the API key is not a worker key")
		return sleepCtx(ctx, b.Next(), a.draining)
	default:
		d := b.After(err)
		a.setState(StateOffline, fmt.Sprintf("controller unreachable: %v (retrying in %s)", err, d.Round(time.Second)))
		a.log.WithError(err).WithField("retry_in", d.Round(time.Millisecond)).Warn("poll failed")
		return sleepCtx(ctx, d, a.draining)
	}
}

// register registers (or re-registers) the worker, retrying transient
// failures (api.Transient) with backoff until it succeeds, ctx ends, or the
// controller refuses it.
func (a *Agent) register(ctx context.Context) error {
	b := a.cfg.backoff().Sequence()
	for {
		a.mu.Lock()
		id := a.workerID
		a.mu.Unlock()
		resp, err := a.client.Register(ctx, api.RegisterRequest{ID: id, Name: a.cfg.Name, Capabilities: a.cfg.Capabilities})
		if err == nil {
			a.mu.Lock()
			a.workerID = resp.ID
			if resp.HeartbeatIntervalSeconds > 0 {
				a.heartbeat = time.Duration(resp.HeartbeatIntervalSeconds) * time.Second
			}
			a.mu.Unlock()
			a.tokens.set(api.TokenGrant{AccessToken: resp.AccessToken, TokenExpiresAt: resp.TokenExpiresAt})
			if a.cfg.OnWorkerID != nil {
				a.cfg.OnWorkerID(resp.ID)
			}
			a.log.WithFields(logrus.Fields{"worker": resp.ID, "status": resp.Status}).Info("registered with the controller")
			a.pauseChanged() // a new instance starts unpaused on the controller: say how it stands
			a.setOnline()
			a.reports.Go(func() { a.reportCache(ctx) })
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch api.StatusOf(err) {
		case http.StatusUnauthorized, http.StatusForbidden:
			a.setState(StateNeedsAttention, "the controller refused the API key: check it with `freeagent setup`")
			return fmt.Errorf("the controller refused the API key (%w); check the key", err)
		}
		if !api.Transient(err) {
			// A 4xx other than the key's (a wrong URL's 404, say) does not
			// heal by retrying: the owner is told, as for a refused key.
			a.setState(StateNeedsAttention, fmt.Sprintf("the controller refused the registration: %v; check the controller URL with `freeagent setup`", err))
			return fmt.Errorf("registration refused: %w", err)
		}
		d := b.After(err)
		a.setState(StateOffline, fmt.Sprintf("controller unreachable: %v", err))
		a.log.WithError(err).WithField("retry_in", d.Round(time.Millisecond)).Warn("registration failed")
		if !sleepCtx(ctx, d, nil) {
			return ctx.Err()
		}
	}
}

func (a *Agent) unregister() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := a.client.Unregister(ctx, a.tokens.get())
	if err != nil {
		a.log.WithError(err).Warn("could not unregister; the controller will notice the worker is gone")
		return
	}
	a.log.WithField("builds_handed_back", resp.BuildsReassigned).Info("unregistered")
	a.setState(StateStopped, "")
}

// isPaused: the owner or the host's rules hold new builds back.
func (a *Agent) isPaused() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pausedLocked()
}

func (a *Agent) pausedLocked() bool { return a.paused || a.hostPause != "" }

func (a *Agent) isDraining() bool {
	select {
	case <-a.draining:
		return true
	default:
		return false
	}
}

// waitForSlot blocks while the agent is full, paused, or waiting after the
// host refused a VM. It returns false when it was interrupted (drain, ctx)
// and the loop should re-check.
func (a *Agent) waitForSlot(ctx context.Context) bool {
	for {
		a.mu.Lock()
		hostFull := time.Until(a.hostFullUntil)
		free := len(a.running) < a.cfg.MaxBuilds && !a.pausedLocked() && hostFull <= 0
		a.mu.Unlock()
		if free {
			return true
		}
		var retry <-chan time.Time // nil: no wait for the host
		if hostFull > 0 {
			retry = time.After(hostFull)
		}
		select {
		case <-ctx.Done():
			return false
		case <-a.draining:
			return false
		case <-a.slotFreed:
		case <-retry:
		}
	}
}

// vmLimitHit starts (or lengthens, exponentially) the wait after the host
// refused a VM, and returns it.
func (a *Agent) vmLimitHit() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	d := a.vmLimit.Next()
	a.hostFullUntil = time.Now().Add(d)
	return d
}

// vmStarted: a VM booted, so the host had room; the next refusal starts
// from the shortest wait.
func (a *Agent) vmStarted() {
	a.mu.Lock()
	a.vmLimit.Reset()
	a.mu.Unlock()
}

func (a *Agent) finishBuild(b *build) {
	b.mu.Lock()
	freedVM := b.ranVM
	b.mu.Unlock()
	a.mu.Lock()
	delete(a.running, b.job.ID)
	if freedVM { // one of our VMs is gone: the host has room again
		a.hostFullUntil = time.Time{}
	}
	a.mu.Unlock()
	select {
	case a.slotFreed <- struct{}{}:
	default:
	}
	a.kickSpare()
	a.setOnline()
	a.reportBusy()
}

// tokenHolder keeps the worker token. Answers can arrive out of order, so
// it keeps the grant that expires last.
type tokenHolder struct {
	mu    sync.Mutex
	grant api.TokenGrant
}

func (t *tokenHolder) get() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.grant.AccessToken
}

func (t *tokenHolder) set(g api.TokenGrant) {
	t.mu.Lock()
	t.grant = g
	t.mu.Unlock()
}

func (t *tokenHolder) keep(g api.TokenGrant) {
	if g.AccessToken == "" {
		return
	}
	t.mu.Lock()
	if g.TokenExpiresAt.After(t.grant.TokenExpiresAt) {
		t.grant = g
	}
	t.mu.Unlock()
}

// backoff is the schedule of retries after network trouble: from
// BackoffMin doubling up to BackoffMax, each wait drawn from its upper
// half so many workers recovering from one outage do not come back in
// lockstep.
func (c Config) backoff() api.Backoff {
	return api.Backoff{Initial: c.BackoffMin, Max: c.BackoffMax, Jitter: 0.5}
}

// sleepCtx sleeps d; false when ctx ended or stop closed first.
func sleepCtx(ctx context.Context, d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}

// GuestURL is the controller URL as a VM on Tart's shared network sees it:
// loopback hosts are replaced by hostAddr (the host's address on that network).
func GuestURL(controllerURL, hostAddr string) string {
	u, err := url.Parse(controllerURL)
	if err != nil || hostAddr == "" {
		return controllerURL
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		if port := u.Port(); port != "" {
			u.Host = net.JoinHostPort(hostAddr, port)
		} else {
			u.Host = hostAddr
		}
	}
	return u.String()
}

// quickBackoff is the schedule of a running build's calls (results, cancel
// watch): five times quicker to start and four times shorter at most than
// backoff, since a build's lease is waiting on them.
func (c Config) quickBackoff() api.Backoff {
	return api.Backoff{Initial: c.BackoffMin/5 + time.Millisecond, Max: c.BackoffMax / 4, Jitter: 0.5}
}
