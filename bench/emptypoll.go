package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/httpapi"
)

// EmptyPollResult is the cost of polls that find nothing.
type EmptyPollResult struct {
	Clients   int     `json:"clients"`
	Seconds   float64 `json:"seconds"`
	Polls     int64   `json:"polls"`
	PerSecond float64 `json:"per_second"`
	Latency   Dist    `json:"latency"`
	// CPU seconds per 1000 empty polls: the controller process, the whole
	// Postgres server (postmaster, backends, helpers), their sum, and the
	// load generator for reference.
	ControllerCPUPer1000 float64 `json:"controller_cpu_s_per_1000"`
	PostgresCPUPer1000   float64 `json:"postgres_cpu_s_per_1000"`
	CPUPer1000           float64 `json:"cpu_s_per_1000"`
	BenchCPUPer1000      float64 `json:"bench_cpu_s_per_1000"`
	// Cores is the average cores each party kept busy meanwhile.
	Cores CPUSplit `json:"cpu_cores"`
	// IdleWorkersPerCore estimates how many idle, long-polling workers one
	// core of controller + Postgres time sustains: a parked poll re-checks
	// the queue every PollBackstop and is renewed every PollMaxWait, each
	// costing at most one empty poll.
	IdleWorkersPerCore float64 `json:"idle_workers_per_core"`
}

func runEmptyPoll(ctx context.Context, e *env) (*EmptyPollResult, error) {
	cfg := e.cfg
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fe := &firstError{cancel: cancel}
	c := e.client()
	ws, err := registerWorkers(ctx, c, "empty", cfg.EmptyPollClients)
	if err != nil {
		return nil, err
	}
	var (
		inWindow atomic.Bool
		polls    atomic.Int64
		wg       sync.WaitGroup
		lat      = make([][]time.Duration, len(ws))
	)
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				job, err := w.poll(ctx, 0)
				if err == nil && job != nil {
					err = fmt.Errorf("got build %s from a queue that should be empty", job.ID)
				}
				if err != nil {
					if ctx.Err() == nil {
						fe.set(fmt.Errorf("worker %s: %w", w.id, err))
					}
					return
				}
				if inWindow.Load() {
					lat[i] = append(lat[i], time.Since(t0))
					polls.Add(1)
				}
			}
		}()
	}
	r := &EmptyPollResult{Clients: len(ws)}
	var used cpuReading
	measureErr := func() error {
		if err := api.Sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
		before, err := e.cpu()
		if err != nil {
			return err
		}
		t0 := time.Now()
		inWindow.Store(true)
		if err := api.Sleep(ctx, cfg.EmptyPollDuration); err != nil {
			return err
		}
		inWindow.Store(false)
		r.Seconds = time.Since(t0).Seconds()
		after, err := e.cpu()
		used = after.sub(before)
		return err
	}()
	if err := e.settle(parent, cancel, &wg, fe, measureErr); err != nil {
		return nil, err
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	r.Polls = polls.Load()
	if r.Polls == 0 {
		return nil, fmt.Errorf("no poll completed in %.1fs", r.Seconds)
	}
	r.PerSecond = float64(r.Polls) / r.Seconds
	r.Latency = distOf(all)
	k := 1000 / float64(r.Polls)
	r.ControllerCPUPer1000, r.PostgresCPUPer1000, r.BenchCPUPer1000 = used.controller*k, used.postgres*k, used.bench*k
	r.CPUPer1000 = r.ControllerCPUPer1000 + r.PostgresCPUPer1000
	r.Cores = used.per(r.Seconds)
	lim := httpapi.DefaultLimits()
	pollsPerIdleWorker := 1/lim.PollBackstop.Seconds() + 1/lim.PollMaxWait.Seconds()
	if r.CPUPer1000 > 0 {
		r.IdleWorkersPerCore = 1 / (pollsPerIdleWorker * r.CPUPer1000 / 1000)
	}
	e.logf("   %.0f empty polls/s; %.3f CPU-s per 1000 (controller %.3f + Postgres %.3f)",
		r.PerSecond, r.CPUPer1000, r.ControllerCPUPer1000, r.PostgresCPUPer1000)
	return r, nil
}
