package httpapi_test

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/webhooks"
)

// receiver is a webhook endpoint as a careful integrator writes one: it
// checks the signature and the timestamp's age, and deduplicates by
// delivery id. It fails each delivery's first failFirst attempts on purpose.
type receiver struct {
	t         *testing.T
	tolerance time.Duration
	mu        sync.Mutex
	secret    string
	failFirst int
	down      bool // answer 503 to everything
	attempts  map[string]int
	accepted  map[string]api.Event // delivery id → event, for 2xx answers
	problems  []string
	redirects int // requests that reached the redirect target
}

func newReceiver(t *testing.T, failFirst int) (*receiver, *httptest.Server) {
	// A reused timestamp would be at least 3 s old by the 5th attempt (200 ms
	// backoff doubling); a fresh one is under 1 s old plus the request's delay.
	r := &receiver{t: t, tolerance: 2500 * time.Millisecond, failFirst: failFirst, attempts: map[string]int{}, accepted: map[string]api.Event{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook", r.hook)
	mux.HandleFunc("POST /redirect", func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, "/target", http.StatusFound)
	})
	mux.HandleFunc("/target", func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.redirects++
		r.mu.Unlock()
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *receiver) problem(format string, args ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

func (r *receiver) hook(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	id := req.Header.Get(api.HeaderWebhookDelivery)
	ts := req.Header.Get(api.HeaderWebhookTimestamp)
	sec, err := strconv.ParseInt(ts, 10, 64)
	if age := time.Since(time.Unix(sec, 0)); err != nil || age > r.tolerance || age < -r.tolerance {
		r.problem("delivery %s: stale or bad timestamp %q", id, ts)
		http.Error(w, "stale timestamp", http.StatusBadRequest)
		return
	}
	if want := webhooks.Sign([]byte(r.secret), ts, body); !hmac.Equal([]byte(want), []byte(req.Header.Get(api.HeaderWebhookSignature))) {
		r.problem("delivery %s: bad signature", id)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var ev api.Event
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" || ev.EventType != req.Header.Get(api.HeaderWebhookEvent) {
		r.problem("delivery %s: body %s does not match header event %q", id, body, req.Header.Get(api.HeaderWebhookEvent))
	}
	r.attempts[id]++
	if r.down || r.attempts[id] <= r.failFirst {
		http.Error(w, "failing on purpose", http.StatusServiceUnavailable)
		return
	}
	if prev, dup := r.accepted[id]; dup {
		r.problem("delivery %s (event %s) accepted twice", id, prev.ID)
	}
	r.accepted[id] = ev
}

func (r *receiver) snapshot() (map[string]api.Event, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	acc := make(map[string]api.Event, len(r.accepted))
	for k, v := range r.accepted {
		acc[k] = v
	}
	return acc, append([]string(nil), r.problems...)
}

// runDispatcher runs a webhook dispatcher (a controller replica's) until
// the returned stop is called; stop waits for it to end.
func (e *env) runDispatcher() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	d := e.dispatcher(e.store)
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(stop)
	return stop
}

// runSealer seals audit events continuously, as every controller does.
func (e *env) runSealer() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			e.store.SealEvents(ctx) //nolint:errcheck // retried on the next turn
			select {
			case <-ctx.Done():
			case <-time.After(30 * time.Millisecond):
			}
		}
	}()
	e.t.Cleanup(func() { cancel(); <-done })
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestWebhooksDeliverEveryEventOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	rcv, srv := newReceiver(t, 4) // the 5th and last attempt succeeds, over 3 s after the first

	for name, req := range map[string]api.WebhookRequest{
		"plain http to another host": {URL: "http://example.com/hook", Events: []string{"*"}},
		"no events":                  {URL: srv.URL + "/hook"},
		"a bad pattern":              {URL: srv.URL + "/hook", Events: []string{"Build!"}},
		"not a URL":                  {URL: "hooks", Events: []string{"*"}},
	} {
		if _, err := e.admin.CreateWebhook(ctx, req); api.StatusOf(err) != http.StatusUnprocessableEntity {
			t.Errorf("%s: %v, want 422", name, err)
		}
	}
	if _, err := e.developer.CreateWebhook(ctx, api.WebhookRequest{URL: srv.URL + "/hook", Events: []string{"*"}}); api.StatusOf(err) != http.StatusForbidden {
		t.Fatalf("a developer key created a webhook: %v", err)
	}
	hook, err := e.admin.CreateWebhook(ctx, api.WebhookRequest{URL: srv.URL + "/hook", Events: []string{"build.*"}, Description: "all builds"})
	if err != nil || !strings.HasPrefix(hook.Secret, "whsec_") {
		t.Fatalf("create: %+v %v", hook, err)
	}
	rcv.mu.Lock()
	rcv.secret = hook.Secret
	rcv.mu.Unlock()
	list, err := e.admin.ListWebhooks(ctx)
	if err != nil || len(list.Webhooks) != 1 || list.Webhooks[0].Secret != "" || list.Webhooks[0].URL != hook.URL {
		t.Fatalf("list (the secret is shown once only): %+v %v", list, err)
	}

	// Two replicas deliver at once while a real lifecycle produces events.
	e.runSealer()
	e.runDispatcher()
	e.runDispatcher()
	w := e.register("w", api.Capabilities{Platforms: []string{"android"}, MaxConcurrentBuilds: 1})
	done, _ := e.submit("android")
	cancelled, _ := e.submit("android")
	e.submit("android")
	job := w.poll(0)
	if _, err := w.heartbeat(job); err != nil {
		t.Fatal(err)
	}
	if _, err := w.complete(job, api.Result{Success: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.developer.Cancel(ctx, cancelled.ID); err != nil {
		t.Fatal(err)
	}

	// Every build event of the log arrives exactly once; nothing else does.
	want := map[string]string{} // event id → type
	eventually(t, 5*time.Second, "the lifecycle's events are sealed", func() bool {
		evs, err := e.store.Events(ctx, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		clear(want)
		for _, ev := range evs {
			if strings.HasPrefix(ev.EventType, "build.") {
				want[ev.ID] = ev.EventType
			}
		}
		return len(want) >= 7 && containsType(want, "build.completed") && containsType(want, "build.cancelled")
	})
	eventually(t, 15*time.Second, "every build event delivered", func() bool {
		acc, _ := rcv.snapshot()
		return len(acc) >= len(want)
	})
	time.Sleep(500 * time.Millisecond) // a duplicate would show up now
	acc, problems := rcv.snapshot()
	if len(problems) > 0 {
		t.Fatalf("the receiver saw problems:\n%s", strings.Join(problems, "\n"))
	}
	got := map[string]string{}
	for _, ev := range acc {
		got[ev.ID] = ev.EventType
	}
	if len(acc) != len(want) || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delivered %d events %v, want %d %v", len(acc), got, len(want), want)
	}
	if !containsEntity(acc, done.ID) {
		t.Fatal("no event of the completed build arrived")
	}

	// The delivery log: 4 failures then a success, for each.
	dl, err := e.admin.WebhookDeliveries(ctx, hook.ID, 500)
	if err != nil || len(dl.Deliveries) != len(want) {
		t.Fatalf("deliveries: %d %v", len(dl.Deliveries), err)
	}
	for _, d := range dl.Deliveries {
		if d.Status != "delivered" || d.Attempts != 5 || len(d.Log) != 5 || d.DeliveredAt == nil || d.WebhookID != hook.ID {
			t.Fatalf("delivery %+v", d)
		}
		for i, a := range d.Log {
			wantCode := http.StatusServiceUnavailable
			if i == 4 {
				wantCode = http.StatusOK
			}
			if a.Number != i+1 || a.ResponseCode == nil || *a.ResponseCode != wantCode {
				t.Fatalf("delivery %s attempt %d: %+v", d.ID, i+1, a)
			}
		}
	}
	m, _ := e.scrape(map[string]string{api.HeaderAPIKey: e.adminKey})
	if v := metricValue(m, "freeagent_webhook_deliveries_total", "outcome", "delivered"); v != float64(len(want)) {
		t.Errorf("delivered metric %v, want %d", v, len(want))
	}
	if v := metricValue(m, "freeagent_webhook_deliveries_total", "outcome", "failed"); v != float64(4*len(want)) {
		t.Errorf("failed metric %v, want %d", v, 4*len(want))
	}
}

func containsType(m map[string]string, typ string) bool {
	for _, v := range m {
		if v == typ {
			return true
		}
	}
	return false
}

func containsEntity(m map[string]api.Event, id string) bool {
	for _, ev := range m {
		if ev.EntityID == id {
			return true
		}
	}
	return false
}

func TestWebhookDeadRedeliverRestartRedirect(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	rcv, srv := newReceiver(t, 0)
	rcv.down = true
	hook, err := e.admin.CreateWebhook(ctx, api.WebhookRequest{URL: srv.URL + "/hook", Events: []string{"build.submitted"}})
	if err != nil {
		t.Fatal(err)
	}
	rcv.mu.Lock()
	rcv.secret = hook.Secret
	rcv.mu.Unlock()
	redirect, err := e.admin.CreateWebhook(ctx, api.WebhookRequest{URL: srv.URL + "/redirect", Events: []string{"build.submitted"}})
	if err != nil {
		t.Fatal(err)
	}
	e.runSealer()
	stop := e.runDispatcher()
	first, _ := e.submit("ios")

	// Five failed attempts, then dead.
	var dead api.WebhookDelivery
	eventually(t, 10*time.Second, "the delivery to a failing endpoint dies", func() bool {
		dl, err := e.admin.WebhookDeliveries(ctx, hook.ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(dl.Deliveries) == 1 && dl.Deliveries[0].Status == "dead" {
			dead = dl.Deliveries[0]
			return true
		}
		return false
	})
	if dead.Attempts != 5 || len(dead.Log) != 5 || dead.LastResponseCode == nil || *dead.LastResponseCode != http.StatusServiceUnavailable ||
		dead.LastError == nil || dead.NextAttemptAt != nil {
		t.Fatalf("dead delivery: %+v", dead)
	}
	// A redirect is a failed attempt, never followed.
	dl, err := e.admin.WebhookDeliveries(ctx, redirect.ID, 10)
	if err != nil || len(dl.Deliveries) != 1 || len(dl.Deliveries[0].Log) == 0 || *dl.Deliveries[0].Log[0].ResponseCode != http.StatusFound {
		t.Fatalf("redirected delivery: %+v %v", dl, err)
	}
	rcv.mu.Lock()
	followed := rcv.redirects
	rcv.mu.Unlock()
	if followed != 0 {
		t.Fatal("a redirect was followed")
	}
	if err := e.admin.DeleteWebhook(ctx, redirect.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.WebhookDeliveries(ctx, redirect.ID, 10); api.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("deliveries of a deleted webhook: %v", err)
	}

	// Redelivery once the endpoint is back.
	rcv.mu.Lock()
	rcv.down = false
	rcv.mu.Unlock()
	if _, err := e.admin.RedeliverWebhook(ctx, hook.ID, "no-such-delivery"); api.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("redeliver an unknown delivery: %v", err)
	}
	if d, err := e.admin.RedeliverWebhook(ctx, hook.ID, dead.ID); err != nil || d.Status != "pending" {
		t.Fatalf("redeliver: %+v %v", d, err)
	}
	eventually(t, 5*time.Second, "the redelivery arrives", func() bool {
		acc, _ := rcv.snapshot()
		return acc[dead.ID].EntityID == first.ID
	})

	// Events that happen while no dispatcher runs (a controller restart)
	// are delivered once one runs again.
	stop()
	a, _ := e.submit("ios")
	b, _ := e.submit("android")
	time.Sleep(300 * time.Millisecond)
	if acc, _ := rcv.snapshot(); len(acc) != 1 {
		t.Fatalf("delivered with no dispatcher running: %d", len(acc))
	}
	e.runDispatcher()
	eventually(t, 5*time.Second, "events from the downtime arrive", func() bool {
		acc, _ := rcv.snapshot()
		return containsEntity(acc, a.ID) && containsEntity(acc, b.ID)
	})
	time.Sleep(300 * time.Millisecond)
	acc, problems := rcv.snapshot()
	if len(acc) != 3 || len(problems) > 0 {
		t.Fatalf("accepted %d deliveries (want 3), problems %v", len(acc), problems)
	}

	// Old finished deliveries are pruned after the retention period.
	if _, err := e.store.Pool().Exec(ctx, `UPDATE webhook_deliveries SET created_at = now() - interval '31 days'`); err != nil {
		t.Fatal(err)
	}
	if n, err := e.hooks.Prune(ctx); err != nil || n != 3 {
		t.Fatalf("prune: %d %v, want 3", n, err)
	}
	if dl, err := e.admin.WebhookDeliveries(ctx, hook.ID, 10); err != nil || len(dl.Deliveries) != 0 {
		t.Fatalf("after pruning: %+v %v", dl, err)
	}
}

// A controller shutting down mid-attempt hands the delivery back at once,
// without counting an attempt against the endpoint.
func TestWebhookShutdownHandsBackInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // the server notices a closed connection only once the body is read
		select {
		case arrived <- struct{}{}:
		default:
		}
		<-r.Context().Done() // hang until the sender gives up
	}))
	t.Cleanup(srv.Close)
	hook, err := e.admin.CreateWebhook(ctx, api.WebhookRequest{URL: srv.URL, Events: []string{"build.submitted"}})
	if err != nil {
		t.Fatal(err)
	}
	e.runSealer()
	stop := e.runDispatcher()
	e.submit("android")
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery attempt started")
	}
	stop()
	dl, err := e.admin.WebhookDeliveries(ctx, hook.ID, 10)
	if err != nil || len(dl.Deliveries) != 1 {
		t.Fatalf("deliveries: %+v %v", dl, err)
	}
	d := dl.Deliveries[0]
	if d.Status != "pending" || d.Attempts != 0 || len(d.Log) != 0 || d.NextAttemptAt == nil || time.Until(*d.NextAttemptAt) > 0 {
		t.Fatalf("after shutdown mid-attempt: %+v", d)
	}
}

// A burst of events is delivered as fast as attempts finish, not one batch
// of Concurrency per check interval.
func TestWebhookBurstNotBoundByInterval(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get(api.HeaderWebhookDelivery)] = true
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	if _, err := e.admin.CreateWebhook(ctx, api.WebhookRequest{URL: srv.URL, Events: []string{"build.*"}}); err != nil {
		t.Fatal(err)
	}
	const burst = 300
	if _, err := e.store.Pool().Exec(ctx, `INSERT INTO events (event_type, entity_type, entity_id)
		SELECT 'build.test', 'build', 'b' || g FROM generate_series(1, $1) g`, burst); err != nil {
		t.Fatal(err)
	}
	for {
		n, err := e.store.SealEvents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	d, err := webhooks.New(e.store, e.key, webhooks.Config{Interval: time.Hour, Concurrency: 4, Allow: loopbackAllowed}, nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { d.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	eventually(t, 10*time.Second, fmt.Sprintf("%d deliveries with a one-hour check interval", burst), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == burst
	})
}

// Deliveries reach public addresses only: a loopback, private or
// link-local target (the cloud metadata service) is refused when dialled,
// whatever name led there, unless an admin allows it (--webhook-allow).
func TestWebhookRefusesNonPublicTargetsAtDialTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	rcv, srv := newReceiver(t, 0)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	local, err := e.admin.CreateWebhook(ctx, api.WebhookRequest{URL: "http://localhost:" + port + "/hook", Events: []string{"build.submitted"}})
	if err != nil {
		t.Fatal(err)
	}
	metadata, err := e.admin.CreateWebhook(ctx, api.WebhookRequest{URL: "https://169.254.169.254/latest/meta-data", Events: []string{"build.submitted"}})
	if err != nil {
		t.Fatal(err)
	}
	e.runSealer()
	d, err := webhooks.New(e.store, e.key, webhooks.Config{Interval: 50 * time.Millisecond, Timeout: 2 * time.Second,
		BackoffBase: time.Hour}, nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { d.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	e.submit("ios")
	for hook, ip := range map[string]string{local.ID: "127.0.0.1", metadata.ID: "169.254.169.254"} {
		eventually(t, 10*time.Second, "a refused attempt to "+ip, func() bool {
			dl, err := e.admin.WebhookDeliveries(ctx, hook, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(dl.Deliveries) != 1 || dl.Deliveries[0].Attempts == 0 {
				return false
			}
			last := dl.Deliveries[0].LastError
			want := "webhook target " + ip + " is not a public address: allow it with --webhook-allow " + ip
			if last == nil || !strings.Contains(*last, want) {
				t.Fatalf("delivery to %s: last error %v, want %q", ip, last, want)
			}
			return true
		})
	}
	if acc, _ := rcv.snapshot(); len(acc) != 0 {
		t.Fatalf("a refused target received %d deliveries", len(acc))
	}
}
