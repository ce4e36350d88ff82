package dashboard

import (
	"cmp"
	"net/http"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

type workerRow struct {
	api.Worker
	Online  bool   // in contact within the offline threshold
	Pool    string // its pool, "default" when it named none
	Trusted bool   // its pool runs credentialed builds (an admin's word)
}

func (d *Dashboard) workers(w http.ResponseWriter, r *http.Request, s *session) {
	ws, err := d.Store.ListWorkers(r.Context())
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	pools, err := d.Store.ListPools(r.Context())
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	trusted := map[string]bool{}
	for _, p := range pools {
		trusted[p.Name] = p.Trusted
	}
	now, offlineAfter := time.Now(), d.Store.Config().WorkerOfflineAfter
	rows := make([]workerRow, len(ws))
	for i, wk := range ws {
		pool := cmp.Or(wk.Capabilities.Pool, api.DefaultPool)
		rows[i] = workerRow{Worker: wk, Online: wk.Status == "online" && now.Sub(wk.LastSeenAt) <= offlineAfter,
			Pool: pool, Trusted: trusted[pool]}
	}
	d.render(w, r, "workers", http.StatusOK, view{Title: "Workers", Nav: "workers", Session: s, Stream: "/ui/stream", Data: rows})
}

func (d *Dashboard) pauseWorker(w http.ResponseWriter, r *http.Request, s *session) {
	d.setPaused(w, r, s, true)
}

func (d *Dashboard) resumeWorker(w http.ResponseWriter, r *http.Request, s *session) {
	d.setPaused(w, r, s, false)
}

func (d *Dashboard) setPaused(w http.ResponseWriter, r *http.Request, s *session, paused bool) {
	if _, err := d.Store.SetWorkerPaused(r.Context(), r.PathValue("id"), paused); err != nil {
		d.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/workers", http.StatusSeeOther)
}
