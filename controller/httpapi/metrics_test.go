package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/store"
)

// scrape fetches /metrics with the given headers and parses it.
func (e *env) scrape(h map[string]string) (map[string]*dto.MetricFamily, int) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.URL+"/metrics", nil)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		e.t.Fatalf("parse /metrics: %v", err)
	}
	return fams, resp.StatusCode
}

// metricValue is the value (a histogram's sample count) of the series of
// family name whose labels include want; -1 when there is none.
func metricValue(fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
series:
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(want); i += 2 {
			if labels[want[i]] != want[i+1] {
				continue series
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

func TestMetricsFollowALifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shortLease(500*time.Millisecond), func(c *store.Config, _ *httpapi.Limits) { c.MaxAttempts = 2 })
	ctx := context.Background()
	admin := map[string]string{api.HeaderAPIKey: e.adminKey}

	if _, code := e.scrape(nil); code != http.StatusUnauthorized {
		t.Fatalf("/metrics without a key: %d, want 401", code)
	}
	if _, code := e.scrape(map[string]string{api.HeaderAPIKey: e.devKey}); code != http.StatusForbidden {
		t.Fatalf("/metrics with a developer key: %d, want 403", code)
	}
	if _, code := e.scrape(map[string]string{"Authorization": "Bearer " + e.adminKey}); code != http.StatusOK {
		t.Fatalf("/metrics with an admin bearer token: %d, want 200", code)
	}

	m, _ := e.scrape(admin)
	if v := metricValue(m, "freeagent_builds", "status", "pending"); v != 0 {
		t.Fatalf("pending builds before any submit: %v", v)
	}
	a, _ := e.submit("android")
	b, _ := e.submit("android")
	time.Sleep(300 * time.Millisecond)
	m, _ = e.scrape(admin)
	if v := metricValue(m, "freeagent_queue_depth"); v != 2 {
		t.Fatalf("queue depth after two submits: %v", v)
	}
	if v := metricValue(m, "freeagent_builds", "status", "pending"); v != 2 {
		t.Fatalf("pending builds: %v", v)
	}
	if v := metricValue(m, "freeagent_queue_oldest_pending_seconds"); v < 0.25 || v > 10 {
		t.Fatalf("oldest pending age: %v s, want about 0.3", v)
	}

	// Build a completes.
	w := e.register("w", api.Capabilities{Platforms: []string{"android"}, MaxConcurrentBuilds: 1})
	job := w.poll(0)
	if job == nil || job.ID != a.ID {
		t.Fatalf("first claim: %+v", job)
	}
	if _, err := w.heartbeat(job); err != nil {
		t.Fatal(err)
	}
	if _, err := w.complete(job, api.Result{Success: true}); err != nil {
		t.Fatal(err)
	}
	m, _ = e.scrape(admin)
	if v := metricValue(m, "freeagent_claims_total"); v != 1 {
		t.Fatalf("claims: %v", v)
	}
	pickup := m["freeagent_pickup_latency_seconds"].GetMetric()[0].GetHistogram()
	if pickup.GetSampleCount() != 1 || pickup.GetSampleSum() < 0.25 || pickup.GetSampleSum() > 10 {
		t.Fatalf("pickup latency: %d samples, sum %v s (want 1 of about 0.3 s)", pickup.GetSampleCount(), pickup.GetSampleSum())
	}
	if v := metricValue(m, "freeagent_builds", "status", "completed"); v != 1 {
		t.Fatalf("completed builds: %v", v)
	}

	// Build b's lease expires twice: requeued once, then dead-lettered.
	for attempt := 1; attempt <= 2; attempt++ {
		e.claimableNow(b.ID)
		job := w.poll(0)
		if job == nil || job.ID != b.ID {
			t.Fatalf("attempt %d: no job", attempt)
		}
		time.Sleep(600 * time.Millisecond)
		e.reaper.Sweep(ctx)
	}
	if st := e.build(b.ID); st.Status != api.StatusFailed || st.ErrorCode == nil || *st.ErrorCode != api.CodeMaxAttempts {
		t.Fatalf("build b: %s %v", st.Status, st.ErrorCode)
	}
	if job := w.poll(0); job != nil {
		t.Fatalf("a poll with nothing queued got %+v", job)
	}
	m, _ = e.scrape(admin)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"freeagent_claims_total", nil, 3},
		{"freeagent_polls_total", []string{"result", "job"}, 3},
		{"freeagent_polls_total", []string{"result", "empty"}, 1},
		{"freeagent_poll_duration_seconds", []string{"result", "empty"}, 1},
		{"freeagent_pickup_latency_seconds", nil, 3},
		{"freeagent_lease_expiries_total", nil, 2},
		{"freeagent_requeues_total", nil, 1},
		{"freeagent_dead_letters_total", nil, 1},
		{"freeagent_builds", []string{"status", "failed"}, 1},
		{"freeagent_builds", []string{"status", "pending"}, 0},
		{"freeagent_queue_depth", nil, 0},
		{"freeagent_queue_oldest_pending_seconds", nil, 0},
		{"freeagent_http_request_duration_seconds", []string{"route", "POST /api/workers/upload", "method", "POST", "code", "200"}, 1},
		{"freeagent_http_request_duration_seconds", []string{"route", "GET /api/builds/{id}", "code", "200"}, 1},
	} {
		if got := metricValue(m, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// Routes are patterns: no series is labelled with a raw path.
	for _, s := range m["freeagent_http_request_duration_seconds"].GetMetric() {
		for _, l := range s.Label {
			if strings.Contains(l.GetValue(), a.ID) || strings.Contains(l.GetValue(), b.ID) {
				t.Fatalf("a series carries a build id: %v", s.Label)
			}
		}
	}
}
