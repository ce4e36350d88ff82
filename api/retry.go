package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Backoff is the one retry schedule of every client of the controller
// (worker, freeagent-vm, expo-build): the first wait is Initial, each next
// one Multiplier times the last, at most Max; Jitter is the share of each
// wait drawn at random, so many clients recovering from one outage do not
// come back in lockstep (0.5: a wait of d is drawn from [d/2, d]).
type Backoff struct {
	Initial, Max time.Duration
	Multiplier   float64 // ≤ 1: 2
	Jitter       float64 // 0 to 1
}

// Delay is the wait before retry n (1: the first retry), jitter included.
func (b Backoff) Delay(n int) time.Duration {
	d := b.ceiling(n)
	j := min(max(b.Jitter, 0), 1)
	if d <= 0 || j == 0 {
		return d
	}
	spread := time.Duration(float64(d) * j)
	return d - spread + rand.N(spread+1)
}

// ceiling is the wait before retry n without jitter.
func (b Backoff) ceiling(n int) time.Duration {
	m := b.Multiplier
	if m <= 1 {
		m = 2
	}
	d := float64(b.Initial) * math.Pow(m, float64(max(n, 1)-1))
	if b.Max > 0 && d > float64(b.Max) {
		return b.Max
	}
	return time.Duration(min(d, math.MaxInt64/2))
}

// Sequence starts the schedule for a loop that keeps its own state (the
// worker's poll loop): Next gives each wait in turn, Reset starts over
// after a success.
func (b Backoff) Sequence() *BackoffSequence { return &BackoffSequence{b: b} }

// BackoffSequence is a Backoff in progress. It is not safe for concurrent use.
type BackoffSequence struct {
	b Backoff
	n int
}

// Next is the wait before the next retry.
func (s *BackoffSequence) Next() time.Duration {
	s.n++
	return s.b.Delay(s.n)
}

// After is the wait before repeating a call that failed with err: the
// next wait, or longer when the controller asked for longer (a 429's or a
// 503's Retry-After).
func (s *BackoffSequence) After(err error) time.Duration { return atLeastAsked(err, s.Next()) }

// atLeastAsked is wait, or err's Retry-After when that is longer.
func atLeastAsked(err error, wait time.Duration) time.Duration {
	var e *Error
	if errors.As(err, &e) && e.RetryAfter > wait {
		return e.RetryAfter
	}
	return wait
}

// Reset makes the next wait the first one again.
func (s *BackoffSequence) Reset() { s.n = 0 }

// RetryPolicy says how Retry repeats a call: on the Backoff schedule, at
// most Attempts calls (0: no limit) and within Budget (0: none), for the
// errors Retryable accepts (nil: Transient).
type RetryPolicy struct {
	Backoff
	// Attempts bounds the consecutive failed calls: with Progressed set, a
	// failure after progress starts the count (and the schedule) over.
	Attempts int
	// Budget bounds the whole: a wait that would end more than Budget
	// after the first call is not started and the last error is returned.
	Budget    time.Duration
	Retryable func(error) bool
	// OnRetry, when set, hears about each failure that will be retried:
	// the error, the attempt that failed (1: the first) and the wait.
	OnRetry func(err error, attempt int, wait time.Duration)
	// Progressed, when set, is asked after each retryable failure whether
	// that call got further than the one before (bytes of a resumable
	// transfer arrived). If so the failure is the first of a new run: a
	// long transfer over a flaky link is bounded by consecutive failures,
	// not by all of them. Budget still bounds the whole.
	Progressed func() bool
}

// Retry calls fn until it succeeds, fails with an error not worth
// repeating, the attempts or the budget are spent, or ctx ends; it returns
// fn's last error (nil on success). Attempts and the waits count the
// failures since the last progress (see Progressed). Callers that report a cancellation
// differently check ctx themselves. A controller that asked for a longer
// wait (429 or 503 with Retry-After) gets it.
func Retry(ctx context.Context, p RetryPolicy, fn func(context.Context) error) error {
	retryable := p.Retryable
	if retryable == nil {
		retryable = Transient
	}
	start := time.Now()
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil || ctx.Err() != nil || !retryable(err) {
			return err
		}
		if p.Progressed != nil && p.Progressed() {
			attempt = 1
		}
		if p.Attempts > 0 && attempt >= p.Attempts {
			return err
		}
		wait := atLeastAsked(err, p.Delay(attempt))
		if p.Budget > 0 && time.Since(start)+wait > p.Budget {
			return err
		}
		if p.OnRetry != nil {
			p.OnRetry(err, attempt, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// Sleep waits d or until ctx ends, then returns ctx's cause: the one wait
// of the loops that poll on a schedule of their own.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// Transient reports whether a call to the controller that failed with err
// may succeed when repeated: network trouble (refused, reset, timed out,
// cut short) and the answers that say "later" — 5xx except 501 Not
// Implemented, 429 Too Many Requests and 408 Request Timeout. Other
// answers (4xx) are final, and so is a cancelled context (the caller gave
// up; a deadline is a timeout, transient) and a certificate the TLS handshake refused (the fix is the URL or
// the trusted CAs).
func Transient(err error) bool {
	if err == nil {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		s := e.Status
		return (s >= 500 && s != http.StatusNotImplemented) || s == http.StatusTooManyRequests || s == http.StatusRequestTimeout
	}
	if errors.Is(err, context.Canceled) || CertificateError(err) {
		return false
	}
	// Timeouts (context.DeadlineExceeded is a net.Error too) are
	// transient: a caller whose own deadline passed stops by its context,
	// as Retry does.
	var ne net.Error
	var ue *url.Error
	return errors.As(err, &ne) || errors.As(err, &ue) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// CertificateError reports a certificate the TLS handshake refused:
// repeating the call will not help, and the fix is the URL or the trusted
// CAs.
func CertificateError(err error) bool {
	var ve *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &ve) || errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci)
}

// ParseRetryAfter reads a Retry-After header: seconds or an HTTP date; 0
// when absent or unreadable. Clients of other services (the stores) read
// theirs with it, so api.Retry honours them alike.
func ParseRetryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(min(n, 24*3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), 24*time.Hour)
	}
	return 0
}
