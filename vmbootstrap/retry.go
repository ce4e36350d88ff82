package vmbootstrap

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/freeagent-build/freeagent/controller/api"
)

// backoff yields exponentially growing delays with full jitter in
// [d/2, d], between min and max.
type backoff struct {
	min, max time.Duration
	next     time.Duration
}

func newBackoff(min, max time.Duration) *backoff { return &backoff{min: min, max: max, next: min} }

func (b *backoff) delay() time.Duration {
	d := b.next
	if b.next *= 2; b.next > b.max {
		b.next = b.max
	}
	return d/2 + rand.N(d/2+1)
}

func (b *backoff) reset() { b.next = b.min }

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// transient reports whether a controller call may succeed when repeated:
// network trouble, 5xx, 408 and 429. Other answers (4xx) are final.
func transient(err error) bool {
	switch {
	case err == nil, isDiskError(err):
		return false
	case errors.Is(err, errChecksum):
		return true // corrupted on the way: fetch or send again
	}
	var e *api.Error
	if errors.As(err, &e) {
		return e.Status >= 500 || e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout
	}
	// Network errors, and per-request timeouts while the caller's own
	// context is still alive (callers check that context themselves).
	return true
}

// retry calls f until it succeeds, fails with a non-transient error, ctx
// ends, or the budget is spent (then the last error is returned). onRetry,
// when set, hears about each failure that will be retried.
func retry(ctx context.Context, budget time.Duration, f func(ctx context.Context) error, onRetry func(err error, wait time.Duration)) error {
	deadline := time.Now().Add(budget)
	b := newBackoff(250*time.Millisecond, 10*time.Second)
	for {
		err := f(ctx)
		if err == nil || !transient(err) {
			return err
		}
		if ctx.Err() != nil {
			return err
		}
		wait := b.delay()
		if time.Now().Add(wait).After(deadline) {
			return err
		}
		if onRetry != nil {
			onRetry(err, wait)
		}
		if serr := sleep(ctx, wait); serr != nil {
			return err
		}
	}
}
