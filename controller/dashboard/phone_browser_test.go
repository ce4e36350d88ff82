package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/freeagent-build/freeagent/api"
)

// phoneOverflow lists what sticks out of a 375 px wide page: the page
// scrolling sideways, a navigation link or button cut off, or an element
// past the right edge outside a container that scrolls (or clips) it.
const phoneOverflow = `(function () {
	var w = 375, bad = [];
	var sw = document.scrollingElement.scrollWidth;
	if (sw > w || sw > window.innerWidth) { bad.push("the page is " + sw + " px wide (innerWidth " + window.innerWidth + ")"); }
	document.querySelectorAll("header a, header button").forEach(function (a) {
		var r = a.getBoundingClientRect();
		if (a.className !== "skip" && (r.width === 0 || r.left < 0 || r.right > w)) {
			bad.push("header " + a.tagName + " " + JSON.stringify(a.textContent.trim()) + " at " + Math.round(r.left) + ".." + Math.round(r.right));
		}
	});
	document.querySelectorAll("main *").forEach(function (el) {
		var r = el.getBoundingClientRect();
		if (r.right <= w + 0.5 || r.width === 0) { return; }
		for (var p = el.parentElement; p && p !== document.body; p = p.parentElement) {
			var ox = getComputedStyle(p).overflowX;
			if (ox === "auto" || ox === "scroll" || ox === "hidden") { return; }
		}
		bad.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className && typeof el.className === "string" ? "." + el.className.split(" ").join(".") : "") + " reaches " + Math.round(r.right) + " px");
	});
	return JSON.stringify(bad.slice(0, 8));
})()`

// Every page fits a 375 px phone: the navigation wraps with every link on
// screen, and wide tables scroll inside their own box, not the page.
func TestBrowserPhoneWidth(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	c := newChrome(t)
	ctx := context.Background()

	// Content that pushes widths: long names, messages, URLs and errors.
	receiver := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer receiver.Close()
	hook, err := f.admin.CreateWebhook(ctx, api.WebhookRequest{URL: receiver.URL + "/hooks/builds/" + strings.Repeat("very-long-path-segment/", 4),
		Events: []string{"build.completed", "build.failed", "worker.needs_attention"}, Description: "the team's chat, which wants every build"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.admin.PingWebhook(ctx, hook.ID); err != nil {
		t.Fatal(err)
	}
	w := f.register("mac-studio-in-the-second-floor-meeting-room", api.Capabilities{Platforms: []string{"android", "ios"}, MaxConcurrentBuilds: 1,
		Labels: map[string]string{"xcode": "16.2", "location": "second-floor-meeting-room"}})
	ok := f.submitApp(api.PlatformAndroid, "Shop for Everything Under the Sun", "shop", strings.Repeat("spring sale release with new checkout ", 3), "0123456789abcdef0123456789abcdef01234567")
	f.ended(w, ok.ID, true, 1, 30*time.Second, 4*time.Minute)
	failed := f.submitApp(api.PlatformAndroid, "Shop for Everything Under the Sun", "shop", "a build that fails", "")
	f.ended(w, failed.ID, false, 0, 10*time.Second, 2*time.Minute)
	f.submitApp(api.PlatformIOS, "Shop for Everything Under the Sun", "shop", "waits for a Mac", "")
	f.sealed("build.failed", "build.submitted")

	c.run("phone viewport", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))
	check := func(name, path, ready string) {
		t.Helper()
		c.run("open "+path, chromedp.Navigate(f.url+path), chromedp.WaitVisible(chromedp.CSS(ready)))
		if got := c.eval(phoneOverflow); got != "[]" {
			t.Errorf("%s at 375 px: %s", path, got)
		}
		c.screenshot("phone-" + name)
	}
	check("login", "/login", "#api_key")
	c.login(f.url, f.adminKey)
	for _, p := range []struct{ name, path, ready string }{
		{"overview", "/", "main h1"},
		{"app", "/apps/shop", "main h1"},
		{"builds", "/builds", "table.list"},
		{"build-completed", "/builds/" + ok.ID, "#build-status"},
		{"build-failed", "/builds/" + failed.ID, "#build-status"},
		{"queue", "/queue", "main h1"},
		{"workers", "/workers", "table.list"},
		{"events", "/events", "table.events"},
		{"controllers", "/controllers", "tr[data-controller]"},
		{"webhooks", "/webhooks", "#hook-url"},
		{"deliveries", "/webhooks/" + hook.ID, "table.list"},
		{"not-found", "/no-such-page", "main"},
	} {
		check(p.name, p.path, p.ready)
	}
	// The navigation is reachable: every section's link is on screen.
	c.run("open the overview", chromedp.Navigate(f.url+"/"), chromedp.WaitVisible(chromedp.CSS("header nav")))
	links := c.eval(`Array.prototype.map.call(document.querySelectorAll("header nav a"), function (a) { return a.textContent.trim(); }).join(",")`)
	if links != "Overview,Builds,Queue,Workers,Events,Controllers,Webhooks" {
		t.Errorf("the navigation at 375 px shows %q", links)
	}
}
