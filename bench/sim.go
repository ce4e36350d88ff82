package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

// simWorker is a simulated worker: the agent's protocol without VMs. One
// goroutine owns each.
type simWorker struct {
	c     *api.Client
	id    string
	token string
	exp   time.Time
	// heartbeatEvery is the interval the controller asked for.
	heartbeatEvery time.Duration
}

// The tiny artifact every simulated build uploads.
const (
	resultName    = "result.txt"
	resultContent = "ok\n"
)

func registerWorker(ctx context.Context, c *api.Client, name string) (*simWorker, error) {
	return registerWorkerFor(ctx, c, name, 64)
}

// registerWorkerFor registers a worker that holds at most maxBuilds builds.
func registerWorkerFor(ctx context.Context, c *api.Client, name string, maxBuilds int) (*simWorker, error) {
	resp, err := c.Register(ctx, api.RegisterRequest{Name: name, Capabilities: api.Capabilities{
		Platforms: []string{api.PlatformIOS, api.PlatformAndroid}, MaxConcurrentBuilds: maxBuilds, CPUCores: 2, MemoryGB: 8}})
	if err != nil {
		return nil, fmt.Errorf("register worker: %w", err)
	}
	return &simWorker{c: c, id: resp.ID, token: resp.AccessToken, exp: resp.TokenExpiresAt,
		heartbeatEvery: time.Duration(resp.HeartbeatIntervalSeconds) * time.Second}, nil
}

// registerWorkers registers n workers concurrently.
func registerWorkers(ctx context.Context, c *api.Client, prefix string, n int) ([]*simWorker, error) {
	return registerEach(ctx, n, func(ctx context.Context, i int) (*simWorker, error) {
		return registerWorker(ctx, c, fmt.Sprintf("%s-%d", prefix, i))
	})
}

// registerEach registers n workers concurrently, the i-th with register(i).
func registerEach(ctx context.Context, n int, register func(ctx context.Context, i int) (*simWorker, error)) ([]*simWorker, error) {
	ws := make([]*simWorker, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws[i], errs[i] = register(ctx, i)
		}()
	}
	wg.Wait()
	return ws, errors.Join(errs...)
}

// take keeps the grant with the latest expiry (docs/design.md: answers may
// arrive out of order; never move back to an older token).
func (w *simWorker) take(g api.TokenGrant) {
	if g.AccessToken != "" && !g.TokenExpiresAt.Before(w.exp) {
		w.token, w.exp = g.AccessToken, g.TokenExpiresAt
	}
}

func (w *simWorker) poll(ctx context.Context, wait time.Duration) (*api.Job, error) {
	resp, err := w.c.Poll(ctx, w.token, wait)
	if err != nil {
		return nil, fmt.Errorf("poll: %w", err)
	}
	w.take(resp.TokenGrant)
	return resp.Job, nil
}

func (w *simWorker) heartbeat(ctx context.Context, j *api.Job) error {
	resp, err := w.c.Heartbeat(ctx, w.token, api.HeartbeatRequest{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken, Phase: "building"})
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	w.take(resp.TokenGrant)
	return nil
}

// complete reports success with the tiny result file.
func (w *simWorker) complete(ctx context.Context, j *api.Job) error {
	resp, err := w.c.Upload(ctx, w.token, api.Result{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken,
		Success: true, FileName: resultName, File: strings.NewReader(resultContent)})
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	if resp.Status != api.StatusCompleted {
		return fmt.Errorf("upload: build %s ended %q, want completed", j.ID, resp.Status)
	}
	return nil
}

func (e *env) submit(ctx context.Context, c *api.Client) (api.SubmitResponse, error) {
	resp, err := c.Submit(ctx, api.SubmitRequest{Platform: api.PlatformAndroid, Source: bytes.NewReader(e.source)})
	if err != nil {
		return resp, fmt.Errorf("submit: %w", err)
	}
	return resp, nil
}

// startBuild submits one build, has w claim it within wait and report it
// building: the opening of every phase that follows a single build.
func (e *env) startBuild(ctx context.Context, c *api.Client, w *simWorker, wait time.Duration) (*api.Job, error) {
	sub, err := e.submit(ctx, c)
	if err != nil {
		return nil, err
	}
	job, err := w.poll(ctx, wait)
	if err != nil {
		return nil, err
	}
	if job == nil || job.ID != sub.ID {
		return nil, fmt.Errorf("the worker %s did not claim build %s", w.id, sub.ID)
	}
	if err := w.heartbeat(ctx, job); err != nil {
		return nil, err
	}
	return job, nil
}

// Dist summarises a latency distribution, in milliseconds.
type Dist struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
}

func (d Dist) String() string {
	if d.N == 0 {
		return "no samples"
	}
	return fmt.Sprintf("p50 %s  p90 %s  p99 %s  max %s  (n=%d)", ms(d.P50), ms(d.P90), ms(d.P99), ms(d.Max), d.N)
}

func ms(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case a >= 10:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.2f ms", v)
	}
}

// distOf computes a Dist with nearest-rank percentiles.
func distOf(ds []time.Duration) Dist {
	if len(ds) == 0 {
		return Dist{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return toMS(s[max(0, min(i, len(s)-1))])
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Dist{N: len(s), Mean: toMS(sum / time.Duration(len(s))), P50: rank(0.50), P90: rank(0.90), P99: rank(0.99), Max: toMS(s[len(s)-1])}
}

func toMS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// firstError keeps the first error of a group of goroutines and cancels
// the group's context when it arrives.
type firstError struct {
	mu     sync.Mutex
	err    error
	cancel context.CancelFunc
}

func (f *firstError) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
		f.cancel()
	}
}

func (f *firstError) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// settle ends a phase's load and returns the first failure among the
// caller's context, the load's goroutines, the measurement and the
// controller process itself.
func (e *env) settle(parent context.Context, cancel context.CancelFunc, wg *sync.WaitGroup, fe *firstError, measureErr error) error {
	cancel()
	wg.Wait()
	if err := parent.Err(); err != nil {
		return err
	}
	if err := fe.get(); err != nil {
		return err
	}
	if measureErr != nil {
		return measureErr
	}
	return e.alive()
}
