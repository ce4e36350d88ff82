package dashboard_test

import (
	"crypto/hmac"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/webhooks"
)

// received is one request a webhook receiver got.
type received struct {
	header http.Header
	body   []byte
}

// An admin adds an endpoint in the dashboard, copies its secret (shown
// once), presses Test, sees the ping arrive signed and in the delivery
// log, and deletes the endpoint.
func TestBrowserWebhooks(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	c := newChrome(t)
	var mu sync.Mutex
	var got []received
	// The receiver answers once the page has shown the ping pending: the
	// outcome must then arrive live, without a reload.
	answer := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		mu.Lock()
		got = append(got, received{header: r.Header.Clone(), body: body})
		mu.Unlock()
		select {
		case <-answer:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer closeOnce(answer)

	c.login(f.url, f.adminKey)
	c.run("open the webhooks", chromedp.Navigate(f.url+"/webhooks"), chromedp.WaitVisible(chromedp.CSS("#hook-url")))
	// A refusal keeps what was typed and says why.
	c.run("add an endpoint with a bad pattern",
		chromedp.SendKeys(chromedp.CSS("#hook-url"), srv.URL+"/hook"),
		chromedp.SetValue(chromedp.CSS("#hook-events"), "Build!"),
		chromedp.Click(chromedp.CSS(`form[action="/webhooks"] button[type=submit]`)))
	c.until("the refusal is shown", `document.getElementById("webhook-problem") !== null && document.getElementById("webhook-problem").textContent.includes("Build!")`)
	if v := c.eval(`document.getElementById("hook-url").value`); v != srv.URL+"/hook" {
		t.Errorf("the URL typed is lost after a refusal: %q", v)
	}
	c.run("add the endpoint",
		chromedp.SetValue(chromedp.CSS("#hook-events"), "build.completed, build.failed"),
		chromedp.SendKeys(chromedp.CSS("#hook-description"), "team chat"),
		chromedp.Click(chromedp.CSS(`form[action="/webhooks"] button[type=submit]`)))
	c.until("the secret is shown", `document.getElementById("webhook-secret") !== null`)
	secret := c.eval(`document.getElementById("webhook-secret").textContent`)
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("secret shown: %q", secret)
	}
	c.screenshot("webhook-added")
	list, err := f.admin.ListWebhooks(t.Context())
	if err != nil || len(list.Webhooks) != 1 || list.Webhooks[0].URL != srv.URL+"/hook" || list.Webhooks[0].Description != "team chat" ||
		strings.Join(list.Webhooks[0].Events, ",") != "build.completed,build.failed" {
		t.Fatalf("the endpoint added: %+v %v", list, err)
	}
	hook := list.Webhooks[0]
	c.run("reload the list", chromedp.Navigate(f.url+"/webhooks"), chromedp.WaitVisible(chromedp.CSS(`tr[data-webhook="`+hook.ID+`"]`)))
	if strings.Contains(c.eval(`document.body.innerHTML`), secret) {
		t.Fatal("the secret is shown again after the page that created it")
	}

	c.run("test the endpoint", chromedp.Click(chromedp.CSS(`form[action="/webhooks/`+hook.ID+`/ping"] button`)))
	c.until("the delivery log opens", `location.pathname === "/webhooks/`+hook.ID+`"`)
	c.synced()
	c.until("the ping shows pending while the receiver holds it", `(function () {
		var r = document.querySelector('tr[data-status="pending"]');
		return r !== null && r.textContent.includes("ping");
	})()`)
	c.markPage()
	closeOnce(answer)
	c.until("the ping shows delivered in the log", `(function () {
		var r = document.querySelector('tr[data-status="delivered"]');
		return r !== null && r.textContent.includes("ping") && r.textContent.includes("HTTP 200");
	})()`)
	c.wantSamePage("the delivery log while the ping was answered")
	c.screenshot("webhook-ping")
	mu.Lock()
	reqs := append([]received(nil), got...)
	mu.Unlock()
	if len(reqs) != 1 {
		t.Fatalf("the receiver got %d requests, want the one ping", len(reqs))
	}
	h := reqs[0].header
	if want := webhooks.Sign([]byte(secret), h.Get(api.HeaderWebhookTimestamp), reqs[0].body); !hmac.Equal([]byte(want), []byte(h.Get(api.HeaderWebhookSignature))) {
		t.Fatalf("the ping's signature %q does not check out under the secret shown", h.Get(api.HeaderWebhookSignature))
	}
	var ev api.Event
	if err := json.Unmarshal(reqs[0].body, &ev); err != nil || ev.EventType != "ping" || ev.EntityID != hook.ID || h.Get(api.HeaderWebhookEvent) != "ping" {
		t.Fatalf("ping body %s (%v), event header %q", reqs[0].body, err, h.Get(api.HeaderWebhookEvent))
	}

	c.run("delete the endpoint", chromedp.Click(chromedp.CSS(`form[action="/webhooks/`+hook.ID+`/delete"] button`)))
	c.until("back on the list, without it", `location.pathname === "/webhooks" && document.querySelector('tr[data-webhook]') === null`)
	if list, err := f.admin.ListWebhooks(t.Context()); err != nil || len(list.Webhooks) != 0 {
		t.Fatalf("after delete: %+v %v", list, err)
	}
	c.screenshot("webhook-deleted")
}

// The webhook actions are an admin's, each behind the session's CSRF token.
func TestWebhookActionsNeedAdminAndCSRF(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	add := url.Values{"url": {"https://chat.example.com/hooks"}, "events": {"build.*"}}
	dev := f.browser()
	dev.mustLogin(f.devKey)
	devForm := url.Values{"csrf": {dev.get("/builds").csrf(t)}, "url": add["url"], "events": add["events"]}
	if p := dev.post("/webhooks", devForm); p.status != http.StatusForbidden {
		t.Errorf("a developer adding a webhook: want 403, got %d", p.status)
	}
	admin := f.browser()
	admin.mustLogin(f.adminKey)
	if p := admin.post("/webhooks", add); p.status != http.StatusForbidden || !strings.Contains(p.body, "security token") {
		t.Errorf("adding without the token: want 403, got %d", p.status)
	}
	token := admin.get("/webhooks").csrf(t)
	form := url.Values{"csrf": {token}, "url": add["url"], "events": add["events"]}
	p := admin.post("/webhooks", form)
	if p.status != http.StatusCreated || !strings.Contains(p.body, "whsec_") {
		t.Fatalf("adding: want 201 with the secret, got %d: %.500s", p.status, p.body)
	}
	list, err := f.admin.ListWebhooks(t.Context())
	if err != nil || len(list.Webhooks) != 1 {
		t.Fatalf("after adding: %+v %v", list, err)
	}
	id := list.Webhooks[0].ID
	for _, action := range []string{"/ping", "/delete"} {
		if p := admin.post("/webhooks/"+id+action, url.Values{}); p.status != http.StatusForbidden {
			t.Errorf("%s without the token: want 403, got %d", action, p.status)
		}
		if p := admin.post("/webhooks/no-such-hook"+action, url.Values{"csrf": {token}}); p.status != http.StatusNotFound {
			t.Errorf("%s of an unknown webhook: want 404, got %d", action, p.status)
		}
	}
	if p := admin.post("/webhooks/"+id+"/ping", url.Values{"csrf": {token}}); p.status != http.StatusSeeOther || p.header.Get("Location") != "/webhooks/"+id {
		t.Errorf("ping: want 303 to the delivery log, got %d %q", p.status, p.header.Get("Location"))
	}
	if p := admin.post("/webhooks/"+id+"/delete", url.Values{"csrf": {token}}); p.status != http.StatusSeeOther {
		t.Errorf("delete: want 303, got %d", p.status)
	}
	if list, err := f.admin.ListWebhooks(t.Context()); err != nil || len(list.Webhooks) != 0 {
		t.Errorf("after delete: %+v %v", list, err)
	}
}

// closeOnce closes ch unless it is closed already.
func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}
