package dashboard_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/freeagent-build/freeagent/api"
)

// sealed waits until the audit log holds an event of each type in types.
func (f *farm) sealed(types ...string) []api.Event {
	f.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		list, err := f.admin.Events(context.Background(), 0, 1000)
		if err != nil {
			f.t.Fatal(err)
		}
		missing := slices.DeleteFunc(slices.Clone(types), func(typ string) bool {
			return slices.ContainsFunc(list.Events, func(e api.Event) bool { return e.EventType == typ })
		})
		if len(missing) == 0 {
			return list.Events
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("events %v not sealed; the log has %+v", missing, list.Events)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The events page reads as rows (type, build, actor, time, what happened);
// each event's JSON is folded away until opened.
func TestBrowserEvents(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	c := newChrome(t)
	b := f.submitApp(api.PlatformAndroid, "Shop", "shop", "spring sale", "")
	w := f.register("mac-studio", api.Capabilities{Platforms: []string{"android"}, MaxConcurrentBuilds: 1})
	f.ended(w, b.ID, false, 0, time.Second, time.Minute)
	evs := f.sealed("build.submitted", "build.assigned", "build.failed", "worker.registered")
	var submitted api.Event
	for _, e := range evs {
		if e.EventType == "build.submitted" {
			submitted = e
		}
	}

	c.login(f.url, f.adminKey)
	c.run("open the events", chromedp.Navigate(f.url+"/events"), chromedp.WaitVisible(chromedp.CSS("table.events")))
	c.synced()
	row := func(typ string) string { return `document.querySelector('tr[data-type="` + typ + `"]')` }
	for typ, want := range map[string][]string{
		"build.submitted":   {"build.submitted", b.ID[:10], "key alice", "Submitted android build, profile production, app shop", "ago"},
		"build.assigned":    {"worker mac-studio", "Assigned to worker mac-studio"},
		"build.failed":      {"worker mac-studio", "Failed: " + string(api.CodeBuildFailed)},
		"worker.registered": {"worker mac-studio", "Worker mac-studio registered"},
	} {
		text := c.eval(row(typ) + `.innerText`)
		for _, s := range want {
			if !strings.Contains(text, s) {
				t.Errorf("the %s row lacks %q: %q", typ, s, text)
			}
		}
	}
	if href := c.eval(row("build.submitted") + `.querySelector("a").getAttribute("href")`); href != "/builds/"+b.ID {
		t.Errorf("the build link: %q", href)
	}
	if title := c.eval(row("build.submitted") + `.querySelector("time").title`); title != submitted.Timestamp.UTC().Format("2006-01-02 15:04:05 UTC") {
		t.Errorf("the absolute time on hover: %q, want %s", title, submitted.Timestamp)
	}
	jsonOf := `document.querySelector('tr[data-sequence="` + strconv.FormatInt(submitted.Sequence, 10) + `"] pre.payload')`
	// checkVisibility, not offsetHeight: a closed <details> lays its content
	// out but does not render it.
	if c.eval(`String(`+jsonOf+`.checkVisibility())`) != "false" || strings.Contains(c.eval(row("build.submitted")+`.innerText`), `"event_hash"`) {
		t.Fatalf("the event's JSON shows before it is opened: %q", c.eval(row("build.submitted")+`.innerText`))
	}
	c.screenshot("events-rows")
	c.run("open the JSON", chromedp.Click(chromedp.CSS(`tr[data-type="build.submitted"] details summary`)))
	c.until("the JSON shows", jsonOf+`.checkVisibility()`)
	var ev struct {
		api.Event
		Payload struct{ Profile string } `json:"payload"`
	}
	if err := json.Unmarshal([]byte(c.eval(jsonOf+`.textContent`)), &ev); err != nil || ev.ID != submitted.ID || ev.EventHash != submitted.EventHash ||
		ev.Payload.Profile != "production" {
		t.Errorf("the JSON shown: %+v %v", ev, err)
	}
	// A live refresh (a new event) leaves the opened JSON open.
	f.submit(api.PlatformAndroid)
	c.until("the new build's event arrives", `document.querySelectorAll('tr[data-type="build.submitted"]').length === 2`)
	if c.eval(`String(`+jsonOf+`.checkVisibility())`) != "true" {
		t.Error("a live refresh folded the opened JSON away")
	}
	c.screenshot("events-json")
}
