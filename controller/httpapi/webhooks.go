package httpapi

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request) {
	var req api.WebhookRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	hook, err := s.webhooks.Create(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, hook)
}

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) {
	list, err := s.webhooks.List(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	if err := s.webhooks.Delete(r.Context(), r.PathValue("id")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) webhookDeliveries(w http.ResponseWriter, r *http.Request) {
	limit := 50
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			s.fail(w, r, fmt.Errorf("%w: parameter \"limit\" must be between 1 and 500", store.ErrInvalid))
			return
		}
		limit = n
	}
	list, err := s.webhooks.Deliveries(r.Context(), r.PathValue("id"), limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) redeliverWebhook(w http.ResponseWriter, r *http.Request) {
	d, err := s.webhooks.Redeliver(r.Context(), r.PathValue("id"), r.PathValue("delivery_id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, d)
}

// pingWebhook queues a test delivery ("ping") to one endpoint.
func (s *Server) pingWebhook(w http.ResponseWriter, r *http.Request) {
	d, err := s.webhooks.Ping(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, d)
}
