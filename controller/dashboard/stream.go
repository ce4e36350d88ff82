package dashboard

import (
	"fmt"
	"net/http"
	"time"

	"github.com/freeagent-build/freeagent/controller/store"
)

// A change is told to the browser after coalesce, and at most once per
// pace: a burst of changes on a busy farm costs each open page one refresh
// a second, not one per transition.
const (
	coalesce = 250 * time.Millisecond
	pace     = time.Second
)

// changes is the live-update stream: an event "change" whenever something
// the page shows may have changed, and the page then refetches itself.
// Builds becoming claimable or ending, workers' status and logs are
// notified by their own transactions; every other transition (assigned,
// building, a pause) shows up as the sealer's "events" notification, which
// follows each state change by a sealing interval.
func (d *Dashboard) changes(w http.ResponseWriter, r *http.Request, s *session) {
	buildID, hookID := r.URL.Query().Get("build"), r.URL.Query().Get("webhook")
	if buildID != "" && (!store.ValidID(buildID) || !d.visible(r, s, buildID)) {
		http.Error(w, "no such build", http.StatusNotFound)
		return
	}
	if hookID != "" && !s.Admin() {
		http.Error(w, "webhooks are an admin's", http.StatusForbidden)
		return
	}
	// A project-bound session is told only of its projects' changes. A
	// build's own notification carries no project, so such a session hears
	// of other builds through the sealer's notification, once the events
	// sealed since are checked against its scope (ScopeChanged); workers'
	// changes are for admins.
	scoped := !s.Scope.All
	admin := s.Admin()
	told := d.Hub.Watch(func(c store.Change) bool {
		switch {
		case hookID != "": // an endpoint's delivery log: its attempts only
			return c.Kind == store.KindWebhook && c.ID == hookID
		case c.Kind == "events":
			return !scoped
		case buildID != "":
			return c.Kind == "build" && c.ID == buildID
		case c.Kind == "build":
			return !scoped
		default:
			return admin && c.Kind == "worker"
		}
	})
	defer told.Close()
	ctx := r.Context()
	var sealed <-chan struct{} // a scoped session's sealer notifications, checked before they are told
	var head int64             // the sealed events checked so far
	if scoped {
		watch := d.Hub.Watch(func(c store.Change) bool { return c.Kind == "events" })
		defer watch.Close()
		sealed = watch.C
		var err error
		if head, err = d.Store.LastSequence(ctx); err != nil {
			http.Error(w, "cannot follow changes now; reload the page", http.StatusServiceUnavailable)
			return
		}
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 2000\n: live\n\n"); err != nil {
		return
	}
	rc.Flush() //nolint:errcheck
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	var last time.Time
	for {
		var msg string
		tell, check := false, false
		select {
		case <-ctx.Done():
			return
		case <-d.Done:
			return
		case <-keepalive.C:
			msg = ": keepalive\n\n"
		case <-told.C:
			tell = true
		case <-sealed:
			check = true
		}
		if tell || check {
			wait := max(coalesce, time.Until(last.Add(pace)))
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return
			case <-d.Done:
				return
			}
			// What arrived while waiting is told now.
			select {
			case <-told.C:
				tell = true
			default:
			}
			select {
			case <-sealed:
				check = true
			default:
			}
			if check {
				changed, err := false, error(nil)
				if head, changed, err = d.Store.ScopeChanged(ctx, head, s.Scope, buildID); err == nil && changed {
					tell = true
				}
			}
			if !tell {
				continue
			}
			last = time.Now()
			msg = "event: change\ndata: {}\n\n"
		}
		if _, err := fmt.Fprint(w, msg); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}
