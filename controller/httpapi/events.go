package httpapi

import (
	"net/http"
	"strconv"

	"github.com/freeagent-build/freeagent/api"
)

// listEvents answers GET /api/events?since=<sequence>&limit=<n>: sealed
// events in sequence order (an event is sealed, and listed, a moment after
// its transaction commits).
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	since, err := queryInt(r, "since", 0)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	limit, err := queryInt(r, "limit", 100)
	if err != nil || limit < 1 || limit > 1000 {
		s.fail(w, r, badRequest("query parameter limit must be a number from 1 to 1000"))
		return
	}
	evs, err := s.store.Events(r.Context(), since, int(limit))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.EventList{Events: evs, NextSince: since}
	if out.Events == nil {
		out.Events = []api.Event{}
	}
	if n := len(evs); n > 0 {
		out.NextSince = evs[n-1].Sequence
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) verifyEvents(w http.ResponseWriter, r *http.Request) {
	v, err := s.store.VerifyEvents(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) listControllers(w http.ResponseWriter, r *http.Request) {
	cs, err := s.store.Controllers(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if cs == nil {
		cs = []api.Controller{}
	}
	writeJSON(w, http.StatusOK, api.ControllerList{Controllers: cs})
}

// queryInt reads a non-negative integer query parameter.
func queryInt(r *http.Request, name string, def int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest("query parameter %s must be a non-negative whole number, not %q", name, v)
	}
	return n, nil
}
