package vmbootstrap

import (
	"context"
	"errors"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

// retrySchedule is the waits between tries of a controller call: a quarter
// of a second at first, doubling up to 10 s, with jitter.
var retrySchedule = api.Backoff{Initial: 250 * time.Millisecond, Max: 10 * time.Second, Jitter: 0.5}

// transient reports whether a step that calls the controller may succeed
// when repeated. The controller's answers are classified by api.Transient
// (5xx but 501, 408, 429); a full or failing disk here is final; anything
// else — network trouble, a transfer that stalled or was cut short, bytes
// corrupted on the way, an object store's refusal of a signed URL — is
// worth another try while the caller's context is alive (retry checks it).
func transient(err error) bool {
	var e *api.Error
	switch {
	case err == nil, isDiskError(err):
		return false
	case errors.Is(err, errChecksum):
		return true // corrupted on the way: fetch or send again
	case errors.As(err, &e):
		return api.Transient(err)
	}
	return true
}

// retry calls f until it succeeds, fails with a non-transient error, ctx
// ends, or the budget is spent (then the last error is returned). onRetry,
// when set, hears about each failure that will be retried.
func retry(ctx context.Context, budget time.Duration, f func(ctx context.Context) error, onRetry func(err error, wait time.Duration)) error {
	p := api.RetryPolicy{Backoff: retrySchedule, Budget: budget, Retryable: transient}
	if onRetry != nil {
		p.OnRetry = func(err error, _ int, wait time.Duration) { onRetry(err, wait) }
	}
	return api.Retry(ctx, p, f)
}
