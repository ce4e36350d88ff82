package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/pgcluster"
)

// FleetResult is what a farm of mostly idle, sometimes busy workers costs
// the controller, at each worker count tried.
type FleetResult struct {
	Settings FleetSettings `json:"settings"`
	Points   []FleetPoint  `json:"points"`
}

// FleetSettings is the request mix every simulated worker follows.
type FleetSettings struct {
	PollWaitS       float64 `json:"poll_wait_s"`
	HeartbeatS      float64 `json:"heartbeat_s"` // 0: what the controller asks (FleetPoint.HeartbeatS)
	CancelWatchS    float64 `json:"cancel_watch_s"`
	BuildS          float64 `json:"build_s"` // mean build time (uniform in ½× to 1½×)
	BusyShare       float64 `json:"busy_share"`
	LogEveryS       float64 `json:"log_every_s"`
	LogBytes        int     `json:"log_bytes"`
	ArtifactBytes   int64   `json:"artifact_bytes"`
	CancelShare     float64 `json:"cancel_share"`
	WindowS         float64 `json:"window_s"`
	WarmupS         float64 `json:"warmup_s"`
	BudgetsDefaults bool    `json:"budgets_production_defaults"` // always true: the production controller
}

// FleetPoint is one worker count's window.
type FleetPoint struct {
	Workers int `json:"workers"`
	// Controller is "baseline" for a window measured against
	// Config.BaselineBin, "" for this controller.
	Controller string  `json:"controller,omitempty"`
	HeartbeatS float64 `json:"heartbeat_s"` // the interval the workers renewed their leases at
	// Busy is the average share of workers holding a build in the window.
	Busy     float64 `json:"busy"`
	Builds   int64   `json:"builds_finished"` // results reported in the window
	Canceled int64   `json:"builds_cancelled"`
	// Calls are client-side latencies of each call made in the window;
	// long polls (the poll, the cancel watch) are counted, not timed: they
	// wait by design, and Pickup is what the poll's wake-up costs.
	Calls          map[string]Dist `json:"calls"`
	EmptyPolls     int64           `json:"empty_polls"`
	CancelWatches  int64           `json:"cancel_watches"`
	Pickup         Dist            `json:"pickup"` // submit answered → a worker's poll returns the build
	CPU            CPUSplit        `json:"cpu_cores"`
	RequestsPerSec float64         `json:"requests_per_s"` // every call the fleet made, long polls included
	// PostgresTPS is the transactions Postgres committed a second: each
	// statement outside a transaction is one, so a parked long poll's
	// re-reads count here although no request shows them.
	PostgresTPS float64 `json:"postgres_transactions_per_s"`
	// ControllerMSPerWorkerMin and PostgresMSPerWorkerMin are CPU
	// milliseconds per worker per minute; WorkersPerCore how many such
	// workers one core of the controller carries, and one core of
	// controller and Postgres together.
	ControllerMSPerWorkerMin float64 `json:"controller_cpu_ms_per_worker_min"`
	PostgresMSPerWorkerMin   float64 `json:"postgres_cpu_ms_per_worker_min"`
	WorkersPerControllerCore float64 `json:"workers_per_controller_core"`
	WorkersPerCore           float64 `json:"workers_per_controller_and_postgres_core"`
	Answers
}

// fleetCall names, as reported.
const (
	callHeartbeat   = "heartbeat"
	callVMAuth      = "vm_auth"
	callLog         = "log_append"
	callArtifact    = "artifact_upload"
	callResult      = "result"
	callSubmit      = "submit"
	callCancel      = "cancel"
	callRegistering = "register"
)

func (e *env) fleetSettings() FleetSettings {
	c := e.cfg
	return FleetSettings{PollWaitS: c.FleetPollWait.Seconds(), HeartbeatS: c.FleetHeartbeat.Seconds(), CancelWatchS: c.FleetCancelWatch.Seconds(),
		BuildS: c.FleetBuildTime.Seconds(), BusyShare: c.FleetBusyShare, LogEveryS: c.FleetLogEvery.Seconds(), LogBytes: c.FleetLogBytes,
		ArtifactBytes: c.FleetArtifactBytes, CancelShare: c.FleetCancelShare, WindowS: c.FleetWindow.Seconds(), WarmupS: c.FleetWarmup.Seconds(),
		BudgetsDefaults: true}
}

func runFleet(ctx context.Context, e *env) (*FleetResult, error) {
	r := &FleetResult{Settings: e.fleetSettings()}
	type controller struct{ name, bin string }
	controllers := []controller{{"", e.bin}}
	if e.cfg.BaselineBin != "" {
		// Alternately, so that the machine's noise falls on both alike.
		controllers = nil
		for range e.cfg.FleetRounds {
			controllers = append(controllers, controller{"baseline", e.cfg.BaselineBin}, controller{"", e.bin})
		}
	}
	for _, n := range e.cfg.FleetWorkers {
		for _, c := range controllers {
			if err := e.resetQueue(ctx); err != nil {
				return nil, err
			}
			if err := e.checkpoint(ctx); err != nil {
				return nil, err
			}
			p, err := fleetOnce(ctx, e, n, c.bin)
			if err != nil {
				return nil, fmt.Errorf("%d workers: %w", n, err)
			}
			p.Controller = c.name
			e.logf("   N=%d%s: busy %.0f%%, %d builds, %.0f requests/s, %.0f Postgres transactions/s; CPU ms per worker-minute: controller %.1f, Postgres %.1f ⇒ one controller core carries %.0f workers; 429s %d, 5xx %d",
				n, label(c.name), 100*p.Busy, p.Builds, p.RequestsPerSec, p.PostgresTPS, p.ControllerMSPerWorkerMin, p.PostgresMSPerWorkerMin, p.WorkersPerControllerCore, p.Total429(), p.ServerErrors)
			r.Points = append(r.Points, *p)
		}
	}
	return r, nil
}

// label is a point's controller as the report shows it.
func label(controller string) string {
	if controller == "" {
		return ""
	}
	return " (" + controller + ")"
}

// fleet is one worker count's run in progress.
type fleet struct {
	e        *env
	workers  *api.Client // worker key, production controller
	vm       *api.Client // no key: VM tokens per call
	dev      *api.Client // admin key, production controller
	counts   answerCounter
	inWindow atomic.Bool
	fe       *firstError
	wg       sync.WaitGroup
	artifact []byte
	artSHA   string

	submitted sync.Map // build id → time.Time its submit was answered (not the builds filled in at the start)
	busy      atomic.Int64
	busySum   atomic.Int64 // busy workers summed over samples
	samples   atomic.Int64
	requests  atomic.Int64
	finished  atomic.Int64
	cancelled atomic.Int64
	empty     atomic.Int64
	watches   atomic.Int64

	mu      sync.Mutex
	calls   map[string][]time.Duration
	pickups []time.Duration
}

// timed runs one call, counting it and its refusals, timing it in the
// window, and waiting out 429s as the agent does.
func (f *fleet) timed(ctx context.Context, name string, call func(context.Context) error) error {
	return f.counts.retry(ctx, func(ctx context.Context) error {
		t0 := time.Now()
		err := call(ctx)
		f.requests.Add(1)
		if err == nil && name != "" && f.inWindow.Load() {
			f.record(name, time.Since(t0))
		}
		return err
	})
}

func (f *fleet) record(name string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[name] = append(f.calls[name], d)
}

// fleetOnce measures n workers against a fresh replica of binary bin with
// the production defaults.
func fleetOnce(ctx context.Context, e *env, n int, bin string) (_ *FleetPoint, err error) {
	cfg := e.cfg
	prodCtrl, workers, err := e.startProduction(ctx, bin)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, prodCtrl.stop()) }()
	f := &fleet{e: e, workers: workers, calls: map[string][]time.Duration{}}
	f.vm = &api.Client{BaseURL: workers.BaseURL, HTTP: e.hc, UserAgent: "freeagent-bench"}
	f.dev = &api.Client{BaseURL: workers.BaseURL, APIKey: e.key, HTTP: e.hc, UserAgent: "freeagent-bench"}
	f.artifact = bytes.Repeat([]byte("apk!"), int(cfg.FleetArtifactBytes/4))
	sum := sha256.Sum256(f.artifact)
	f.artSHA = hex.EncodeToString(sum[:])

	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f.fe = &firstError{cancel: cancel}

	ws, err := registerEach(ctx, n, func(ctx context.Context, i int) (w *simWorker, err error) {
		err = f.timed(ctx, callRegistering, func(ctx context.Context) (err error) {
			w, err = registerWorkerFor(ctx, workers, fmt.Sprintf("fleet-%d-%d", n, i), 1)
			return err
		})
		return w, err
	})
	if err != nil {
		return nil, err
	}
	heartbeat := cfg.FleetHeartbeat
	if heartbeat <= 0 {
		heartbeat = ws[0].heartbeatEvery
	}
	// The farm starts as busy as it will stay: a build for each busy
	// worker is waiting, and the workers arrive spread over one poll wait
	// (as they would have spread out over hours).
	if err := e.fill(ctx, int(float64(n)*cfg.FleetBusyShare)); err != nil {
		return nil, err
	}
	for _, w := range ws {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.work(ctx, w, heartbeat)
		}()
	}
	f.wg.Add(2)
	go func() {
		defer f.wg.Done()
		f.submit(ctx, float64(n)*cfg.FleetBusyShare/cfg.FleetBuildTime.Seconds())
	}()
	go func() {
		defer f.wg.Done()
		f.sampleBusy(ctx)
	}()

	p := &FleetPoint{Workers: n, HeartbeatS: heartbeat.Seconds()}
	measureErr := func() error {
		if err := api.Sleep(ctx, cfg.FleetWarmup); err != nil {
			return err
		}
		before, err := e.cpuOf(prodCtrl)
		if err != nil {
			return err
		}
		req0, fin0, can0, empty0, watch0 := f.requests.Load(), f.finished.Load(), f.cancelled.Load(), f.empty.Load(), f.watches.Load()
		tx0, err := e.commits(ctx, pgcluster.DefaultDatabase)
		if err != nil {
			return err
		}
		t0 := time.Now()
		f.inWindow.Store(true)
		if err := api.Sleep(ctx, cfg.FleetWindow); err != nil {
			return err
		}
		f.inWindow.Store(false)
		secs := time.Since(t0).Seconds()
		after, err := e.cpuOf(prodCtrl)
		if err != nil {
			return err
		}
		used := after.sub(before)
		p.CPU = used.per(secs)
		workerMinutes := float64(n) * secs / 60
		p.ControllerMSPerWorkerMin = used.controller * 1000 / workerMinutes
		p.PostgresMSPerWorkerMin = used.postgres * 1000 / workerMinutes
		if p.ControllerMSPerWorkerMin > 0 {
			p.WorkersPerControllerCore = 60_000 / p.ControllerMSPerWorkerMin
			p.WorkersPerCore = 60_000 / (p.ControllerMSPerWorkerMin + p.PostgresMSPerWorkerMin)
		}
		p.RequestsPerSec = float64(f.requests.Load()-req0) / secs
		tx1, err := e.commits(ctx, pgcluster.DefaultDatabase)
		if err != nil {
			return err
		}
		p.PostgresTPS = float64(tx1-tx0) / secs
		p.Builds, p.Canceled = f.finished.Load()-fin0, f.cancelled.Load()-can0
		p.EmptyPolls, p.CancelWatches = f.empty.Load()-empty0, f.watches.Load()-watch0
		return nil
	}()
	if err := e.settle(parent, cancel, &f.wg, f.fe, measureErr); err != nil {
		return nil, err
	}
	p.Answers = f.counts.get()
	if s := f.samples.Load(); s > 0 {
		p.Busy = float64(f.busySum.Load()) / float64(s) / float64(n)
	}
	p.Calls = map[string]Dist{}
	for name, ds := range f.calls {
		p.Calls[name] = distOf(ds)
	}
	p.Pickup = distOf(f.pickups)
	return p, nil
}

// work is one simulated worker: the agent's loop with the agent's timings.
func (f *fleet) work(ctx context.Context, w *simWorker, heartbeat time.Duration) {
	cfg := f.e.cfg
	if api.Sleep(ctx, rand.N(cfg.FleetPollWait)) != nil {
		return
	}
	for ctx.Err() == nil {
		var job *api.Job
		err := f.timed(ctx, "", func(ctx context.Context) (err error) { job, err = w.poll(ctx, cfg.FleetPollWait); return err })
		if err != nil {
			f.fail(ctx, w, err)
			return
		}
		if job == nil {
			f.empty.Add(1)
			continue
		}
		if at, ok := f.submitted.Load(job.ID); ok && f.inWindow.Load() {
			f.mu.Lock()
			f.pickups = append(f.pickups, time.Since(at.(time.Time)))
			f.mu.Unlock()
		}
		f.busy.Add(1)
		err = f.build(ctx, w, job, heartbeat)
		f.busy.Add(-1)
		if err != nil {
			f.fail(ctx, w, err)
			return
		}
	}
}

func (f *fleet) fail(ctx context.Context, w *simWorker, err error) {
	if ctx.Err() == nil {
		f.fe.set(fmt.Errorf("worker %s: %w", w.id, err))
	}
}

// build runs one build as the agent and the VM do: the first heartbeat
// acknowledges it; the VM signs in and streams its log; the worker keeps
// a cancel watch open and renews the lease; at the end the VM uploads the
// artifact and the worker reports the result (or, cancelled, stops and
// reports that).
func (f *fleet) build(ctx context.Context, w *simWorker, job *api.Job, heartbeat time.Duration) error {
	cfg := f.e.cfg
	if err := f.timed(ctx, callHeartbeat, func(ctx context.Context) error { return w.heartbeat(ctx, job) }); err != nil {
		return err
	}
	var vmToken string
	if err := f.timed(ctx, callVMAuth, func(ctx context.Context) error {
		resp, err := f.vm.VMAuth(ctx, job.ID, job.OTP)
		vmToken = resp.VMToken
		return err
	}); err != nil {
		return err
	}
	bctx, stop := context.WithCancel(ctx)
	cancelled := make(chan struct{})
	var once sync.Once
	cancelNow := func() { once.Do(func() { close(cancelled) }) }
	var side sync.WaitGroup
	sideErr := make(chan error, 3)
	run := func(loop func() error) {
		side.Add(1)
		go func() {
			defer side.Done()
			if err := loop(); err != nil && bctx.Err() == nil {
				sideErr <- err
				stop()
			}
		}()
	}
	run(func() error { // the cancel watch
		for bctx.Err() == nil {
			var resp api.CancelWatchResponse
			err := f.timed(bctx, "", func(ctx context.Context) (err error) {
				resp, err = w.c.WatchCancel(ctx, w.token, job.ID, cfg.FleetCancelWatch)
				return err
			})
			if err != nil {
				return fmt.Errorf("cancel watch: %w", err)
			}
			f.watches.Add(1)
			w.take(resp.TokenGrant)
			if resp.CancelRequested {
				cancelNow()
				return nil
			}
		}
		return nil
	})
	run(func() error { // the lease
		for api.Sleep(bctx, heartbeat) == nil {
			if err := f.timed(bctx, callHeartbeat, func(ctx context.Context) error { return w.heartbeat(ctx, job) }); err != nil {
				return err
			}
		}
		return nil
	})
	run(func() error { // the VM's live log
		line := bytes.Repeat([]byte("> Task :app:compileReleaseKotlin UP-TO-DATE ........................................\n"), max(1, cfg.FleetLogBytes/86))
		var offset int64
		for api.Sleep(bctx, cfg.FleetLogEvery) == nil {
			if err := f.timed(bctx, callLog, func(ctx context.Context) (err error) {
				offset, err = f.vm.AppendLog(ctx, job.ID, vmToken, offset, line)
				return err
			}); err != nil {
				return fmt.Errorf("log append: %w", err)
			}
		}
		return nil
	})

	took := time.NewTimer(time.Duration(float64(cfg.FleetBuildTime) * (0.5 + rand.Float64())))
	defer took.Stop()
	var err error
	select {
	case <-ctx.Done():
	case <-cancelled:
	case err = <-sideErr:
	case <-took.C:
	}
	stop()
	side.Wait()
	if err != nil || ctx.Err() != nil {
		return err
	}
	select {
	case err = <-sideErr:
		return err
	default:
	}
	res := api.Result{BuildID: job.ID, AttemptID: job.AttemptID, LeaseToken: job.LeaseToken, Success: true}
	want := api.StatusCompleted
	select {
	case <-cancelled:
		res.Success, res.ErrorCode, res.ErrorMessage, want = false, api.CodeCancelled, "cancelled; the build environment was stopped", api.StatusCancelled
	default:
		if err := f.timed(ctx, callArtifact, func(ctx context.Context) error {
			_, err := f.vm.PutArtifact(ctx, job.ID, vmToken, "app.apk", bytes.NewReader(f.artifact), int64(len(f.artifact)), f.artSHA)
			return err
		}); err != nil {
			return fmt.Errorf("artifact upload: %w", err)
		}
	}
	var got api.ResultResponse
	if err := f.timed(ctx, callResult, func(ctx context.Context) (err error) {
		got, err = w.c.Upload(ctx, w.token, res)
		return err
	}); err != nil {
		return fmt.Errorf("result: %w", err)
	}
	if got.Status != want {
		return fmt.Errorf("build %s ended %q, want %q", job.ID, got.Status, want)
	}
	if f.inWindow.Load() {
		f.finished.Add(1)
		if want == api.StatusCancelled {
			f.cancelled.Add(1)
		}
	}
	return nil
}

// submit is the developers: builds arrive at perSecond (a Poisson
// process), and a share of them is cancelled while it runs.
func (f *fleet) submit(ctx context.Context, perSecond float64) {
	cfg := f.e.cfg
	for {
		if api.Sleep(ctx, time.Duration(rand.ExpFloat64()/perSecond*float64(time.Second))) != nil {
			return
		}
		var sub api.SubmitResponse
		if err := f.timed(ctx, callSubmit, func(ctx context.Context) (err error) { sub, err = f.e.submit(ctx, f.dev); return err }); err != nil {
			if ctx.Err() == nil {
				f.fe.set(err)
			}
			return
		}
		f.submitted.Store(sub.ID, time.Now())
		if rand.Float64() >= cfg.FleetCancelShare {
			continue
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			if api.Sleep(ctx, rand.N(cfg.FleetBuildTime)) != nil {
				return
			}
			err := f.timed(ctx, callCancel, func(ctx context.Context) error { _, err := f.dev.Cancel(ctx, sub.ID); return err })
			// A build that ended first answers 409; anything else is a failure.
			if err != nil && api.StatusOf(err) != http.StatusConflict && ctx.Err() == nil {
				f.fe.set(fmt.Errorf("cancel %s: %w", sub.ID, err))
			}
		}()
	}
}

// sampleBusy counts busy workers ten times a second, for the window's
// average busy share.
func (f *fleet) sampleBusy(ctx context.Context) {
	for api.Sleep(ctx, 100*time.Millisecond) == nil {
		if f.inWindow.Load() {
			f.busySum.Add(f.busy.Load())
			f.samples.Add(1)
		}
	}
}

// cpuOf is e.cpu with ctrl as the controller measured.
func (e *env) cpuOf(ctrl *child) (cpuReading, error) {
	r, err := e.cpu()
	if err != nil {
		return r, err
	}
	r.controller, err = cpuSeconds(ctrl.pid())
	return r, err
}

// fleetCalls lists the timed calls in report order.
func fleetCalls(p FleetPoint) []string {
	order := []string{callHeartbeat, callVMAuth, callLog, callArtifact, callResult, callSubmit, callCancel, callRegistering}
	return slices.DeleteFunc(order, func(k string) bool { return p.Calls[k].N == 0 })
}
