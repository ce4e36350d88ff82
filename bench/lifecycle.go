package bench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/pgcluster"
)

// LifecycleResult is the full-lifecycle throughput over HTTP.
type LifecycleResult struct {
	Shape
	Backlog   int     `json:"backlog"`
	Seconds   float64 `json:"seconds"`   // the measured window
	Completed int64   `json:"completed"` // lifecycles completed in it
	PerSecond float64 `json:"per_second"`
	// Requests are client-side latencies of the calls made in the window;
	// "poll" only counts polls that returned a job.
	Requests   map[string]Dist `json:"requests"`
	EmptyPolls int64           `json:"empty_polls"` // polls in the window that returned no job
	// CommitsPerLifecycle is the controller database's committed
	// transactions per completed lifecycle (from pg_stat_database; the
	// reaper's and the benchmark's own are included).
	CommitsPerLifecycle float64 `json:"commits_per_lifecycle"`
	// CPU is how many cores each party kept busy on average in the window;
	// CPUPerLifecycle the same as CPU milliseconds per completed lifecycle,
	// a figure that other load on the machine disturbs much less than the
	// rate.
	CPU             CPUSplit     `json:"cpu_cores"`
	CPUPerLifecycle CPUSplit     `json:"cpu_ms_per_lifecycle"`
	Sweep           []SweepPoint `json:"sweep,omitempty"`
}

// CPUSplit divides CPU time between the parties: as average cores busy, or
// as CPU milliseconds per unit of work.
type CPUSplit struct {
	Controller float64 `json:"controller"`
	Postgres   float64 `json:"postgres"`
	Bench      float64 `json:"bench"` // the load generator (this process; pgbench in the pgbench phase)
	// Other is every other process: well above 0.1 core means someone
	// else competed for the CPUs and the figures are pessimistic.
	Other float64 `json:"other"`
	// Kernel is kernel threads, interrupts and softirqs: mostly the
	// loopback network and disk writes done for the parties above.
	Kernel float64 `json:"kernel"`
	// Stolen is time the hypervisor gave to other guests: noise too.
	Stolen float64 `json:"stolen"`
}

// SweepPoint is one shape tried to pick the load.
type SweepPoint struct {
	Shape
	PerSecond float64 `json:"per_second"`
}

func runLifecyclePhase(ctx context.Context, e *env) (*LifecycleResult, error) {
	cfg := e.cfg
	best := Shape{Workers: cfg.Workers, Submitters: cfg.Submitters}
	var sweep []SweepPoint
	if best.Workers <= 0 || best.Submitters <= 0 {
		bestRate := -1.0
		for _, s := range cfg.Sweep {
			if cfg.Workers > 0 {
				s.Workers = cfg.Workers
			}
			if cfg.Submitters > 0 {
				s.Submitters = cfg.Submitters
			}
			if err := e.resetQueue(ctx); err != nil {
				return nil, err
			}
			r, err := runLifecycles(ctx, e, s, time.Second, cfg.SweepDuration)
			if err != nil {
				return nil, fmt.Errorf("sweep %v: %w", s, err)
			}
			e.logf("   sweep %v: %.0f lifecycles/s", s, r.PerSecond)
			sweep = append(sweep, SweepPoint{Shape: s, PerSecond: r.PerSecond})
			if r.PerSecond > bestRate {
				best, bestRate = s, r.PerSecond
			}
		}
	}
	if err := e.resetQueue(ctx); err != nil {
		return nil, err
	}
	if err := e.checkpoint(ctx); err != nil {
		return nil, err
	}
	r, err := runLifecycles(ctx, e, best, cfg.Warmup, cfg.Duration)
	if err != nil {
		return nil, err
	}
	r.Sweep = sweep
	e.logf("   %v: %d lifecycles in %.1fs = %.0f/s", best, r.Completed, r.Seconds, r.PerSecond)
	return r, nil
}

// lcStats is what one load goroutine saw in the measured window.
type lcStats struct {
	submit, poll, heartbeat, upload []time.Duration
	empty                           int64
}

// runLifecycles drives shape.Workers workers (poll → heartbeat → upload) and
// shape.Submitters submitters for warmup + window and counts the lifecycles
// completed in the window.
func runLifecycles(ctx context.Context, e *env, shape Shape, warmup, window time.Duration) (*LifecycleResult, error) {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fe := &firstError{cancel: cancel}
	c := e.client()
	ws, err := registerWorkers(ctx, c, "lifecycle", shape.Workers)
	if err != nil {
		return nil, err
	}
	backlog := e.cfg.Backlog
	if backlog <= 0 {
		backlog = 2 * shape.Workers
	}
	// A submitter takes a slot per build; a worker gives one back per
	// completion. The queue never holds more than backlog builds.
	slots := make(chan struct{}, backlog)
	for range backlog {
		slots <- struct{}{}
	}
	var (
		inWindow  atomic.Bool
		completed atomic.Int64
		wg        sync.WaitGroup
		stats     = make([]lcStats, shape.Workers+shape.Submitters)
	)
	lap := func(rec bool, d *[]time.Duration, since time.Time) time.Time {
		now := time.Now()
		if rec {
			*d = append(*d, now.Sub(since))
		}
		return now
	}
	for i, w := range ws {
		st := &stats[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				job, err := w.poll(ctx, e.cfg.PollWait)
				rec := inWindow.Load()
				if err == nil && job == nil {
					if rec {
						st.empty++
					}
					continue
				}
				if err == nil {
					t1 := lap(rec, &st.poll, t0)
					if err = w.heartbeat(ctx, job); err == nil {
						t2 := lap(rec, &st.heartbeat, t1)
						if err = w.complete(ctx, job); err == nil {
							lap(rec, &st.upload, t2)
							completed.Add(1)
							select {
							case slots <- struct{}{}:
							default:
							}
						}
					}
				}
				if err != nil {
					if ctx.Err() == nil {
						fe.set(fmt.Errorf("worker %s: %w", w.id, err))
					}
					return
				}
			}
		}()
	}
	for i := range shape.Submitters {
		st := &stats[shape.Workers+i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-slots:
				case <-ctx.Done():
					return
				}
				t0 := time.Now()
				if _, err := e.submit(ctx, c); err != nil {
					if ctx.Err() == nil {
						fe.set(err)
					}
					return
				}
				lap(inWindow.Load(), &st.submit, t0)
			}
		}()
	}

	r := &LifecycleResult{Shape: shape, Backlog: backlog}
	measureErr := func() error {
		if err := api.Sleep(ctx, warmup); err != nil {
			return err
		}
		before, err := e.snapshot(ctx)
		if err != nil {
			return err
		}
		c0, t0 := completed.Load(), time.Now()
		inWindow.Store(true)
		if e.cfg.Trace {
			// Per-second completions, to see the rate drift or stall.
			prev := c0
			for end := t0.Add(window); time.Until(end) > 0; {
				if err := api.Sleep(ctx, min(time.Second, time.Until(end))); err != nil {
					return err
				}
				now := completed.Load()
				e.logf("   t=%4.1fs %5d lifecycles", time.Since(t0).Seconds(), now-prev)
				prev = now
			}
		} else if err := api.Sleep(ctx, window); err != nil {
			return err
		}
		inWindow.Store(false)
		c1, t1 := completed.Load(), time.Now()
		after, err := e.snapshot(ctx)
		if err != nil {
			return err
		}
		r.Seconds = t1.Sub(t0).Seconds()
		r.Completed = c1 - c0
		r.PerSecond = float64(r.Completed) / r.Seconds
		if r.Completed > 0 {
			r.CommitsPerLifecycle = float64(after.commits-before.commits) / float64(r.Completed)
		}
		used := after.cpu.sub(before.cpu)
		r.CPU = used.per(r.Seconds)
		if r.Completed > 0 {
			r.CPUPerLifecycle = used.per(float64(r.Completed) / 1000)
		}
		return nil
	}()
	if err := e.settle(parent, cancel, &wg, fe, measureErr); err != nil {
		return nil, err
	}
	var all lcStats
	for _, s := range stats {
		all.submit = append(all.submit, s.submit...)
		all.poll = append(all.poll, s.poll...)
		all.heartbeat = append(all.heartbeat, s.heartbeat...)
		all.upload = append(all.upload, s.upload...)
		all.empty += s.empty
	}
	r.Requests = map[string]Dist{"submit": distOf(all.submit), "poll": distOf(all.poll),
		"heartbeat": distOf(all.heartbeat), "upload": distOf(all.upload)}
	r.EmptyPolls = all.empty
	return r, nil
}

// snapshot is a reading of the counters a window is measured with.
type snapshot struct {
	commits int64
	cpu     cpuReading
}

type cpuReading struct {
	controller, postgres, bench float64
	processes, kthreads         float64 // every process, and the kernel threads among them
	busy, steal                 float64 // the machine
}

func (a cpuReading) sub(b cpuReading) cpuReading {
	return cpuReading{a.controller - b.controller, a.postgres - b.postgres, a.bench - b.bench,
		a.processes - b.processes, a.kthreads - b.kthreads, a.busy - b.busy, a.steal - b.steal}
}

// other is the CPU of processes that are neither ours nor the kernel's.
func (a cpuReading) other() float64 {
	return max(0, a.processes-a.kthreads-a.controller-a.postgres-a.bench)
}

// kernel is kernel threads plus interrupt time no process is charged with.
func (a cpuReading) kernel() float64 { return a.kthreads + max(0, a.busy-a.processes) }

// per divides the CPU seconds by n (seconds for cores busy, thousands of
// lifecycles for milliseconds per lifecycle).
func (a cpuReading) per(n float64) CPUSplit {
	return CPUSplit{Controller: a.controller / n, Postgres: a.postgres / n, Bench: a.bench / n,
		Other: a.other() / n, Kernel: a.kernel() / n, Stolen: a.steal / n}
}

// Total is the CPU of the controller, Postgres and the load generator.
func (c CPUSplit) Total() float64 { return c.Controller + c.Postgres + c.Bench }

func (e *env) snapshot(ctx context.Context) (snapshot, error) {
	var s snapshot
	var err error
	if s.commits, err = e.commits(ctx, pgcluster.DefaultDatabase); err != nil {
		return s, err
	}
	s.cpu, err = e.cpu()
	return s, err
}

// cpu reads the CPU seconds used so far by the controller, the Postgres
// server with all its processes, and this process.
func (e *env) cpu() (cpuReading, error) {
	var r cpuReading
	var err error
	if e.ctrl != nil { // nil when the controller runs in this process (the profiling harness)
		if r.controller, err = cpuSeconds(e.ctrl.pid()); err != nil {
			return r, err
		}
	}
	pm, err := e.postmasterPID()
	if err != nil {
		return r, err
	}
	if r.postgres, err = treeCPUSeconds(pm); err != nil {
		return r, err
	}
	if r.bench, err = cpuSeconds(os.Getpid()); err != nil {
		return r, err
	}
	if r.busy, r.steal, err = machineCPU(); err != nil {
		return r, err
	}
	r.processes, r.kthreads, err = processesCPU()
	return r, err
}
