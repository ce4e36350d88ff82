package dashboard

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

// deliveriesShown is how many of an endpoint's latest deliveries its page lists.
const deliveriesShown = 100

// withWebhooks answers 404 when this controller delivers no webhooks.
func (d *Dashboard) withWebhooks(h func(http.ResponseWriter, *http.Request, *session)) func(http.ResponseWriter, *http.Request, *session) {
	return func(w http.ResponseWriter, r *http.Request, s *session) {
		if d.Webhooks == nil {
			d.renderError(w, r, s, http.StatusNotFound, "Webhooks are not enabled on this controller.")
			return
		}
		h(w, r, s)
	}
}

// webhooksView is the endpoints page: the list, the add form (refilled
// after a refusal, with the reason) and, once, a new endpoint's secret.
type webhooksView struct {
	Hooks   []api.Webhook
	Created *api.Webhook // just added: its secret is shown this once
	Form    webhookForm
	Problem string
}

// webhookForm is the add form's fields as typed.
type webhookForm struct{ URL, Events, Projects, Description string }

// defaultWebhookEvents prefills the form: what a chat notification wants.
const defaultWebhookEvents = "build.*"

func (d *Dashboard) webhookList(w http.ResponseWriter, r *http.Request, s *session) {
	d.renderWebhooks(w, r, s, http.StatusOK, webhooksView{Form: webhookForm{Events: defaultWebhookEvents}})
}

func (d *Dashboard) renderWebhooks(w http.ResponseWriter, r *http.Request, s *session, status int, v webhooksView) {
	list, err := d.Webhooks.List(r.Context())
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	v.Hooks = list.Webhooks
	d.render(w, r, "webhooks", status, view{Title: "Webhooks", Nav: "webhooks", Session: s, Data: v})
}

// fields splits a list typed as "a, b c" into its items.
func fields(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
}

// createWebhook adds an endpoint from the form and answers with the page
// itself (not a redirect), the one place its secret is ever shown.
func (d *Dashboard) createWebhook(w http.ResponseWriter, r *http.Request, s *session) {
	f := webhookForm{URL: r.PostForm.Get("url"), Events: r.PostForm.Get("events"), Projects: r.PostForm.Get("projects"),
		Description: strings.TrimSpace(r.PostForm.Get("description"))}
	hook, err := d.Webhooks.Create(r.Context(), api.WebhookRequest{URL: f.URL, Events: fields(f.Events), Projects: fields(f.Projects),
		Description: f.Description})
	if isInvalid(err) {
		d.renderWebhooks(w, r, s, http.StatusUnprocessableEntity, webhooksView{Form: f, Problem: trimSentinel(err, store.ErrInvalid)})
		return
	}
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	d.renderWebhooks(w, r, s, http.StatusCreated, webhooksView{Created: &hook, Form: webhookForm{Events: defaultWebhookEvents}})
}

// pingWebhook queues a test delivery and shows the endpoint's log, where it lands.
func (d *Dashboard) pingWebhook(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	if _, err := d.Webhooks.Ping(r.Context(), id); err != nil {
		d.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/webhooks/"+id, http.StatusSeeOther)
}

func (d *Dashboard) deleteWebhook(w http.ResponseWriter, r *http.Request, s *session) {
	if err := d.Webhooks.Delete(r.Context(), r.PathValue("id")); err != nil {
		d.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/webhooks", http.StatusSeeOther)
}

type deliveriesView struct {
	Hook       api.Webhook
	Deliveries []api.WebhookDelivery
}

func (d *Dashboard) webhookDeliveries(w http.ResponseWriter, r *http.Request, s *session) {
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
		Stream: "/ui/stream?webhook=" + url.QueryEscape(id), Data: v})
}

func (d *Dashboard) redeliver(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	if _, err := d.Webhooks.Redeliver(r.Context(), id, r.PathValue("delivery")); err != nil {
		d.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/webhooks/"+id, http.StatusSeeOther)
}
