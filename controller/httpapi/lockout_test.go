package httpapi_test

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/serve"
)

// TestLockoutBehindProxy: behind a proxy every request arrives from the
// proxy's address. With --trusted-proxies naming it, a guesser's failed
// authentications are charged to the client its X-Forwarded-For names,
// so others are not locked out; and even from the guesser's own address a
// valid key is served (only more wrong keys meet the spent budget).
// Without --trusted-proxies the header is ignored: the budget is the
// peer's, and still refuses no valid key.
func TestLockoutBehindProxy(t *testing.T) {
	t.Parallel()
	for _, trusted := range []bool{true, false} {
		t.Run(map[bool]string{true: "trusted", false: "untrusted"}[trusted], func(t *testing.T) {
			t.Parallel()
			c := controllertest.Start(t, controllertest.Configure(func(cfg *serve.Config) {
				if trusted {
					cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
				}
			}))
			// The production budget: 20 failures at once, then one a second.
			get := func(key, forwardedFor string) *http.Response {
				t.Helper()
				req, err := http.NewRequest(http.MethodGet, c.URL+"/api/builds", nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set(api.HeaderAPIKey, key)
				req.Header.Set("X-Forwarded-For", forwardedFor)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp
			}
			const guesser, colleague = "203.0.113.9", "198.51.100.4"
			var last *http.Response
			for i := range 22 {
				// The untrusted case varies the claimed address: it must not matter.
				from := guesser
				if !trusted {
					from = netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}).String()
				}
				last = get("fak_guessed", from)
			}
			if last.StatusCode != http.StatusTooManyRequests || last.Header.Get("Retry-After") == "" {
				t.Fatalf("the 22nd wrong key from one client: %d (Retry-After %q), want 429", last.StatusCode, last.Header.Get("Retry-After"))
			}
			if resp := get(c.AdminKey, colleague); resp.StatusCode != http.StatusOK {
				t.Fatalf("the admin key from another client through the proxy: %d, want 200", resp.StatusCode)
			}
			if resp := get(c.AdminKey, guesser); resp.StatusCode != http.StatusOK {
				t.Fatalf("the admin key from the guesser's own address: %d, want 200", resp.StatusCode)
			}
			if resp := get(c.DeveloperKey, guesser+", 10.0.0.1"); resp.StatusCode != http.StatusOK {
				t.Fatalf("a developer key: %d, want 200", resp.StatusCode)
			}
			wantColleague := http.StatusUnauthorized // a budget of its own
			if !trusted {
				wantColleague = http.StatusTooManyRequests // one budget: the proxy's
			}
			if resp := get("fak_typo", colleague); resp.StatusCode != wantColleague {
				t.Fatalf("a wrong key from another client: %d, want %d", resp.StatusCode, wantColleague)
			}
			// A client cannot pose as another by writing the header itself:
			// the proxy appends the address it saw, and that one counts.
			if resp := get("fak_guessed", colleague+", "+guesser); resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("the guesser claiming another address: %d, want 429", resp.StatusCode)
			}
		})
	}
}
