package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

// StormResult is a farm's workers, registered with one shared worker key,
// draining a full queue as fast as they can: once against a controller
// without request budgets and once against one with the production
// defaults, alternately, in the same run. The budgets are right when the
// second drains as fast as the first and answers no worker 429.
type StormResult struct {
	Workers int        `json:"workers"`
	Builds  int        `json:"builds"`
	Runs    []StormRun `json:"runs"` // in the order run
	// Off and On are the best run of each kind; Ratio is On's rate ÷ Off's.
	Off   StormRun `json:"off"`
	On    StormRun `json:"on"`
	Ratio float64  `json:"ratio"`
}

// StormRun is one drain of the queue.
type StormRun struct {
	Limits    bool    `json:"limits"` // the production budgets, or none
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	Answers
}

// Answers counts the refusals the simulated workers met: 429s by the
// budget they named, and 5xx answers.
type Answers struct {
	Refused      map[string]int64 `json:"refused_429"`
	ServerErrors int64            `json:"server_errors"`
}

// Total429 is every 429 counted.
func (a Answers) Total429() int64 {
	var n int64
	for _, c := range a.Refused {
		n += c
	}
	return n
}

// answerCounter counts Answers from many goroutines.
type answerCounter struct {
	mu sync.Mutex
	a  Answers
}

func (c *answerCounter) note(err error) {
	var e *api.Error
	if !errors.As(err, &e) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case e.Status == http.StatusTooManyRequests:
		if c.a.Refused == nil {
			c.a.Refused = map[string]int64{}
		}
		c.a.Refused[e.Budget]++
	case e.Status >= 500:
		c.a.ServerErrors++
	}
}

func (c *answerCounter) get() Answers {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.a
	a.Refused = make(map[string]int64, len(c.a.Refused))
	for k, v := range c.a.Refused {
		a.Refused[k] = v
	}
	return a
}

// retry runs one worker call as the agent does: a 429 is waited out (at
// least its Retry-After, api.Retry) and tried again; every refusal is
// counted.
func (c *answerCounter) retry(ctx context.Context, call func(context.Context) error) error {
	return api.Retry(ctx, api.RetryPolicy{Backoff: api.Backoff{Initial: 50 * time.Millisecond, Max: time.Second, Jitter: 0.5},
		Retryable: func(err error) bool { return api.StatusOf(err) == http.StatusTooManyRequests },
		OnRetry:   func(err error, _ int, _ time.Duration) { c.note(err) },
	}, func(ctx context.Context) error {
		err := call(ctx)
		if api.StatusOf(err) >= 500 {
			c.note(err)
		}
		return err
	})
}

func runStorm(ctx context.Context, e *env) (_ *StormResult, err error) {
	cfg := e.cfg
	ctrl, prod, err := e.startProduction(ctx, e.bin)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, ctrl.stop()) }()
	// The same worker key, through the controller without budgets.
	unlimited := *prod
	unlimited.BaseURL = e.url
	r := &StormResult{Workers: cfg.StormWorkers, Builds: cfg.StormBuilds}
	for round := range cfg.StormRounds {
		for _, limits := range []bool{false, true} {
			c := &unlimited
			if limits {
				c = prod
			}
			run, err := stormOnce(ctx, e, c, fmt.Sprintf("storm-%d-%t", round, limits))
			if err != nil {
				return nil, fmt.Errorf("storm with limits %s: %w", onOff(limits), err)
			}
			run.Limits = limits
			e.logf("   limits %-3s %d builds by %d workers in %.2f s = %.0f builds/s; 429s %v, 5xx %d",
				onOff(limits), cfg.StormBuilds, cfg.StormWorkers, run.Seconds, run.PerSecond, run.Refused, run.ServerErrors)
			r.Runs = append(r.Runs, run)
			best := &r.Off
			if limits {
				best = &r.On
			}
			if run.PerSecond > best.PerSecond {
				*best = run
			}
		}
	}
	if r.Off.PerSecond > 0 {
		r.Ratio = r.On.PerSecond / r.Off.PerSecond
	}
	return r, nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// stormOnce fills the queue through the bench's own controller, then has
// the workers drain it through c and times the drain.
func stormOnce(ctx context.Context, e *env, c *api.Client, prefix string) (StormRun, error) {
	cfg := e.cfg
	if err := e.resetQueue(ctx); err != nil {
		return StormRun{}, err
	}
	if err := e.fill(ctx, cfg.StormBuilds); err != nil {
		return StormRun{}, err
	}
	var counts answerCounter
	ws, err := registerEach(ctx, cfg.StormWorkers, func(ctx context.Context, i int) (w *simWorker, err error) {
		err = counts.retry(ctx, func(ctx context.Context) (err error) {
			w, err = registerWorker(ctx, c, fmt.Sprintf("%s-%d", prefix, i))
			return err
		})
		return w, err
	})
	if err != nil {
		return StormRun{}, err
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fe := &firstError{cancel: cancel}
	var (
		left = atomic.Int64{}
		wg   sync.WaitGroup
		last atomic.Int64 // unix nanoseconds of the last completion
	)
	left.Store(int64(cfg.StormBuilds))
	start := time.Now()
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				var job *api.Job
				err := counts.retry(ctx, func(ctx context.Context) (err error) { job, err = w.poll(ctx, time.Second); return err })
				if err == nil && job != nil {
					err = counts.retry(ctx, func(ctx context.Context) error { return w.heartbeat(ctx, job) })
					if err == nil {
						err = counts.retry(ctx, func(ctx context.Context) error { return w.complete(ctx, job) })
					}
					if err == nil {
						last.Store(time.Now().UnixNano())
						if left.Add(-1) == 0 {
							cancel()
						}
					}
				}
				if err != nil && ctx.Err() == nil {
					fe.set(fmt.Errorf("worker %s: %w", w.id, err))
				}
			}
		}()
	}
	timeout := time.NewTimer(cfg.StormTimeout)
	defer timeout.Stop()
	var measureErr error
	select {
	case <-ctx.Done():
	case <-timeout.C:
		measureErr = fmt.Errorf("%d of %d builds left after %v", left.Load(), cfg.StormBuilds, cfg.StormTimeout)
	}
	if err := e.settle(parent, cancel, &wg, fe, measureErr); err != nil {
		return StormRun{}, err
	}
	secs := time.Unix(0, last.Load()).Sub(start).Seconds()
	return StormRun{Seconds: secs, PerSecond: float64(cfg.StormBuilds) / secs, Answers: counts.get()}, nil
}

// fill submits n builds through the bench's own controller (no budgets),
// a few at a time.
func (e *env) fill(ctx context.Context, n int) error {
	c := e.client()
	var next atomic.Int64
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) && errs[i] == nil {
				_, errs[i] = e.submit(ctx, c)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
