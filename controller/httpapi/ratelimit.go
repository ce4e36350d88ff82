package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/freeagent-build/freeagent/api"
)

// rateLimits holds the request budgets, each fitted to who is asking:
//   - per worker (its registration) for the worker protocol, so the workers
//     of a farm, which usually share one worker key, do not share one
//     budget: a worker in a loop is throttled alone;
//   - per API key for every other request a key authenticates (a
//     developer's script, a dashboard, an admin, a worker's registration);
//   - per client address (clientAddr) for failed authentications (a key
//     or token guessed, a brute force). An address over its budget has its
//     next failures answered 429 instead of 401, until the budget refills;
//     a request whose credentials are valid is served all the same, so a
//     guesser behind a shared address (a proxy, a NAT) locks out no one but
//     itself.
//
// Budgets live in this replica's memory; each replica counts its own, and
// a restarted one starts everyone afresh.
type rateLimits struct {
	perKey, perWorker, perIP       rate.Limit
	keyBurst, workerBurst, ipBurst int
	trusted                        []netip.Prefix // proxies whose X-Forwarded-For is believed
	mu                             sync.Mutex
	keys, workers, ips             map[string]*rate.Limiter
}

// The budgets, as a 429's answer names them (api.ErrorResponse.Budget).
const (
	budgetKey     = "api_key"
	budgetWorker  = "worker"
	budgetAddress = "address"
)

// errRateLimited is a request over its budget; the answer is 429 with
// Retry-After, naming the budget and the setting that sizes it.
type errRateLimited struct {
	budget string // budgetKey, budgetWorker or budgetAddress
	what   string // whose budget, in words
	limit  rate.Limit
	flag   string // the controller setting that sizes it
	retry  time.Duration
}

func (e *errRateLimited) Error() string {
	return fmt.Sprintf("too many requests from %s (its budget: %g a second, --%s): retry in %d s",
		e.what, float64(e.limit), e.flag, retrySeconds(e.retry))
}

func newRateLimits(l Limits, trusted []netip.Prefix) *rateLimits {
	return &rateLimits{perKey: rate.Limit(l.RatePerKey), keyBurst: max(l.RateKeyBurst, int(4*l.RatePerKey), 1),
		perWorker: rate.Limit(l.RatePerWorker), workerBurst: max(l.RateWorkerBurst, int(4*l.RatePerWorker), 1),
		perIP: rate.Limit(l.AuthFailuresPerIP), ipBurst: max(l.AuthFailureBurst, 1), trusted: trusted,
		keys: map[string]*rate.Limiter{}, workers: map[string]*rate.Limiter{}, ips: map[string]*rate.Limiter{}}
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
	return &errRateLimited{budget: budgetKey, what: "this API key", limit: rl.perKey, flag: "rate-per-key", retry: retryAfter(l)}
}

// worker charges one worker-protocol request to the worker's own budget;
// nil while it has some left.
func (rl *rateLimits) worker(id string) *errRateLimited {
	if rl.perWorker <= 0 {
		return nil
	}
	l := rl.limiter(rl.workers, id, rl.perWorker, rl.workerBurst)
	if l.Allow() {
		return nil
	}
	return rl.workerRefusal(id, l)
}

// workerRoom is worker without the charge: nil while the worker has room
// in its budget, else the refusal its next charged request would get.
func (rl *rateLimits) workerRoom(id string) *errRateLimited {
	if rl.perWorker <= 0 {
		return nil
	}
	l := rl.limiter(rl.workers, id, rl.perWorker, rl.workerBurst)
	if l.Tokens() >= 1 {
		return nil
	}
	return rl.workerRefusal(id, l)
}

func (rl *rateLimits) workerRefusal(id string, l *rate.Limiter) *errRateLimited {
	return &errRateLimited{budget: budgetWorker, what: "worker " + id, limit: rl.perWorker, flag: "rate-per-worker", retry: retryAfter(l)}
}

// authFailed charges a failed authentication to the client address and
// says whether the address has spent its budget: then the failure is
// answered 429 rather than 401. Only failures are charged, and only after
// the credentials were checked, so an over-budget address costs what any
// request costs (one hash and one indexed lookup) and a valid key from it
// is never refused.
func (rl *rateLimits) authFailed(r *http.Request) *errRateLimited {
	if rl.perIP <= 0 {
		return nil
	}
	l := rl.limiter(rl.ips, rl.clientAddr(r).String(), rl.perIP, rl.ipBurst)
	if l.Allow() {
		return nil
	}
	return &errRateLimited{budget: budgetAddress, what: "this address after failed authentications", limit: rl.perIP,
		flag: "auth-failures-per-ip", retry: retryAfter(l)}
}

// retryAfter is how long until l has a token again.
func retryAfter(l *rate.Limiter) time.Duration {
	missing := 1 - l.Tokens()
	if missing <= 0 || l.Limit() <= 0 {
		return time.Second
	}
	return time.Duration(math.Ceil(missing/float64(l.Limit())*1000)) * time.Millisecond
}

// clientAddr is the address a request is charged to. From a trusted
// proxy it is the right-most X-Forwarded-For address that is not itself a
// trusted proxy (each proxy appends the address it was reached from; what
// lies left of the first untrusted one is the client's to invent). From
// any other peer it is the peer's address, whatever the request claims.
func (rl *rateLimits) clientAddr(r *http.Request) netip.Addr {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{} // not a TCP peer (a test's handler call): one shared budget
	}
	addr := peer.Addr().Unmap().WithZone("")
	if !rl.isTrusted(addr) {
		return addr
	}
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		list := strings.Split(hops[i], ",")
		for j := len(list) - 1; j >= 0; j-- {
			hop, ok := parseHop(list[j])
			if !ok {
				return addr // a hop no proxy wrote: trust nothing left of it
			}
			if addr = hop; !rl.isTrusted(hop) {
				return hop
			}
		}
	}
	return addr
}

func (rl *rateLimits) isTrusted(a netip.Addr) bool {
	for _, p := range rl.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseHop reads one X-Forwarded-For entry: an address, possibly with a
// port ("203.0.113.7:51234", "[2001:db8::1]:443"), as some proxies write.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	return netip.Addr{}, false
}

// retrySeconds is d in whole seconds, rounded up, at least 1.
func retrySeconds(d time.Duration) int { return int(math.Max(1, math.Ceil(d.Seconds()))) }

// writeRateLimited answers 429 with Retry-After in whole seconds (at least
// 1), naming the budget spent.
func writeRateLimited(w http.ResponseWriter, _ *http.Request, e *errRateLimited) {
	w.Header().Set("Retry-After", strconv.Itoa(retrySeconds(e.retry)))
	writeJSON(w, http.StatusTooManyRequests, api.ErrorResponse{Error: e.Error(), Code: api.CodeRateLimited, Budget: e.budget})
}
