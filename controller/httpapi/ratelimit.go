package httpapi

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/freeagent-build/freeagent/controller/api"
)

// rateLimits holds the request budgets: per API key for every request it
// authenticates, and per client address for failed authentications (a key
// or token guessed, a brute force), which then shut that address out for
// a while. Budgets live in this replica's memory; each replica counts its own.
type rateLimits struct {
	perKey, perIP     rate.Limit
	keyBurst, ipBurst int
	mu                sync.Mutex
	keys, ips         map[string]*rate.Limiter
}

// errRateLimited is a request over its budget; the answer is 429 with
// Retry-After.
type errRateLimited struct {
	what  string
	retry time.Duration
}

func (e *errRateLimited) Error() string {
	return fmt.Sprintf("too many requests from this %s: retry in %d s", e.what, retrySeconds(e.retry))
}

func newRateLimits(l Limits) *rateLimits {
	return &rateLimits{perKey: rate.Limit(l.RatePerKey), keyBurst: max(l.RateKeyBurst, int(4*l.RatePerKey), 1),
		perIP: rate.Limit(l.AuthFailuresPerIP), ipBurst: max(l.AuthFailureBurst, 1),
		keys: map[string]*rate.Limiter{}, ips: map[string]*rate.Limiter{}}
}

// limiter returns m's limiter for id, making it on first use. The maps are
// bounded: when one grows past maxTracked, budgets are forgotten (everyone
// starts afresh) rather than memory growing with every address seen.
func (rl *rateLimits) limiter(m map[string]*rate.Limiter, id string, r rate.Limit, burst int) *rate.Limiter {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	l, ok := m[id]
	if !ok {
		if len(m) >= maxTracked {
			clear(m)
		}
		l = rate.NewLimiter(r, burst)
		m[id] = l
	}
	return l
}

const maxTracked = 100_000

// key charges one request to an API key's budget.
func (rl *rateLimits) key(id string) error {
	if rl.perKey <= 0 {
		return nil
	}
	l := rl.limiter(rl.keys, id, rl.perKey, rl.keyBurst)
	if l.Allow() {
		return nil
	}
	return &errRateLimited{what: "API key", retry: retryAfter(l)}
}

// shutOut reports whether the client address has used up its failed
// authentications; it charges nothing. It runs on every request, so it
// only looks: an address that never failed has no limiter and costs no
// allocation.
func (rl *rateLimits) shutOut(r *http.Request) error {
	if rl.perIP <= 0 {
		return nil
	}
	rl.mu.Lock()
	l := rl.ips[clientIP(r)]
	rl.mu.Unlock()
	if l == nil || l.Tokens() >= 1 {
		return nil
	}
	return &errRateLimited{what: "address after failed authentications", retry: retryAfter(l)}
}

// authFailed charges a failed authentication to the client address.
func (rl *rateLimits) authFailed(r *http.Request) {
	if rl.perIP > 0 {
		rl.limiter(rl.ips, clientIP(r), rl.perIP, rl.ipBurst).Allow()
	}
}

// retryAfter is how long until l has a token again.
func retryAfter(l *rate.Limiter) time.Duration {
	missing := 1 - l.Tokens()
	if missing <= 0 || l.Limit() <= 0 {
		return time.Second
	}
	return time.Duration(math.Ceil(missing/float64(l.Limit())*1000)) * time.Millisecond
}

// clientIP is the connection's peer address. Forwarded headers are not
// trusted: behind a proxy every client shares the proxy's budget for
// failed authentications, which legitimate clients do not spend.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// retrySeconds is d in whole seconds, rounded up, at least 1.
func retrySeconds(d time.Duration) int { return int(math.Max(1, math.Ceil(d.Seconds()))) }

// writeRateLimited answers 429 with Retry-After in whole seconds (at least 1).
func writeRateLimited(w http.ResponseWriter, r *http.Request, e *errRateLimited) {
	w.Header().Set("Retry-After", strconv.Itoa(retrySeconds(e.retry)))
	writeError(w, r, http.StatusTooManyRequests, api.CodeRateLimited, e.Error())
}
