package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/store"
)

// tightBudgets gives every worker and every key a budget of 5 requests
// that refills at one request per 100 s: nothing refills within a test, so
// which request is refused does not depend on timing.
func tightBudgets(_ *store.Config, l *httpapi.Limits) {
	l.RatePerWorker, l.RateWorkerBurst = 0.01, 5
	l.RatePerKey, l.RateKeyBurst = 0.01, 5
}

// wantBudget fails unless err is a 429 naming budget, with a Retry-After.
func wantBudget(t *testing.T, err error, budget string) {
	t.Helper()
	var e *api.Error
	if !errors.As(err, &e) || e.Status != http.StatusTooManyRequests || e.Budget != budget || e.RetryAfter <= 0 {
		t.Fatalf("want 429 from the %q budget with a Retry-After, got %v (%+v)", budget, err, e)
	}
}

// spend polls as w until its budget is spent and returns the refusal.
func (w *workerSession) spend() error {
	w.e.t.Helper()
	for range 20 {
		resp, err := w.e.worker.Poll(context.Background(), w.token, 0)
		if err != nil {
			return err
		}
		w.keep(resp.TokenGrant)
	}
	w.e.t.Fatal("20 polls at once were all served: the worker has no budget")
	return nil
}

// A worker in a loop spends its own budget: it is answered 429 naming the
// worker budget and the setting, while another worker registered with the
// same key (as a farm's workers are) is served, and so is the key itself.
func TestWorkerFloodThrottledAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, tightBudgets)
	caps := api.Capabilities{Platforms: []string{api.PlatformAndroid}, MaxConcurrentBuilds: 1}
	flooder, calm := e.register("flooder", caps), e.register("calm", caps)

	err := flooder.spend()
	wantBudget(t, err, "worker")
	if !strings.Contains(err.Error(), "worker "+flooder.id) || !strings.Contains(err.Error(), "--rate-per-worker") {
		t.Fatalf("the 429 names neither the worker nor the setting that sizes its budget: %v", err)
	}
	for range 3 {
		if _, err := e.worker.Poll(context.Background(), calm.token, 0); err != nil {
			t.Fatalf("another worker on the same key, after the flood: %v", err)
		}
	}
	if _, err := e.worker.Register(context.Background(), api.RegisterRequest{Name: "third", Capabilities: caps}); err != nil {
		t.Fatalf("a registration with the shared key, after the flood: %v", err)
	}
}

// Work already done is never refused for budget: a worker over its budget
// still renews the lease it holds and delivers its result, while a
// heartbeat naming a lease it does not hold is refused like any other
// request.
func TestLeaseWorkServedOverBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, tightBudgets)
	w := e.register("busy", api.Capabilities{Platforms: []string{api.PlatformAndroid}, MaxConcurrentBuilds: 2})
	sub, _ := e.submit(api.PlatformAndroid)
	job := w.poll(0)
	if job == nil || job.ID != sub.ID {
		t.Fatalf("claimed %+v, want build %s", job, sub.ID)
	}
	if _, err := w.heartbeat(job); err != nil { // acknowledged: the next polls do not hand it out again
		t.Fatal(err)
	}
	wantBudget(t, w.spend(), "worker")

	for range 3 {
		if _, err := w.heartbeat(job); err != nil {
			t.Fatalf("a heartbeat for the lease the worker holds, over its budget: %v", err)
		}
	}
	stale := *job
	stale.LeaseToken = "not-this-lease"
	_, err := w.heartbeat(&stale)
	wantBudget(t, err, "worker")
	_, err = w.complete(&stale, api.Result{Success: true})
	wantBudget(t, err, "worker")

	res, err := w.complete(job, api.Result{Success: true, FileName: "app.apk", File: strings.NewReader("apk")})
	if err != nil || res.Status != api.StatusCompleted {
		t.Fatalf("the result for the lease the worker holds, over its budget: %+v %v", res, err)
	}
	if b := e.build(sub.ID); b.Status != api.StatusCompleted {
		t.Fatalf("build after the result: %s", b.Status)
	}
}

// A developer's script in a loop spends its key's budget alone: the 429
// names the key budget, and the workers and other keys are served.
func TestDeveloperFloodThrottledAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, tightBudgets)
	w := e.register("builder", api.Capabilities{Platforms: []string{api.PlatformAndroid}, MaxConcurrentBuilds: 1})
	var err error
	for range 20 {
		if _, err = e.developer.ListBuilds(context.Background(), api.ListOptions{}); err != nil {
			break
		}
	}
	wantBudget(t, err, "api_key")
	if !strings.Contains(err.Error(), "--rate-per-key") {
		t.Fatalf("the 429 does not name the setting that sizes the budget: %v", err)
	}
	if _, err := e.admin.ListBuilds(context.Background(), api.ListOptions{}); err != nil {
		t.Fatalf("another key, after the flood: %v", err)
	}
	for range 3 {
		w.poll(0)
	}
}

// A busy worker's heartbeats for the lease it holds cost its budget
// nothing: its next poll is served however many it sent. A stale lease's
// heartbeats are charged.
func TestLeaseWorkCostsNoBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, tightBudgets)
	w := e.register("steady", api.Capabilities{Platforms: []string{api.PlatformAndroid}, MaxConcurrentBuilds: 2})
	sub, _ := e.submit(api.PlatformAndroid)
	job := w.poll(0)
	if job == nil || job.ID != sub.ID {
		t.Fatalf("claimed %+v, want build %s", job, sub.ID)
	}
	for i := range 10 { // twice the burst
		if _, err := w.heartbeat(job); err != nil {
			t.Fatalf("heartbeat %d for the lease the worker holds: %v", i+1, err)
		}
	}
	if _, err := w.e.worker.Poll(context.Background(), w.token, 0); err != nil {
		t.Fatalf("a poll after the heartbeats of its lease: %v", err)
	}
	stale := *job
	stale.LeaseToken = "not-this-lease"
	var err error
	for range 10 {
		var e *api.Error
		if _, err = w.heartbeat(&stale); errors.As(err, &e) && e.Status == http.StatusTooManyRequests {
			break
		}
	}
	wantBudget(t, err, "worker")
}
