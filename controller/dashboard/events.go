package dashboard

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

// eventRow is one audit event as a readable row: what happened in a line,
// who did it, to which build; the stored JSON stays one click away.
type eventRow struct {
	api.Event
	Build   string // the build's id, for build events
	Subject string // what a non-build event is about ("worker mac-studio")
	Actor   string // who caused it, "" when the log does not say
	Summary string
	Ago     string // the time, relative to the page's
	JSON    string // the event as the API returns it, indented
}

// newEventRow reads row's payload (a JSON object of plain values) into a row.
func newEventRow(row store.EventRow, now time.Time) eventRow {
	ev := row.Event
	var p map[string]any
	_ = json.Unmarshal(ev.Payload, &p) // the controller writes objects; anything else summarises as the bare type
	r := eventRow{Event: ev, Ago: fmtDuration(max(0, now.Sub(ev.Timestamp))) + " ago", Actor: eventActor(ev, row), Summary: eventSummary(ev, row, p)}
	switch ev.EntityType {
	case "build":
		r.Build = ev.EntityID
	case "worker":
		r.Subject = "worker " + cmp.Or(row.Worker, short(ev.EntityID))
	case "project", "pool", "key":
		r.Subject = ev.EntityType + " " + ev.EntityID
	default:
		r.Subject = ev.EntityType + " " + short(ev.EntityID)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(ev); err == nil {
		r.JSON = strings.TrimSpace(buf.String())
	}
	return r
}

func short(id string) string { return id[:min(len(id), 10)] }

// eventActor is who caused an event, as far as the log and the database
// know: the key that submitted a build, an admin for the dashboard's and
// API's worker actions, the worker for what a worker did, the controller
// for what it did by itself.
func eventActor(ev api.Event, row store.EventRow) string {
	switch ev.EventType {
	case "build.submitted":
		if row.Submitter != "" {
			return "key " + row.Submitter
		}
		return ""
	case "worker.paused", "worker.resumed", "worker.acknowledged":
		return "an admin"
	case "worker.owner_paused", "worker.owner_resumed":
		return "the host's owner"
	case "worker.offline", "build.requeued", "build.timed_out":
		return "controller " + short(ev.SourceControllerID)
	case "build.cancelled", "build.cancel_requested":
		return ""
	}
	switch {
	case ev.EntityType == "controller":
		return "controller " + short(ev.EntityID)
	case row.Worker != "":
		return "worker " + row.Worker
	}
	return ""
}

// eventSummary says in one line what happened.
func eventSummary(ev api.Event, row store.EventRow, p map[string]any) string {
	worker := cmp.Or(row.Worker, short(str(p, "worker_id")))
	switch ev.EventType {
	case "build.submitted":
		s := "Submitted " + cmp.Or(str(p, "platform"), "a") + " build"
		if v := str(p, "profile"); v != "" {
			s += ", profile " + v
		}
		if v := str(p, "project"); v != "" {
			s += ", app " + v
		}
		if v := str(p, "retry_of"); v != "" {
			s += ", a retry of " + short(v)
		}
		if b, _ := p["source_fingerprint_mismatch"].(bool); b {
			s += "; its spec declares another source than it sent (never reused)"
		}
		return s
	case "build.assigned":
		s := "Assigned to worker " + worker
		if b, _ := p["warm"].(bool); b {
			s += " (warm: its caches hold this app)"
		}
		return s
	case "build.building":
		return "Started building on worker " + worker
	case "build.completed":
		return "Completed"
	case "build.failed":
		return "Failed" + prefixed(": ", str(p, "error_code"))
	case "build.cancelled":
		return "Cancelled"
	case "build.cancel_requested":
		return "Cancel requested while " + cmp.Or(str(p, "status"), "running") + "; the worker stops it"
	case "build.requeued":
		return "Sent back to the queue" + prefixed(": ", str(p, "code"))
	case "build.secrets_fetched":
		return "The build's VM fetched its secrets" + prefixed(": ", str(p, "what"))
	case "build.secrets_returned":
		return "The build's VM handed its secrets back" + prefixed(": ", str(p, "what"))
	case "worker.registered":
		return "Worker " + cmp.Or(str(p, "name"), worker) + " registered"
	case "worker.re-registered":
		return "Worker " + cmp.Or(str(p, "name"), worker) + " registered again (a restart)"
	case "worker.online":
		return "Back online"
	case "worker.offline":
		return "Offline: no contact within the offline threshold"
	case "worker.unregistered":
		return "Unregistered"
	case "worker.paused":
		return "Paused: takes no new builds"
	case "worker.resumed":
		return "Resumed: takes builds again"
	case "worker.owner_paused":
		return "Paused by its owner"
	case "worker.owner_resumed":
		return "Resumed by its owner"
	case "worker.host_paused":
		return "Holding builds back: the host's rules say not now"
	case "worker.host_resumed":
		return "The host's rules allow builds again"
	case "worker.needs_attention":
		return "Needs attention" + prefixed(": ", str(p, "reason"))
	case "worker.acknowledged":
		if r := str(p, "reason"); r != "" {
			return "Attention acknowledged (was: " + r + ")"
		}
		return "Attention acknowledged"
	case "worker.released_after_credentials":
		return "Released a build that had fetched credentials" + prefixed(": ", str(p, "reason"))
	case "controller.registered":
		return "Controller started" + prefixed(" at ", str(p, "url")) + prefixed(", version ", str(p, "version"))
	case "controller.stopped":
		return "Controller stopped"
	case "controller.expired":
		return "Controller expired: its registration lapsed"
	case "controller.gc":
		return "Removed expired data" + prefixed(": ", scalars(p))
	case "project.variable_set":
		return "Variable " + str(p, "name") + " set" + prefixed(" for ", list(p, "environments"))
	case "project.variable_deleted":
		return "Variable " + str(p, "name") + " deleted"
	case "project.credential_set":
		return cmp.Or(str(p, "platform"), "A") + " credential " + str(p, "name") + " set"
	case "project.credential_deleted":
		return cmp.Or(str(p, "platform"), "A") + " credential " + str(p, "name") + " deleted"
	case "project.pools_set":
		return "Builds go to pools " + cmp.Or(list(p, "pools"), "any")
	case "project.cache_domain_set":
		if one, _ := p["one_cache_domain"].(bool); one {
			return "All builds share dependency caches (one cache domain)"
		}
		return "Dependency caches kept apart by environment and secrets"
	}
	// An event this page has no words for yet: its type and plain fields.
	words := strings.ReplaceAll(strings.ReplaceAll(ev.EventType, ".", " "), "_", " ")
	return strings.ToUpper(words[:min(1, len(words))]) + words[min(1, len(words)):] + prefixed(": ", scalars(p))
}

func str(p map[string]any, k string) string {
	switch v := p[k].(type) {
	case string:
		return v
	case float64:
		return fmt.Sprint(v)
	case bool:
		return fmt.Sprint(v)
	}
	return ""
}

func list(p map[string]any, k string) string {
	vs, _ := p[k].([]any)
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		out = append(out, fmt.Sprint(v))
	}
	return strings.Join(out, ", ")
}

// scalars is a payload's plain fields as "k v, …", in key order.
func scalars(p map[string]any) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		if str(p, k) != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = strings.ReplaceAll(k, "_", " ") + " " + str(p, k)
	}
	return strings.Join(parts, ", ")
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}
