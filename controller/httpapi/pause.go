package httpapi

import (
	"net/http"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

// pauseWorker stops giving builds to a worker; those it runs go on (a drain
// from the controller's side).
func (s *Server) pauseWorker(w http.ResponseWriter, r *http.Request) { s.setPaused(w, r, true) }

// resumeWorker gives a paused worker builds again.
func (s *Server) resumeWorker(w http.ResponseWriter, r *http.Request) { s.setPaused(w, r, false) }

func (s *Server) setPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	wk, err := s.store.SetWorkerPaused(r.Context(), r.PathValue("id"), paused)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wk)
}

// acknowledgeWorker clears a worker's needs-attention state.
func (s *Server) acknowledgeWorker(w http.ResponseWriter, r *http.Request) {
	wk, err := s.store.AcknowledgeWorker(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wk)
}

// reportPause records the worker's own pauses, its owner's and its host's
// (api.WorkerPauseReport); the admin's is set by pauseWorker alone.
func (s *Server) reportPause(w http.ResponseWriter, r *http.Request, wa store.WorkerAuth) {
	var req api.WorkerPauseReport
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	wk, err := s.store.ReportPause(r.Context(), wa, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.WorkerPauseResponse{Worker: wk, TokenGrant: wa.Grant})
}
