package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

// A ping goes to the one endpoint it names, signed like any delivery, and
// shows in that endpoint's delivery log only; it is no audit event.
func TestWebhookPing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	rcv, srv := newReceiver(t, 0)
	hook, err := e.admin.CreateWebhook(ctx, api.WebhookRequest{URL: srv.URL + "/hook", Events: []string{"build.completed"}})
	if err != nil {
		t.Fatal(err)
	}
	// The other endpoint has its own receiver: it may get the audit log's
	// webhook.created events, never the ping.
	otherRcv, otherSrv := newReceiver(t, 0)
	other, err := e.admin.CreateWebhook(ctx, api.WebhookRequest{URL: otherSrv.URL + "/hook", Events: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	rcv.mu.Lock()
	rcv.secret = hook.Secret
	rcv.mu.Unlock()
	otherRcv.mu.Lock()
	otherRcv.secret = other.Secret
	otherRcv.mu.Unlock()

	if _, err := e.developer.PingWebhook(ctx, hook.ID); api.StatusOf(err) != http.StatusForbidden {
		t.Fatalf("a developer key pinged a webhook: %v", err)
	}
	if _, err := e.admin.PingWebhook(ctx, "no-such-hook"); api.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("ping of an unknown webhook: %v", err)
	}
	queued, err := e.admin.PingWebhook(ctx, hook.ID)
	if err != nil || queued.EventType != "ping" || queued.Status != "pending" || queued.WebhookID != hook.ID || queued.EventSequence != 0 {
		t.Fatalf("ping: %+v %v", queued, err)
	}
	e.runDispatcher()
	var got api.Event
	eventually(t, 10*time.Second, "the ping arrives", func() bool {
		acc, problems := rcv.snapshot()
		if len(problems) > 0 {
			t.Fatalf("receiver: %v", problems)
		}
		ev, ok := acc[queued.ID]
		got = ev
		return ok
	})
	var payload struct {
		WebhookID string   `json:"webhook_id"`
		URL       string   `json:"url"`
		Events    []string `json:"events"`
	}
	if err := json.Unmarshal(got.Payload, &payload); err != nil || got.EventType != "ping" || got.EntityType != "webhook" ||
		got.EntityID != hook.ID || got.ID != queued.EventID || payload.WebhookID != hook.ID || payload.URL != hook.URL {
		t.Fatalf("ping event: %+v (payload %+v, %v)", got, payload, err)
	}
	eventually(t, 10*time.Second, "the delivery log shows the ping delivered", func() bool {
		dl, err := e.admin.WebhookDeliveries(ctx, hook.ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(dl.Deliveries) == 1 && dl.Deliveries[0].ID == queued.ID && dl.Deliveries[0].Status == "delivered" &&
			len(dl.Deliveries[0].Log) == 1 && *dl.Deliveries[0].Log[0].ResponseCode == http.StatusOK
	})
	dl, err := e.admin.WebhookDeliveries(ctx, other.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dl.Deliveries {
		if d.EventType == "ping" {
			t.Fatalf("the ping went to the other endpoint too: %+v", d)
		}
	}
	if acc, _ := otherRcv.snapshot(); len(acc) > 0 {
		for _, ev := range acc {
			if ev.EventType == "ping" {
				t.Fatalf("the other endpoint received the ping: %+v", ev)
			}
		}
	}
	if evs, err := e.admin.Events(ctx, 0, 100); err != nil {
		t.Fatal(err)
	} else {
		for _, ev := range evs.Events {
			if ev.EventType == "ping" {
				t.Fatalf("the ping entered the audit log: %+v", ev)
			}
		}
	}
}
