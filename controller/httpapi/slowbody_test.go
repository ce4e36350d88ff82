package httpapi_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/store"
)

// slowPost opens a connection, sends a submit's headers (declaring a body
// of 100 kB) and then trickles the body a byte at a time until the
// connection closes (the declared 100 kB is below what net/http would
// discard after an answer, so only a deadline ends it). It returns the status line and how long the
// connection stayed open.
func slowPost(t *testing.T, baseURL string, header string) (string, time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(baseURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	req := "POST /api/builds HTTP/1.1\r\nHost: controller\r\nContent-Type: multipart/form-data; boundary=b\r\n" +
		header + "Content-Length: 100000\r\n\r\n--b\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
				if _, err := conn.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(conn)
	status, err := br.ReadString('\n')
	if err != nil {
		return "no answer: " + err.Error(), time.Since(start)
	}
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(status+readRest(br))), nil)
	if err == nil {
		resp.Body.Close()
	}
	return strings.TrimSpace(status), time.Since(start)
}

// readRest reads until the server closes the connection.
func readRest(br *bufio.Reader) string {
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := br.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// A client that trickles a body is answered and cut off: at once when it
// is not authenticated, after the minimum-throughput deadline when it is.
func TestSlowBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(_ *store.Config, l *httpapi.Limits) {
		l.BodyGrace, l.BodyMinRate = time.Second, 64<<10
	})
	status, open := slowPost(t, e.URL, "")
	if !strings.Contains(status, " 401 ") || open > 5*time.Second {
		t.Fatalf("unauthenticated slow body: %q, connection open %v (want a 401 and a close within 5 s)", status, open)
	}
	status, open = slowPost(t, e.URL, api.HeaderAPIKey+": not-a-key\r\n")
	if !strings.Contains(status, " 401 ") || open > 5*time.Second {
		t.Fatalf("wrong key, slow body: %q, connection open %v", status, open)
	}
	status, open = slowPost(t, e.URL, api.HeaderAPIKey+": "+e.devKey+"\r\n")
	if !strings.Contains(status, " 408 ") || open > 5*time.Second {
		t.Fatalf("authenticated slow body: %q, connection open %v (want a 408 within the 1 s grace and a close)", status, open)
	}
}

// A key over its budget, and an address that keeps failing to
// authenticate, are answered 429 with Retry-After; a valid key from that
// address is served.
func TestRateLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(_ *store.Config, l *httpapi.Limits) {
		l.RatePerKey, l.RateKeyBurst = 1, 3
		l.AuthFailuresPerIP, l.AuthFailureBurst = 0.1, 3
	})
	get := func(key string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, e.URL+"/api/builds", nil)
		req.Header.Set(api.HeaderAPIKey, key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	var codes []int
	var last *http.Response
	for range 6 {
		last = get(e.devKey)
		codes = append(codes, last.StatusCode)
	}
	if codes[0] != 200 || last.StatusCode != http.StatusTooManyRequests || last.Header.Get("Retry-After") == "" {
		t.Fatalf("six requests with a 1/s key (burst 4): %v, Retry-After %q", codes, last.Header.Get("Retry-After"))
	}
	if resp := get(e.adminKey); resp.StatusCode != 200 {
		t.Fatalf("another key shares the spent budget: %d", resp.StatusCode)
	}
	codes = nil
	for range 3 {
		codes = append(codes, get("wrong-key").StatusCode)
	}
	shut := get("wrong-key")
	if fmt.Sprint(codes) != "[401 401 401]" || shut.StatusCode != http.StatusTooManyRequests || shut.Header.Get("Retry-After") == "" {
		t.Fatalf("four failures from one address: %v then %d (Retry-After %q)", codes, shut.StatusCode, shut.Header.Get("Retry-After"))
	}
	if resp := get(e.adminKey); resp.StatusCode != 200 {
		t.Fatalf("a good key from the address over its budget: %d, want 200", resp.StatusCode)
	}
}
