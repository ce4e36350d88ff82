package httpapi

import (
	"net/http"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/queue"
	"github.com/freeagent-build/freeagent/controller/store"
)

// queue answers the pending builds the key may see and why each waits
// (the dashboard's queue page, as JSON).
func (s *Server) queue(w http.ResponseWriter, r *http.Request, k store.APIKey) {
	q, err := queue.Load(r.Context(), s.store, r.URL.Query().Get("cursor"), 100, scope(k))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.Queue{Builds: []api.QueuedBuild{}, Pending: q.Page.Pending, NextCursor: q.Page.NextCursor}
	for i, e := range q.Page.Entries {
		out.Builds = append(out.Builds, api.QueuedBuild{ID: e.ID, Platform: e.Platform, Profile: e.Profile, Project: e.Project,
			Priority: e.Priority, Position: e.Position, Attempts: e.Attempts, SubmittedAt: e.SubmittedAt, Reason: q.Reasons[i]})
	}
	writeJSON(w, http.StatusOK, out)
}

// listPools answers the configured pools and those online workers are in.
func (s *Server) listPools(w http.ResponseWriter, r *http.Request) {
	pools, err := s.store.ListPools(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.PoolList{Pools: pools})
}

// setPool records whether a pool is trusted and may run credentialed
// builds on its local-driver workers: body {"trusted": bool, "allow_local": bool}.
func (s *Server) setPool(w http.ResponseWriter, r *http.Request) {
	var p api.Pool
	if err := s.decodeJSON(w, r, &p); err != nil {
		s.fail(w, r, err)
		return
	}
	p.Name, p.OnlineWorkers, p.Workers = r.PathValue("name"), 0, nil
	if err := s.store.SetPool(r.Context(), p); err != nil {
		s.fail(w, r, err)
		return
	}
	// The admin sees whom the pool's trust reaches, and whom not.
	workers, err := s.store.PoolWorkers(r.Context(), p.Name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p.Workers = workers
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) deletePool(w http.ResponseWriter, r *http.Request) {
	if err := s.store.DeletePool(r.Context(), r.PathValue("name")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// projectPools answers the pools a project's builds may use (empty: any).
func (s *Server) projectPools(w http.ResponseWriter, r *http.Request) {
	p := r.PathValue("project")
	if err := store.ValidateProject("project", p); err != nil {
		s.fail(w, r, err)
		return
	}
	pools, err := s.store.ProjectPools(r.Context(), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.ProjectPools{Project: p, Pools: pools})
}

// setProjectPools replaces the pools a project's builds may use: body
// {"pools": [...]}; an empty list lets them use any pool.
func (s *Server) setProjectPools(w http.ResponseWriter, r *http.Request) {
	var req api.ProjectPools
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	req.Project = r.PathValue("project")
	if err := s.store.SetProjectPools(r.Context(), req.Project, req.Pools); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Pools == nil {
		req.Pools = []string{}
	}
	writeJSON(w, http.StatusOK, req)
}
