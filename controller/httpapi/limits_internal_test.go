package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"
)

// A zero Limits is the production one; Off turns the limits that can be off
// into the 0 the handlers read as "no limit"; set values stay.
func TestLimitsWithDefaults(t *testing.T) {
	if got := (Limits{}).withDefaults(); got != DefaultLimits() {
		t.Fatalf("zero limits: %+v, want %+v", got, DefaultLimits())
	}
	off := Limits{RatePerKey: Off, RatePerWorker: Off, AuthFailuresPerIP: Off, BodyGrace: Off, ArtifactsPerBuild: Off}.withDefaults()
	if off.RatePerKey != 0 || off.RatePerWorker != 0 || off.AuthFailuresPerIP != 0 || off.BodyGrace != 0 || off.ArtifactsPerBuild != 0 {
		t.Fatalf("limits set Off: %+v", off)
	}
	if off.Source != DefaultLimits().Source || off.PollMaxWait != DefaultLimits().PollMaxWait {
		t.Fatalf("the other limits of an Off one: %+v", off)
	}
	set := Limits{Source: 1 << 10, PollBackstop: time.Millisecond, RatePerKey: 0.5, BodyGrace: time.Second}.withDefaults()
	if set.Source != 1<<10 || set.PollBackstop != time.Millisecond || set.RatePerKey != 0.5 || set.BodyGrace != time.Second {
		t.Fatalf("set limits changed: %+v", set)
	}
	// A size or wait cannot be off: a negative one takes the default too.
	if neg := (Limits{Source: -1, PollMaxWait: -time.Second}).withDefaults(); neg.Source != DefaultLimits().Source || neg.PollMaxWait != DefaultLimits().PollMaxWait {
		t.Fatalf("negative sizes: %+v", neg)
	}
}

// TestClientAddr: the address a request is charged to. X-Forwarded-For
// counts only from a trusted proxy, read from the right, past the trusted
// hops, across repeated headers; ports and mapped addresses are the same
// client; a hop no proxy could have written stops the walk.
func TestClientAddr(t *testing.T) {
	rl := newRateLimits(Limits{}, []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8")})
	for _, c := range []struct {
		peer string
		xff  []string
		want string
	}{
		{"192.0.2.1:5000", []string{"203.0.113.9"}, "192.0.2.1"},               // untrusted peer: header ignored
		{"127.0.0.1:5000", nil, "127.0.0.1"},                                   // a proxy's own request
		{"127.0.0.1:5000", []string{"203.0.113.9"}, "203.0.113.9"},             // one proxy
		{"127.0.0.1:5000", []string{"6.6.6.6, 203.0.113.9"}, "203.0.113.9"},    // the client's own claim is left of it
		{"127.0.0.1:5000", []string{"203.0.113.9, 10.1.2.3"}, "203.0.113.9"},   // two proxies (Caddy, then an ingress)
		{"127.0.0.1:5000", []string{"203.0.113.9", "10.1.2.3"}, "203.0.113.9"}, // repeated headers
		{"127.0.0.1:5000", []string{"[2001:db8::7]:443"}, "2001:db8::7"},
		{"127.0.0.1:5000", []string{"203.0.113.9:51234"}, "203.0.113.9"},
		{"[::ffff:127.0.0.1]:5000", []string{"::ffff:203.0.113.9"}, "203.0.113.9"},
		{"127.0.0.1:5000", []string{"garbage, 10.1.2.3"}, "10.1.2.3"}, // nothing trusted left of a bad hop
		{"127.0.0.1:5000", []string{"10.1.2.3"}, "10.1.2.3"},          // every hop trusted: the left-most
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = c.peer
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := rl.clientAddr(r).String(); got != c.want {
			t.Errorf("peer %s, X-Forwarded-For %q: charged to %s, want %s", c.peer, c.xff, got, c.want)
		}
	}
	none := newRateLimits(Limits{}, nil)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr, r.Header["X-Forwarded-For"] = "127.0.0.1:5000", []string{"203.0.113.9"}
	if got := none.clientAddr(r).String(); got != "127.0.0.1" {
		t.Errorf("no trusted proxies: charged to %s, want the peer", got)
	}
}
