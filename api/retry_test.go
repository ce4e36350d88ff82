package api

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestTransient(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"500", &Error{Status: 500}, true},
		{"502", &Error{Status: 502}, true},
		{"503 wrapped", fmt.Errorf("poll: %w", &Error{Status: 503}), true},
		{"504", &Error{Status: 504}, true},
		{"501", &Error{Status: 501}, false},
		{"429", &Error{Status: 429}, true},
		{"408", &Error{Status: 408}, true},
		{"400", &Error{Status: 400}, false},
		{"401", &Error{Status: 401}, false},
		{"403", &Error{Status: 403}, false},
		{"404", &Error{Status: 404}, false},
		{"409", &Error{Status: 409}, false},
		{"413", &Error{Status: 413}, false},
		{"422", &Error{Status: 422}, false},
		{"refused", &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}, true},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"broken pipe", syscall.EPIPE, true},
		{"DNS", &net.DNSError{Err: "no such host", Name: "x"}, true},
		{"cut short", fmt.Errorf("decode: %w", io.ErrUnexpectedEOF), true},
		{"request timeout", &url.Error{Op: "Get", URL: "http://x", Err: timeoutErr{}}, true},
		{"cancelled", context.Canceled, false},
		{"cancelled request", &url.Error{Op: "Get", URL: "http://x", Err: context.Canceled}, false},
		{"deadline", fmt.Errorf("poll: %w", context.DeadlineExceeded), true},
		{"unknown CA", &url.Error{Op: "Get", URL: "https://x", Err: x509.UnknownAuthorityError{}}, false},
		{"wrong host", &url.Error{Op: "Get", URL: "https://x", Err: x509.HostnameError{Host: "x"}}, false},
		{"local mistake", errors.New("open /nope: no such file"), false},
	} {
		if got := Transient(c.err); got != c.want {
			t.Errorf("Transient(%s: %v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestBackoffDelays(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: 0.5}
	for n, ceiling := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 60: time.Second} {
		for range 50 {
			if d := b.Delay(n); d < ceiling/2 || d > ceiling {
				t.Fatalf("Delay(%d) = %v, want within [%v, %v]", n, d, ceiling/2, ceiling)
			}
		}
	}
	if d := (Backoff{Initial: time.Second, Max: time.Minute}).Delay(3); d != 4*time.Second {
		t.Errorf("no jitter, default multiplier: Delay(3) = %v, want 4s", d)
	}
	s := Backoff{Initial: time.Second, Max: 3 * time.Second, Multiplier: 3}.Sequence()
	for _, want := range []time.Duration{time.Second, 3 * time.Second, 3 * time.Second} {
		if d := s.Next(); d != want {
			t.Errorf("Next() = %v, want %v", d, want)
		}
	}
	s.Reset()
	if d := s.Next(); d != time.Second {
		t.Errorf("after Reset, Next() = %v, want 1s", d)
	}
}

func TestRetry(t *testing.T) {
	fast := Backoff{Initial: time.Microsecond, Max: time.Microsecond}
	unavailable := &Error{Status: http.StatusServiceUnavailable}
	for _, c := range []struct {
		name      string
		policy    RetryPolicy
		errs      []error // fn's answers in turn; then success
		wantCalls int
		wantErr   error
		wantHeard int
	}{
		{"success at once", RetryPolicy{Backoff: fast, Attempts: 3}, nil, 1, nil, 0},
		{"transient, then success", RetryPolicy{Backoff: fast, Attempts: 3}, []error{unavailable, unavailable}, 3, nil, 2},
		{"attempts spent", RetryPolicy{Backoff: fast, Attempts: 3}, []error{unavailable, unavailable, unavailable, unavailable}, 3, unavailable, 2},
		{"final answer", RetryPolicy{Backoff: fast, Attempts: 3}, []error{&Error{Status: 404}}, 1, &Error{Status: 404}, 0},
		{"own classifier", RetryPolicy{Backoff: fast, Attempts: 3, Retryable: func(error) bool { return false }}, []error{unavailable}, 1, unavailable, 0},
		{"budget spent", RetryPolicy{Backoff: Backoff{Initial: time.Hour}, Budget: time.Minute}, []error{unavailable}, 1, unavailable, 0},
	} {
		calls, heard := 0, 0
		c.policy.OnRetry = func(err error, attempt int, wait time.Duration) {
			heard++
			if attempt != heard || !Transient(err) {
				t.Errorf("%s: OnRetry(%v, %d, %v)", c.name, err, attempt, wait)
			}
		}
		err := Retry(context.Background(), c.policy, func(context.Context) error {
			calls++
			if calls <= len(c.errs) {
				return c.errs[calls-1]
			}
			return nil
		})
		if calls != c.wantCalls || heard != c.wantHeard || fmt.Sprint(err) != fmt.Sprint(c.wantErr) {
			t.Errorf("%s: %d calls, %d retries heard, %v; want %d, %d, %v", c.name, calls, heard, err, c.wantCalls, c.wantHeard, c.wantErr)
		}
	}
}

// A cancelled context ends the waiting at once with fn's last error.
func TestRetryStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	policy := RetryPolicy{Backoff: Backoff{Initial: time.Hour}, OnRetry: func(error, int, time.Duration) { cancel() }}
	err := Retry(ctx, policy, func(context.Context) error { calls++; return &Error{Status: 502} })
	if calls != 1 || StatusOf(err) != 502 {
		t.Fatalf("cancelled while waiting: %d calls, %v", calls, err)
	}
}

// The controller's Retry-After (429) is read from the answer and waited
// for when it is longer than the schedule's wait.
func TestRetryHonoursRetryAfter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":"slow down","code":"rate_limited"}`)
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waited time.Duration
	err := Retry(ctx, RetryPolicy{Backoff: Backoff{Initial: time.Millisecond, Max: time.Second, Jitter: 0.5},
		OnRetry: func(_ error, _ int, wait time.Duration) { waited = wait; cancel() }},
		func(ctx context.Context) error { _, err := c.Register(ctx, RegisterRequest{}); return err })
	var e *Error
	if !errors.As(err, &e) || e.Status != 429 || e.RetryAfter != 7*time.Second || waited != 7*time.Second {
		t.Fatalf("err %v (RetryAfter %v), waited %v; want 429 with Retry-After 7s honoured", err, e, waited)
	}
	h := http.Header{}
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{"": 0, "0": 0, "120": 2 * time.Minute, "soon": 0, "-5": 0,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second, now.Add(-time.Hour).Format(http.TimeFormat): 0, "999999999": 24 * time.Hour} {
		h.Set("Retry-After", v)
		if got := ParseRetryAfter(h, now); got != want {
			t.Errorf("Retry-After %q = %v, want %v", v, got, want)
		}
	}
}

// The loops that keep their own schedule (the worker's poll, its cancel
// watch, the VM's log stream) wait at least what a 429 or 503 asked for,
// and their schedule still advances; answers that ask for less, or
// nothing, wait the schedule's time.
func TestBackoffSequenceHonoursRetryAfter(t *testing.T) {
	seq := Backoff{Initial: time.Second, Max: time.Minute}.Sequence()
	asked := &Error{Status: http.StatusTooManyRequests, Budget: "worker", RetryAfter: 7 * time.Second}
	if d := seq.After(fmt.Errorf("poll: %w", asked)); d != 7*time.Second {
		t.Fatalf("first wait after a 429 with Retry-After 7: %v", d)
	}
	if d := seq.After(&Error{Status: http.StatusServiceUnavailable, RetryAfter: time.Second}); d != 2*time.Second {
		t.Fatalf("second wait, the controller asking for less: %v, want the schedule's 2s", d)
	}
	if d := seq.After(io.ErrUnexpectedEOF); d != 4*time.Second {
		t.Fatalf("third wait, no answer: %v, want 4s", d)
	}
}

// With Progressed, Attempts bounds the consecutive failures: a failure
// after progress starts the count over, and so does the schedule.
func TestRetryProgressStartsTheCountOver(t *testing.T) {
	unavailable := &Error{Status: http.StatusServiceUnavailable}
	pos, last := 0, 0
	calls := 0
	var attempts []int
	err := Retry(context.Background(), RetryPolicy{
		Backoff:  Backoff{Initial: time.Microsecond, Max: time.Microsecond},
		Attempts: 3,
		OnRetry:  func(_ error, attempt int, _ time.Duration) { attempts = append(attempts, attempt) },
		Progressed: func() bool {
			moved := pos > last
			last = pos
			return moved
		},
	}, func(context.Context) error {
		calls++
		if calls <= 6 { // six failures, each a little further on
			pos++
		}
		return unavailable
	})
	// Six failures that moved, each the first of its run; then two that
	// did not, the third of the run, which spends the attempts.
	if calls != 8 || StatusOf(err) != 503 {
		t.Fatalf("%d calls, %v; want 8 calls ending with the 503", calls, err)
	}
	if want := "[1 1 1 1 1 1 2]"; fmt.Sprint(attempts) != want {
		t.Errorf("attempts heard %v, want %s", attempts, want)
	}
}
