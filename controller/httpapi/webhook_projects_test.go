package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
)

// An endpoint bound to projects receives only their builds' events (and
// their project events); an unbound endpoint receives every event. Real
// HTTP receivers, a real dispatcher and sealer.
func TestWebhooksFilteredByProject(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.admin.CreateWebhook(ctx, api.WebhookRequest{URL: "https://example.com/hook", Events: []string{"*"}, Projects: []string{"not a project"}}); api.StatusOf(err) != http.StatusUnprocessableEntity {
		t.Fatalf("a bad project name: %v, want 422", err)
	}
	receivers := map[string]*receiver{}
	for _, name := range []string{"all", "p1", "p2"} {
		rcv, srv := newReceiver(t, 0)
		req := api.WebhookRequest{URL: srv.URL + "/hook", Events: []string{"*"}}
		if name != "all" {
			req.Projects = []string{name, name} // a repeat is kept once
		}
		hook, err := e.admin.CreateWebhook(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if name != "all" && !slices.Equal(hook.Projects, []string{name}) {
			t.Fatalf("created %s: projects %v", name, hook.Projects)
		}
		rcv.mu.Lock()
		rcv.secret = hook.Secret
		rcv.mu.Unlock()
		receivers[name] = rcv
	}
	list, err := e.admin.ListWebhooks(ctx)
	if err != nil || len(list.Webhooks) != 3 || len(list.Webhooks[0].Projects) != 0 || !slices.Equal(list.Webhooks[1].Projects, []string{"p1"}) {
		t.Fatalf("list: %+v %v", list, err)
	}

	e.runSealer()
	e.runDispatcher()
	w := e.register("w", api.Capabilities{Platforms: []string{"android"}, MaxConcurrentBuilds: 1})
	builds := map[string]string{} // build id → project
	for _, p := range []string{"p1", "p2", "p3"} {
		sub, err := e.admin.Submit(ctx, api.SubmitRequest{Platform: api.PlatformAndroid, Project: p,
			Source: bytes.NewReader(controllertest.Project(t, map[string]string{"package.json": "{}"}))})
		if err != nil {
			t.Fatal(err)
		}
		builds[sub.ID] = p
		job := w.poll(0)
		if _, err := w.complete(job, api.Result{Success: true}); err != nil {
			t.Fatal(err)
		}
	}

	// Wait until the unbound endpoint has every event of the log.
	var all []api.Event
	eventually(t, 10*time.Second, "every event reaches the unbound endpoint", func() bool {
		evs, err := e.store.Events(ctx, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := receivers["all"].snapshot()
		all = evs
		completed := 0
		for _, ev := range evs {
			if ev.EventType == "build.completed" {
				completed++
			}
		}
		return completed == len(builds) && len(got) == len(evs)
	})
	workerEvents := 0
	for _, ev := range all {
		if ev.EntityType == "worker" {
			workerEvents++
		}
	}
	if workerEvents == 0 {
		t.Fatal("test setup: no worker events in the log")
	}
	for _, p := range []string{"p1", "p2"} {
		var want []string
		for _, ev := range all {
			if ev.EntityType == "build" && builds[ev.EntityID] == p {
				want = append(want, ev.ID)
			}
		}
		// The fan-out has passed every event (the unbound endpoint has them
		// all); the bound endpoints' deliveries were queued with them.
		var got map[string]api.Event
		var problems []string
		eventually(t, 10*time.Second, p+"'s deliveries arrive", func() bool {
			got, problems = receivers[p].snapshot()
			return len(got) >= len(want)
		})
		var ids []string
		for _, ev := range got {
			ids = append(ids, ev.ID)
			if ev.EntityType != "build" || builds[ev.EntityID] != p {
				t.Errorf("%s's endpoint received %s of %s %s", p, ev.EventType, ev.EntityType, ev.EntityID)
			}
		}
		slices.Sort(want)
		slices.Sort(ids)
		if len(want) == 0 || !slices.Equal(ids, want) {
			t.Errorf("%s's endpoint received %v, want %v", p, ids, want)
		}
		if len(problems) > 0 {
			t.Errorf("%s: %v", p, problems)
		}
	}
}
