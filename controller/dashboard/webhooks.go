package dashboard

import (
	"net/http"

	"github.com/freeagent-build/freeagent/controller/api"
)

// deliveriesShown is how many of an endpoint's latest deliveries its page lists.
const deliveriesShown = 100

func (d *Dashboard) webhookList(w http.ResponseWriter, r *http.Request, s *session) {
	if d.Webhooks == nil {
		d.renderError(w, r, s, http.StatusNotFound, "Webhooks are not enabled on this controller.")
		return
	}
	list, err := d.Webhooks.List(r.Context())
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	d.render(w, r, "webhooks", http.StatusOK, view{Title: "Webhooks", Nav: "webhooks", Session: s, Data: list.Webhooks})
}

type deliveriesView struct {
	Hook       api.Webhook
	Deliveries []api.WebhookDelivery
}

func (d *Dashboard) webhookDeliveries(w http.ResponseWriter, r *http.Request, s *session) {
	if d.Webhooks == nil {
		d.renderError(w, r, s, http.StatusNotFound, "Webhooks are not enabled on this controller.")
		return
	}
	id := r.PathValue("id")
	list, err := d.Webhooks.Deliveries(r.Context(), id, deliveriesShown)
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	hooks, err := d.Webhooks.List(r.Context())
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	v := deliveriesView{Deliveries: list.Deliveries}
	for _, h := range hooks.Webhooks {
		if h.ID == id {
			v.Hook = h
		}
	}
	d.render(w, r, "deliveries", http.StatusOK, view{Title: "Webhook deliveries", Nav: "webhooks", Session: s,
		Stream: "/ui/stream", Data: v})
}

func (d *Dashboard) redeliver(w http.ResponseWriter, r *http.Request, s *session) {
	if d.Webhooks == nil {
		d.renderError(w, r, s, http.StatusNotFound, "Webhooks are not enabled on this controller.")
		return
	}
	id := r.PathValue("id")
	if _, err := d.Webhooks.Redeliver(r.Context(), id, r.PathValue("delivery")); err != nil {
		d.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/webhooks/"+id, http.StatusSeeOther)
}
