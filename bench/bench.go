// Package bench measures the controller end to end on the machine it runs on:
// full build lifecycles per second over HTTP, pickup latency of parked long
// polls, the cost of empty polls, a storm of workers sharing one key with
// and without request budgets, what a fleet of hundreds of workers costs
// the controller, claim latency against a huge queue, the
// controller's memory while a 2 GiB artifact streams through it, transfers
// through the controller and with S3 against a copy + fsync of the same
// bytes, and the Postgres ceiling of the same SQL driven by pgbench.
//
// It drives the product from outside (HTTP, the controller binary, SQL)
// and is no part of it: it lives outside controller/ and no release
// builds it.
//
// Everything runs against a durable private Postgres cluster and the real
// controller binary as a child process (so its RSS and CPU are its own), and
// is torn down at the end, also when the context is cancelled. The load
// generator shares the machine's cores with both; that is part of the
// measurement.
//
// Run is a measurement, not a test: figures that miss their target are
// reported as MISS, and only errors make it fail.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

// Phase names, for Config.Skip.
const (
	PhaseLifecycle = "lifecycle"
	PhasePickup    = "pickup"
	PhaseCancel    = "cancel"
	PhaseEmptyPoll = "emptypoll"
	PhaseArtifact  = "artifact"
	PhaseTransfer  = "transfer"
	PhasePgbench   = "pgbench"
	PhaseClaim     = "claim"
	PhaseStorm     = "storm"
	PhaseFleet     = "fleet"
)

// Phases lists every phase in the order Run runs them. The claim phase comes
// last because it leaves a million pending rows behind.
func Phases() []string {
	return []string{PhaseLifecycle, PhasePickup, PhaseCancel, PhaseEmptyPoll, PhaseStorm, PhaseFleet, PhaseArtifact, PhaseTransfer, PhasePgbench, PhaseClaim}
}

// Shape is a lifecycle load: simulated workers and submitters.
type Shape struct {
	Workers    int `json:"workers"`
	Submitters int `json:"submitters"`
}

func (s Shape) String() string { return fmt.Sprintf("W=%d S=%d", s.Workers, s.Submitters) }

// Config says what to measure and how hard. DefaultConfig is the full run;
// SmokeConfig a seconds-long one that only proves the benchmark works.
type Config struct {
	// Lifecycle throughput (submit → claim → heartbeat → complete).
	Duration time.Duration // measured window
	Warmup   time.Duration // load before the window starts
	// Workers and Submitters fix the load; when either is 0, the Sweep
	// shapes are tried for SweepDuration each and the best one is used.
	Workers, Submitters int
	Sweep               []Shape
	SweepDuration       time.Duration
	// Backlog bounds builds submitted but not yet completed (submitters
	// wait for room), so the queue stays short and steady as in a real
	// farm instead of growing for the whole run. 0 means 2 × workers.
	Backlog  int
	PollWait time.Duration // long-poll wait of the simulated workers

	// Pickup latency: idle workers parked in long polls, builds submitted
	// one at a time.
	PickupWorkers int
	PickupSamples int
	PickupSpacing time.Duration

	// Cancel latency: builds cancelled one at a time while they run.
	CancelSamples int

	// Empty-poll cost: clients polling an empty queue with wait=0.
	EmptyPollClients  int
	EmptyPollDuration time.Duration

	// Storm: StormWorkers workers sharing one worker key drain StormBuilds
	// queued builds, without request budgets and with the production
	// ones, StormRounds times each, each drain within StormTimeout.
	StormWorkers, StormBuilds, StormRounds int
	StormTimeout                           time.Duration

	// Fleet: for each of FleetWorkers, that many simulated workers with
	// the agent's request mix at the product's defaults, against a
	// controller with the production budgets: long polls of FleetPollWait,
	// a cancel watch of FleetCancelWatch per build, heartbeats every
	// FleetHeartbeat (0: what the controller asks), the VM's log of
	// FleetLogBytes every FleetLogEvery while building, an artifact of
	// FleetArtifactBytes per build; builds of FleetBuildTime on average
	// keep FleetBusyShare of the workers busy, and FleetCancelShare of
	// them are cancelled. Measured for FleetWindow after FleetWarmup.
	FleetWorkers                     []int
	FleetPollWait, FleetCancelWatch  time.Duration
	FleetHeartbeat, FleetBuildTime   time.Duration
	FleetLogEvery                    time.Duration
	FleetLogBytes                    int
	FleetArtifactBytes               int64
	FleetBusyShare, FleetCancelShare float64
	FleetWindow, FleetWarmup         time.Duration

	// Claim latency against ClaimSmall and then ClaimLarge pending builds.
	ClaimSmall, ClaimLarge, ClaimSamples int

	// ArtifactBytes are uploaded and downloaded through the controller
	// while its RSS is sampled every RSSInterval.
	ArtifactBytes int64
	RSSInterval   time.Duration

	// TransferBytes are moved through the controller (file store) and
	// compared with a copy + fsync on the same disk, then moved with an
	// S3 store (a versitygw started for the run, VersitygwPath or found
	// on PATH / in GOPATH/bin) while the controller's CPU is counted.
	TransferBytes int64
	VersitygwPath string

	// pgbench ceiling: the lifecycle's SQL (lifecycle.pgbench) for each of
	// PgbenchClients for PgbenchDuration; the best rate is the ceiling.
	PgbenchClients  []int
	PgbenchDuration time.Duration
	PgbenchMode     string // pgbench -M: simple, extended or prepared (pgx, the controller's driver, prepares)
	PgbenchPath     string // "" → pgbench next to the Postgres server binaries

	// ControllerBin is a built freeagent-controller; "" builds one with
	// `go build` (the working directory must be inside the module).
	ControllerBin string
	// ControllerTags are build tags for the controller it builds, e.g.
	// freeagent_noaudit to measure the cost of the audit log.
	ControllerTags string
	// BaselineBin is another freeagent-controller (an older build, on the
	// same schema) the fleet phase measures too: each worker count against
	// it and against this one, alternately, FleetRounds times each, for
	// before and after figures from one run on a noisy machine.
	BaselineBin string
	FleetRounds int
	TempDir     string   // parent of the run's temporary directory; "" → os.TempDir()
	Skip        []string // phases not to run
	Log         io.Writer
	Trace       bool // log per-second progress of the lifecycle run
}

// DefaultConfig is the full benchmark (about three minutes on 2 cores).
func DefaultConfig() Config {
	return Config{
		Duration:          20 * time.Second,
		Warmup:            2 * time.Second,
		Sweep:             []Shape{{8, 2}, {12, 3}, {16, 4}, {32, 4}},
		SweepDuration:     3 * time.Second,
		PollWait:          10 * time.Second,
		PickupWorkers:     8,
		PickupSamples:     200,
		PickupSpacing:     50 * time.Millisecond,
		CancelSamples:     100,
		EmptyPollClients:  8,
		EmptyPollDuration: 5 * time.Second,
		StormWorkers:      40,
		StormBuilds:       400,
		StormRounds:       2,
		StormTimeout:      5 * time.Minute,
		// The agent's long poll and cancel watch (agent.Config.PollWait),
		// the VM's log flush (vmbootstrap's
		// FlushInterval); a few hundred bytes of log a second is a quiet
		// Gradle or xcodebuild. Builds are shorter than real ones (minutes)
		// so that a window sees enough claims and results: the churn, and
		// so the figures, are pessimistic.
		FleetWorkers:       []int{100, 300},
		FleetRounds:        2,
		FleetPollWait:      25 * time.Second,
		FleetCancelWatch:   25 * time.Second,
		FleetBuildTime:     60 * time.Second,
		FleetLogEvery:      time.Second,
		FleetLogBytes:      860,
		FleetArtifactBytes: 1 << 20,
		FleetBusyShare:     0.3,
		FleetCancelShare:   0.05,
		FleetWindow:        60 * time.Second,
		FleetWarmup:        30 * time.Second,
		ClaimSmall:         1_000,
		ClaimLarge:         1_000_000,
		ClaimSamples:       200,
		ArtifactBytes:      2 << 30,
		TransferBytes:      256 << 20,
		RSSInterval:        50 * time.Millisecond,
		PgbenchClients:     []int{2, 4, 8},
		PgbenchDuration:    15 * time.Second,
		PgbenchMode:        "prepared",
	}
}

// SmokeConfig runs every phase briefly, to prove the benchmark still works.
func SmokeConfig() Config {
	c := DefaultConfig()
	c.Duration, c.Warmup = 2*time.Second, 500*time.Millisecond
	c.Workers, c.Submitters, c.Sweep = 4, 2, nil
	c.PickupWorkers, c.PickupSamples, c.PickupSpacing = 4, 20, 20*time.Millisecond
	c.CancelSamples = 10
	c.EmptyPollClients, c.EmptyPollDuration = 4, time.Second
	c.StormWorkers, c.StormBuilds, c.StormRounds, c.StormTimeout = 20, 300, 1, time.Minute // beyond a shared key's burst of 400
	c.FleetWorkers, c.FleetWindow, c.FleetWarmup = []int{20}, 3*time.Second, 2*time.Second
	c.FleetPollWait, c.FleetCancelWatch, c.FleetHeartbeat, c.FleetBuildTime = 2*time.Second, 2*time.Second, 500*time.Millisecond, 1500*time.Millisecond
	c.FleetLogEvery, c.FleetArtifactBytes, c.FleetBusyShare, c.FleetCancelShare = 200*time.Millisecond, 16<<10, 0.5, 0.2
	c.ClaimSmall, c.ClaimLarge, c.ClaimSamples = 100, 1_000, 20
	c.ArtifactBytes = 16 << 20
	c.TransferBytes = 80 << 20 // over the multipart threshold: the S3 upload goes in parts
	c.PgbenchClients, c.PgbenchDuration = []int{2}, 2*time.Second
	return c
}

func (c *Config) check() error {
	var errs []error
	if c.Duration <= 0 || c.Warmup < 0 {
		errs = append(errs, errors.New("duration must be > 0 and warm-up ≥ 0"))
	}
	if (c.Workers <= 0 || c.Submitters <= 0) && len(c.Sweep) == 0 {
		errs = append(errs, errors.New("give workers and submitters, or shapes to sweep"))
	}
	for _, s := range c.Sweep {
		if s.Workers <= 0 || s.Submitters <= 0 {
			errs = append(errs, fmt.Errorf("sweep shape %v: both counts must be > 0", s))
		}
	}
	if c.Workers > 0 && c.Submitters > 0 && c.Backlog < 0 {
		errs = append(errs, errors.New("backlog must be ≥ 0"))
	}
	if c.PollWait < time.Second {
		errs = append(errs, errors.New("poll wait must be at least 1s (the API counts whole seconds)"))
	}
	if c.PickupWorkers <= 0 || c.PickupSamples <= 0 || c.EmptyPollClients <= 0 || c.EmptyPollDuration <= 0 {
		errs = append(errs, errors.New("pickup workers/samples and empty-poll clients/duration must be > 0"))
	}
	if c.StormWorkers <= 0 || c.StormBuilds <= 0 || c.StormRounds <= 0 || c.StormTimeout <= 0 {
		errs = append(errs, errors.New("storm workers, builds, rounds and timeout must be > 0"))
	}
	if c.FleetRounds <= 0 {
		errs = append(errs, errors.New("fleet rounds must be > 0"))
	}
	if len(c.FleetWorkers) == 0 || slices.ContainsFunc(c.FleetWorkers, func(n int) bool { return n <= 0 }) {
		errs = append(errs, errors.New("fleet worker counts must be > 0"))
	}
	if c.FleetPollWait < time.Second || c.FleetCancelWatch < time.Second {
		errs = append(errs, errors.New("fleet poll wait and cancel watch must be at least 1s (the API counts whole seconds)"))
	}
	if c.FleetBuildTime <= 0 || c.FleetLogEvery <= 0 || c.FleetWindow <= 0 || c.FleetWarmup < 0 || c.FleetHeartbeat < 0 ||
		c.FleetLogBytes <= 0 || c.FleetArtifactBytes <= 0 {
		errs = append(errs, errors.New("fleet build time, log interval and size, artifact size and window must be > 0, heartbeat and warm-up ≥ 0"))
	}
	if c.FleetBusyShare <= 0 || c.FleetBusyShare > 1 || c.FleetCancelShare < 0 || c.FleetCancelShare > 1 {
		errs = append(errs, errors.New("fleet busy share must be in (0, 1] and cancel share in [0, 1]"))
	}
	if c.CancelSamples <= 0 {
		errs = append(errs, errors.New("cancel samples must be > 0"))
	}
	if c.ClaimSmall <= 0 || c.ClaimLarge < c.ClaimSmall || c.ClaimSamples <= 0 || c.ClaimSamples > c.ClaimSmall {
		errs = append(errs, errors.New("claim sizes: need 0 < samples ≤ small ≤ large"))
	}
	if c.TransferBytes <= 0 {
		errs = append(errs, errors.New("transfer size must be > 0"))
	}
	if c.ArtifactBytes <= 0 || c.RSSInterval <= 0 {
		errs = append(errs, errors.New("artifact size and RSS interval must be > 0"))
	}
	if len(c.PgbenchClients) == 0 || slices.ContainsFunc(c.PgbenchClients, func(n int) bool { return n <= 0 }) || c.PgbenchDuration < time.Second {
		errs = append(errs, errors.New("pgbench needs client counts > 0 and a duration ≥ 1s"))
	}
	switch c.PgbenchMode {
	case "simple", "extended", "prepared":
	default:
		errs = append(errs, fmt.Errorf("pgbench mode %q: use simple, extended or prepared", c.PgbenchMode))
	}
	for _, p := range c.Skip {
		if !slices.Contains(Phases(), p) {
			errs = append(errs, fmt.Errorf("unknown phase %q to skip (phases: %s)", p, strings.Join(Phases(), ", ")))
		}
	}
	return errors.Join(errs...)
}

func (c *Config) runs(phase string) bool { return !slices.Contains(c.Skip, phase) }

// Report is everything one run measured. Absent phases are nil.
type Report struct {
	StartedAt    time.Time        `json:"started_at"`
	Seconds      float64          `json:"seconds"` // the whole run, setup and teardown included
	Machine      Machine          `json:"machine"`
	Lifecycle    *LifecycleResult `json:"lifecycle,omitempty"`
	Pickup       *PickupResult    `json:"pickup,omitempty"`
	Cancel       *CancelResult    `json:"cancel,omitempty"`
	EmptyPoll    *EmptyPollResult `json:"empty_poll,omitempty"`
	Storm        *StormResult     `json:"storm,omitempty"`
	Fleet        *FleetResult     `json:"fleet,omitempty"`
	Artifact     *ArtifactResult  `json:"artifact,omitempty"`
	Transfer     *TransferResult  `json:"transfer,omitempty"`
	Pgbench      *PgbenchResult   `json:"pgbench,omitempty"`
	Claim        *ClaimResult     `json:"claim,omitempty"`
	Summary      []SummaryRow     `json:"summary"`
	SetupSeconds float64          `json:"setup_seconds"`
}

// Machine describes where the figures come from.
type Machine struct {
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"go_version"`
	Postgres  string `json:"postgres"`
	Durable   bool   `json:"durable"`            // fsync and synchronous_commit on
	Revision  string `json:"revision,omitempty"` // git describe of the working tree measured
	// BusyAtStart is how many cores other processes kept busy just before
	// the run: a benchmark on a shared machine measures the sharing too.
	BusyAtStart float64 `json:"busy_cores_at_start"`
}

// Run sets everything up, runs the phases and tears everything down. The
// report holds whatever finished when an error stopped the run.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	cfg.Log = &syncWriter{w: cfg.Log} // the controller's warnings arrive from another goroutine
	rep = &Report{StartedAt: time.Now(), Machine: Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(),
		Durable: true, Revision: revision(ctx)}}
	defer func() { rep.Seconds = time.Since(rep.StartedAt).Seconds() }()
	if busy, err := busyCores(ctx, 500*time.Millisecond); err == nil {
		rep.Machine.BusyAtStart = busy
		if busy > 0.3 {
			fmt.Fprintf(cfg.Log, "bench: warning: other processes keep %.1f of %d cores busy; the figures will be pessimistic\n", busy, runtime.NumCPU())
		}
	}
	e, err := setup(ctx, cfg)
	if err != nil {
		return rep, err
	}
	defer func() {
		err = errors.Join(err, e.close())
	}()
	rep.SetupSeconds = time.Since(rep.StartedAt).Seconds()
	rep.Machine.Postgres = e.pgVersion
	err = runPhases(ctx, e, rep)
	if err != nil {
		err = errors.Join(err, e.alive()) // a crashed controller explains the error
	}
	rep.Summary = summarize(rep)
	return rep, err
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// revision describes the source tree (git describe --always --dirty), or
// is empty outside a git checkout.
func revision(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// busyCores measures how many cores the machine keeps busy over d
// (including time stolen by the hypervisor).
func busyCores(ctx context.Context, d time.Duration) (float64, error) {
	a, as, err := machineCPU()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := api.Sleep(ctx, d); err != nil {
		return 0, err
	}
	b, bs, err := machineCPU()
	return (b + bs - a - as) / time.Since(start).Seconds(), err
}

func runPhases(ctx context.Context, e *env, rep *Report) error {
	cfg := e.cfg
	type phase struct {
		name string
		run  func() error
	}
	phases := []phase{
		{PhaseLifecycle, func() (err error) { rep.Lifecycle, err = runLifecyclePhase(ctx, e); return }},
		{PhasePickup, func() (err error) { rep.Pickup, err = runPickup(ctx, e); return }},
		{PhaseCancel, func() (err error) { rep.Cancel, err = runCancel(ctx, e); return }},
		{PhaseEmptyPoll, func() (err error) { rep.EmptyPoll, err = runEmptyPoll(ctx, e); return }},
		{PhaseStorm, func() (err error) { rep.Storm, err = runStorm(ctx, e); return }},
		{PhaseFleet, func() (err error) { rep.Fleet, err = runFleet(ctx, e); return }},
		{PhaseArtifact, func() (err error) { rep.Artifact, err = runArtifact(ctx, e); return }},
		{PhaseTransfer, func() (err error) { rep.Transfer, err = runTransfer(ctx, e); return }},
		{PhasePgbench, func() (err error) {
			rep.Pgbench, err = runPgbench(ctx, e)
			if rep.Pgbench != nil && rep.Lifecycle != nil && rep.Pgbench.BestPerSecond > 0 {
				rep.Pgbench.Ratio = rep.Lifecycle.PerSecond / rep.Pgbench.BestPerSecond
			}
			return
		}},
		{PhaseClaim, func() (err error) { rep.Claim, err = runClaim(ctx, e); return }},
	}
	for _, p := range phases {
		if !cfg.runs(p.name) {
			continue
		}
		start := time.Now()
		e.logf("== %s", p.name)
		if err := e.resetQueue(ctx); err != nil {
			return fmt.Errorf("%s: reset queue: %w", p.name, err)
		}
		if err := e.checkpoint(ctx); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		if err := p.run(); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		e.logf("   %s took %.1fs", p.name, time.Since(start).Seconds())
	}
	return nil
}
