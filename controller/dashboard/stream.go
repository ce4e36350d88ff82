package dashboard

import (
	"fmt"
	"net/http"
	"time"

	"github.com/freeagent-build/freeagent/controller/store"
)

// coalesce gathers changes this long before telling the browser, so a burst
// of changes costs one page refresh.
const coalesce = 250 * time.Millisecond

// changes is the live-update stream: an event "change" whenever something
// the page shows may have changed (every build for the lists, one build
// with ?build=ID, workers too for admins). The page then refetches itself.
func (d *Dashboard) changes(w http.ResponseWriter, r *http.Request, s *session) {
	buildID := r.URL.Query().Get("build")
	if buildID != "" && !store.ValidID(buildID) {
		http.Error(w, "no such build", http.StatusNotFound)
		return
	}
	admin := s.Admin()
	watch := d.Hub.Watch(func(c store.Change) bool {
		switch {
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
			select {
			case <-time.After(coalesce):
			case <-ctx.Done():
				return
			case <-d.Done:
				return
			}
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
