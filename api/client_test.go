package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// recorder is a server that notes the credentials each request carried.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen map[string]http.Header // path → headers
}

func newRecorder(t *testing.T, handle func(w http.ResponseWriter, r *http.Request) bool) *recorder {
	rec := &recorder{seen: map[string]http.Header{}}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.seen[r.URL.Path] = r.Header.Clone()
		rec.mu.Unlock()
		if handle == nil || !handle(w, r) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{}`))
		}
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (r *recorder) headers(path string) (http.Header, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.seen[path]
	return h, ok
}

// TestNoCredentialsAcrossOrigins: a redirect on an ordinary API path (not
// a presigned download) to another origin — another port of the same
// host, here — gets none of the controller's credentials, whatever the
// status (302, 307, 308) and the call; nor does a hop back to the
// controller after it. A redirect within the controller keeps them.
func TestNoCredentialsAcrossOrigins(t *testing.T) {
	other := newRecorder(t, nil)
	var ctrl, bounce *recorder
	ctrl = newRecorder(t, func(w http.ResponseWriter, r *http.Request) bool {
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/builds/away"):
			http.Redirect(w, r, other.URL+"/landed"+r.URL.Path, http.StatusFound)
		case strings.HasPrefix(r.URL.Path, "/api/builds/temp"):
			http.Redirect(w, r, other.URL+"/landed"+r.URL.Path, http.StatusTemporaryRedirect)
		case r.URL.Path == "/api/workers/heartbeat":
			http.Redirect(w, r, other.URL+"/landed/heartbeat", http.StatusPermanentRedirect)
		case r.URL.Path == "/api/builds/bounce":
			http.Redirect(w, r, bounce.URL+"/elsewhere", http.StatusTemporaryRedirect)
		case r.URL.Path == "/api/builds/inside":
			http.Redirect(w, r, "/api/builds/moved", http.StatusFound)
		default:
			return false
		}
		return true
	})
	bounce = newRecorder(t, func(w http.ResponseWriter, r *http.Request) bool {
		http.Redirect(w, r, ctrl.URL+"/api/builds/back", http.StatusTemporaryRedirect)
		return true
	})
	ctx := context.Background()
	cookie := map[string]string{"Authorization": "Bearer sekrit", "Cookie": "fa_session=sekrit"}
	leaked := func(h http.Header) []string {
		var got []string
		for _, k := range credentialHeaders {
			if h.Get(k) != "" {
				got = append(got, k)
			}
		}
		return got
	}

	key := &Client{BaseURL: ctrl.URL, APIKey: "fa_dev_key"}
	tok := &Client{BaseURL: ctrl.URL, BuildToken: "fa_build_token"}
	for _, tc := range []struct {
		name, landed string
		call         func() error
	}{
		{"302, API key", "/landed/api/builds/away1", func() error { _, err := key.GetBuild(ctx, "away1"); return err }},
		{"307, build token", "/landed/api/builds/temp2", func() error { _, err := tok.GetBuild(ctx, "temp2"); return err }},
		{"308 POST, worker token", "/landed/heartbeat", func() error {
			_, err := key.Heartbeat(ctx, "fa_worker_token", HeartbeatRequest{BuildID: "b"})
			return err
		}},
		{"302, Authorization and Cookie", "/landed/api/builds/away3", func() error {
			req, err := key.NewRequest(ctx, http.MethodGet, "/api/builds/away3", nil, cookie)
			if err != nil {
				return err
			}
			resp, err := key.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}},
	} {
		if err := tc.call(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		h, ok := other.headers(tc.landed)
		if !ok {
			t.Fatalf("%s: the redirect was not followed to %s", tc.name, tc.landed)
		}
		if got := leaked(h); len(got) > 0 {
			t.Errorf("%s: %v went to another origin", tc.name, got)
		}
	}

	// Away and back: the controller sees the second visit without credentials.
	if _, err := key.GetBuild(ctx, "bounce"); err != nil {
		t.Fatal(err)
	}
	if h, ok := bounce.headers("/elsewhere"); !ok || len(leaked(h)) > 0 {
		t.Errorf("the hop away carried %v (reached: %v)", leaked(h), ok)
	}
	if h, ok := ctrl.headers("/api/builds/back"); !ok || len(leaked(h)) > 0 {
		t.Errorf("after a hop to another origin, the next hop carried %v (reached: %v)", leaked(h), ok)
	}

	// Within the controller the credentials stay (the check above can fail).
	req, _ := key.NewRequest(ctx, http.MethodGet, "/api/builds/inside", nil, cookie)
	if resp, err := key.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	if h, ok := ctrl.headers("/api/builds/moved"); !ok || h.Get(HeaderAPIKey) != "fa_dev_key" || h.Get("Cookie") == "" {
		t.Errorf("a redirect within the controller lost its credentials: %v", h)
	}
}

// ReadLogs takes what a controller sends (4 MiB at most) and refuses an
// endless answer instead of holding it all in memory.
func TestReadLogsBoundsTheAnswer(t *testing.T) {
	size := 4 << 20
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set(HeaderLogLength, "123")
		w.Write([]byte(strings.Repeat("x", size)))
		return true
	})
	c := &Client{BaseURL: srv.URL, APIKey: "k"}
	chunk, err := c.ReadLogs(context.Background(), "b1", 0)
	if err != nil || len(chunk.Data) != size || chunk.Length != 123 {
		t.Fatalf("4 MiB: %d bytes, length %d, %v", len(chunk.Data), chunk.Length, err)
	}
	size = maxLogRead + 1
	if _, err := c.ReadLogs(context.Background(), "b1", 0); err == nil || !strings.Contains(err.Error(), "more than 16 MiB") {
		t.Fatalf("an answer past the bound: %v", err)
	}
}

// A JSON answer that never ends is refused once it passes the bound.
func TestDecodeAnswerBounds(t *testing.T) {
	var out struct{ A string }
	if err := DecodeAnswer(strings.NewReader(`{"A":"ok"}`), &out); err != nil || out.A != "ok" {
		t.Fatalf("a small answer: %+v %v", out, err)
	}
	huge := io.MultiReader(strings.NewReader(`{"A":"`), strings.NewReader(strings.Repeat("x", maxAnswer)), strings.NewReader(`"}`))
	if err := DecodeAnswer(huge, &out); err == nil || !strings.Contains(err.Error(), "larger than 32 MiB") {
		t.Fatalf("an answer past the bound: %v", err)
	}
}
