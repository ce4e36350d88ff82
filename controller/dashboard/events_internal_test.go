package dashboard

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

func TestEventRowSummaries(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		typ, entity, payload, worker, submitter string
		summary, actor                          string
	}{
		{"build.submitted", "build", `{"platform":"ios","profile":"preview","project":"shop","retry_of":"06h11retried"}`, "", "alice",
			"Submitted ios build, profile preview, app shop, a retry of 06h11retri", "key alice"},
		{"build.submitted", "build", `{"platform":"android","project":"shop","source_fingerprint_mismatch":true}`, "", "mallory",
			"Submitted android build, app shop; its spec declares another source than it sent (never reused)", "key mallory"},
		{"build.assigned", "build", `{"worker_id":"w1","warm":true}`, "mac-1", "", "Assigned to worker mac-1 (warm: its caches hold this app)", "worker mac-1"},
		{"build.requeued", "build", `{"code":"lease_expired"}`, "", "", "Sent back to the queue: lease_expired", "controller ctrl-12345"},
		{"worker.paused", "worker", `{"status":"online"}`, "mac-1", "", "Paused: takes no new builds", "an admin"},
		{"project.variable_set", "project", `{"name":"API_URL","environments":["preview","production"]}`, "", "",
			"Variable API_URL set for preview, production", ""},
		// A type this page has no words for: its type and plain fields, never a blank line.
		{"pool.set", "pool", `{"trusted":true,"allow_local":false,"nested":{"x":1}}`, "", "", "Pool set: allow local false, trusted true", ""},
		{"build.weird", "build", `not json`, "", "", "Build weird", ""},
	} {
		ev := api.Event{EventType: c.typ, EntityType: c.entity, EntityID: "e1", Payload: json.RawMessage(c.payload),
			Timestamp: now.Add(-90 * time.Second), SourceControllerID: "ctrl-123456789"}
		r := newEventRow(store.EventRow{Event: ev, Worker: c.worker, Submitter: c.submitter}, now)
		if r.Summary != c.summary || r.Actor != c.actor || r.Ago != "1m 30s ago" {
			t.Errorf("%s: summary %q actor %q (%s); want %q, %q", c.typ, r.Summary, r.Actor, r.Ago, c.summary, c.actor)
		}
		if (c.entity == "build") != (r.Build == "e1") || !strings.Contains(r.JSON, `"event_type": "`+c.typ+`"`) && c.payload != "not json" {
			t.Errorf("%s: build %q, JSON %q", c.typ, r.Build, r.JSON)
		}
	}
}
