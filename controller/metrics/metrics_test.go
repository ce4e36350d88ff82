package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/gc"
	"github.com/freeagent-build/freeagent/controller/store"
)

type countingSource struct {
	live, finished int
	liveErr        error
	chain          chan api.EventVerification // answers VerifyEvents; nil: valid at once
}

func (c *countingSource) VerifyEvents(context.Context) (api.EventVerification, error) {
	if c.chain == nil {
		return api.EventVerification{Valid: true}, nil
	}
	return <-c.chain, nil
}

func (c *countingSource) LiveStats(context.Context) (store.LiveStats, error) {
	c.live++
	return store.LiveStats{Pending: 3, Building: 1, OldestPending: 90 * time.Second, OnlineWorkers: 2, WorkerSlots: 4}, c.liveErr
}

func (c *countingSource) FinishedCounts(context.Context) (map[string]int, error) {
	c.finished++
	return map[string]int{"completed": 100 * c.finished, "failed": 0, "cancelled": 0}, nil
}

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// Live builds are counted on every scrape; ended builds (a scan of the
// whole history) only once per refresh period.
func TestEndedBuildsRecountedSparingly(t *testing.T) {
	src := &countingSource{}
	m := New(src, time.Hour)
	first := scrape(t, m)
	second := scrape(t, m)
	if src.live != 2 || src.finished != 1 {
		t.Fatalf("live counted %d times, ended %d times; want 2 and 1", src.live, src.finished)
	}
	for _, want := range []string{`freeagent_builds{status="pending"} 3`, `freeagent_builds{status="completed"} 100`,
		"freeagent_queue_depth 3", "freeagent_queue_oldest_pending_seconds 90", "freeagent_workers_online 2", "freeagent_worker_slots 4"} {
		if !strings.Contains(first, want) || !strings.Contains(second, want) {
			t.Fatalf("scrape lacks %q:\n%s", want, second)
		}
	}
	// A failing database costs the queue series, not the whole scrape.
	src.liveErr = errors.New("database down")
	out := scrape(t, m)
	if strings.Contains(out, "freeagent_queue_depth") || !strings.Contains(out, "go_goroutines") {
		t.Fatalf("scrape with the database down:\n%s", out)
	}
}

// A garbage collection pass counts what it removed, by kind.
func TestGCCountsByKind(t *testing.T) {
	m := New(&countingSource{}, 0)
	m.GC(gc.Report{Ran: true, StrayArtifacts: 2, Orphans: 3, Errors: 1})
	m.GC(gc.Report{Ran: true, StrayArtifacts: 1})
	out := scrape(t, m)
	for _, want := range []string{"freeagent_gc_runs_total 2", `freeagent_gc_deleted_total{kind="stray_artifact"} 3`,
		`freeagent_gc_deleted_total{kind="orphan"} 3`, `freeagent_gc_deleted_total{kind="expired_artifacts"} 0`, "freeagent_gc_errors_total 1",
		"freeagent_gc_last_run_timestamp_seconds "} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
}

// The chain is verified off the scrape: the series is absent until the
// first check ends, then reports it, and a broken chain reads 0.
func TestChainValidityFromBackgroundCheck(t *testing.T) {
	src := &countingSource{chain: make(chan api.EventVerification)}
	t.Cleanup(func() { close(src.chain) }) // ends the check the last scrape started
	reg := prometheus.NewRegistry()
	reg.MustRegister(newChainCollector(src, 0))
	m := &Metrics{reg: reg}
	if out := scrape(t, m); strings.Contains(out, "freeagent_events_chain_valid") {
		t.Fatalf("a result before any check ended:\n%s", out)
	}
	seq := int64(7)
	src.chain <- api.EventVerification{Valid: false, FirstBrokenSequence: &seq}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		out := scrape(t, m)
		if strings.Contains(out, "freeagent_events_chain_valid 0") && strings.Contains(out, "freeagent_events_chain_checked_timestamp_seconds ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a broken chain is never reported:\n%s", out)
		}
	}
	src.chain <- api.EventVerification{Valid: true}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(scrape(t, m), "freeagent_events_chain_valid 1"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a valid chain is never reported")
		}
	}
}
