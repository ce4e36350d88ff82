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
	buildID := r.URL.Query().Get("build")
	if buildID != "" && !store.ValidID(buildID) {
		http.Error(w, "no such build", http.StatusNotFound)
		return
	}
	admin := s.Admin()
	watch := d.Hub.Watch(func(c store.Change) bool {
		switch {
		case c.Kind == "events":
			return true
		case buildID != "":
			return c.Kind == "build" && c.ID == buildID
		case c.Kind == "build":
			return true
		default:
			return admin && c.Kind == "worker"
		}
	})
	defer watch.Close()
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
	ctx := r.Context()
	var last time.Time
	for {
		var msg string
		select {
		case <-ctx.Done():
			return
		case <-d.Done:
			return
		case <-keepalive.C:
			msg = ": keepalive\n\n"
		case <-watch.C:
			wait := max(coalesce, time.Until(last.Add(pace)))
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return
			case <-d.Done:
				return
			}
			select { // what arrived while waiting is told now
			case <-watch.C:
			default:
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
