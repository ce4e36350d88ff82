package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

// CancelResult is how fast a running build ends after a developer cancels
// it: the worker keeps the agent's cancel watch open (GET
// /api/workers/builds/{id}/cancel) and reports the build cancelled as soon
// as it answers.
type CancelResult struct {
	// Latency runs from just before the developer's Cancel call to the
	// worker's report being answered with the build cancelled.
	Latency Dist `json:"latency"`
}

func runCancel(ctx context.Context, e *env) (*CancelResult, error) {
	c := e.client()
	w, err := registerWorker(ctx, c, "cancel")
	if err != nil {
		return nil, err
	}
	var took []time.Duration
	for range e.cfg.CancelSamples {
		d, err := cancelOnce(ctx, e, c, w)
		if err != nil {
			return nil, err
		}
		took = append(took, d)
	}
	r := &CancelResult{Latency: distOf(took)}
	e.logf("   cancel request → build cancelled: %v", r.Latency)
	return r, nil
}

// cancelOnce runs one build to the point where it builds, cancels it and
// measures until the build is cancelled.
func cancelOnce(ctx context.Context, e *env, c *api.Client, w *simWorker) (time.Duration, error) {
	job, err := e.startBuild(ctx, c, w, 10*time.Second)
	if err != nil {
		return 0, err
	}
	type ended struct {
		at  time.Time
		err error
	}
	done := make(chan ended, 1)
	// The agent's side: the watch, then the report of the stopped build.
	go func() {
		for {
			resp, err := w.c.WatchCancel(ctx, w.token, job.ID, 25*time.Second)
			if err != nil {
				done <- ended{err: fmt.Errorf("cancel watch: %w", err)}
				return
			}
			w.take(resp.TokenGrant)
			if !resp.CancelRequested {
				continue
			}
			res, err := w.c.Upload(ctx, w.token, api.Result{BuildID: job.ID, AttemptID: job.AttemptID, LeaseToken: job.LeaseToken,
				ErrorCode: api.CodeCancelled, ErrorMessage: "cancelled; the build environment was stopped"})
			if err == nil && res.Status != api.StatusCancelled {
				err = fmt.Errorf("the stopped build ended %q, want cancelled", res.Status)
			}
			done <- ended{at: time.Now(), err: err}
			return
		}
	}()
	t0 := time.Now()
	if _, err := c.Cancel(ctx, job.ID); err != nil {
		return 0, fmt.Errorf("cancel: %w", err)
	}
	select {
	case r := <-done:
		return r.at.Sub(t0), r.err
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("build %s was not cancelled within 30 s", job.ID)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}
