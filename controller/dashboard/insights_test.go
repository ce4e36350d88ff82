package dashboard_test

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/freeagent-build/freeagent/api"
)

// submitApp submits a build of app slug with a spec, as expo-build does.
func (f *farm) submitApp(platform, name, slug, message, commit string) api.SubmitResponse {
	f.t.Helper()
	spec := &api.BuildSpec{Version: api.SpecVersion, Platform: platform, ProfileName: "production", Environment: "production",
		App: api.App{Name: name, Slug: slug, Version: "1.4.0"}, Message: message, GitCommit: commit}
	resp, err := f.dev.Submit(context.Background(), api.SubmitRequest{Platform: platform, Spec: spec, Source: bytes.NewReader(project(f.t))})
	if err != nil {
		f.t.Fatalf("submit: %v", err)
	}
	return resp
}

// ended runs a build to its end on w and sets its times: submitted
// daysAgo days before now, waited wait, ran for took.
func (f *farm) ended(w *workerSession, id string, ok bool, daysAgo int, wait, took time.Duration) {
	f.t.Helper()
	job := w.poll()
	if job == nil || job.ID != id {
		f.t.Fatalf("worker got %+v, want %s", job, id)
	}
	w.heartbeat(job)
	r := api.Result{Success: ok, ErrorMessage: "gradle failed", ErrorCode: api.CodeBuildFailed}
	if ok {
		r = api.Result{Success: true, FileName: "app.apk", File: bytes.NewReader([]byte("APK"))}
	}
	w.complete(job, r)
	submitted := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -daysAgo).Add(9 * time.Hour)
	_, err := f.store.Pool().Exec(context.Background(), `UPDATE builds SET submitted_at = $2, started_at = $3, completed_at = $4 WHERE id = $1`,
		id, submitted, submitted.Add(wait), submitted.Add(wait+took))
	if err != nil {
		f.t.Fatal(err)
	}
	_, err = f.store.Pool().Exec(context.Background(), `UPDATE build_attempts SET started_at = $2, ended_at = $3 WHERE build_id = $1`,
		id, submitted.Add(wait), submitted.Add(wait+took))
	if err != nil {
		f.t.Fatal(err)
	}
}

func TestBuildsListNamesApps(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	shop := f.submitApp(api.PlatformAndroid, "Shop <Pro>", "shop", "spring sale release", "0123456789abcdef0123456789abcdef01234567")
	blog := f.submitApp(api.PlatformIOS, "Blog", "blog", "", "")
	raw := f.submit(api.PlatformAndroid)
	b := f.browser()
	b.mustLogin(f.devKey)
	p := b.get("/builds")
	wantContains(t, p, `<a href="/apps/shop">Shop &lt;Pro&gt;</a>`, "<code>shop</code> · 1.4.0", "spring sale release",
		`<code class="commit" title="0123456789abcdef0123456789abcdef01234567">0123456</code>`, "alice", `<a href="/apps/blog">Blog</a>`,
		`<option value="shop">Shop &lt;Pro&gt; (shop)</option>`, `<option value="blog">Blog (blog)</option>`)
	for _, id := range []string{shop.ID, blog.ID, raw.ID} {
		wantContains(t, p, `data-build="`+id+`"`)
	}
	// The filter by app keeps that app's builds.
	p = b.get("/builds?project=shop")
	wantContains(t, p, `data-build="`+shop.ID+`"`, `<option value="shop" selected>`)
	if strings.Contains(p.body, blog.ID) || strings.Contains(p.body, raw.ID) {
		t.Errorf("the shop filter shows other apps' builds")
	}
	// The app's page lists its builds.
	wantContains(t, b.get("/apps/shop"), `data-build="`+shop.ID+`"`, "Shop &lt;Pro&gt;", `id="chart-duration"`)
	if p := b.get("/apps/nope"); p.status != 200 || strings.Contains(p.body, "data-build=") {
		// An app without builds has empty charts and no rows.
		t.Errorf("an unknown app's page: %d", p.status)
	}
}

var pointRE = regexp.MustCompile(`<circle class="pt"[^>]*data-x="([0-9-]+)" data-y="([0-9.e+-]+)"`)

// chartPoints reads the points of a chart's series from a page.
func chartPoints(t *testing.T, body, chartID, seriesName string) map[string]float64 {
	t.Helper()
	i := strings.Index(body, `id="`+chartID+`"`)
	if i < 0 {
		t.Fatalf("no chart %s", chartID)
	}
	svg := body[i : i+strings.Index(body[i:], "</svg>")]
	j := strings.Index(svg, `data-name="`+html.EscapeString(seriesName)+`"`)
	if j < 0 {
		t.Fatalf("chart %s has no series %q:\n%s", chartID, seriesName, svg)
	}
	g := svg[j : j+strings.Index(svg[j:], "</g>")]
	out := map[string]float64{}
	for _, m := range pointRE.FindAllStringSubmatch(g, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		out[m[1]] = v
	}
	return out
}

func TestChartsAggregate(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	w := f.register("mac", api.Capabilities{Platforms: []string{"android", "ios"}, MaxConcurrentBuilds: 1})
	day := func(ago int) string { return time.Now().UTC().AddDate(0, 0, -ago).Format("2006-01-02") }
	// Two days ago: three android builds of 100, 200 and 300 s, one failed;
	// yesterday one of 60 s; queue waits of 10, 20, 30 and 40 s.
	for i, d := range []time.Duration{100, 200, 300} {
		s := f.submitApp(api.PlatformAndroid, "Shop", "shop", "", "")
		f.ended(w, s.ID, i != 1, 2, time.Duration(10*(i+1))*time.Second, d*time.Second)
	}
	s := f.submitApp(api.PlatformAndroid, "Blog", "blog", "", "")
	f.ended(w, s.ID, true, 1, 40*time.Second, 60*time.Second)
	// Older than the window: not counted.
	s = f.submitApp(api.PlatformAndroid, "Shop", "shop", "", "")
	f.ended(w, s.ID, true, 45, time.Second, time.Hour)

	b := f.browser()
	b.mustLogin(f.adminKey)
	home := b.get("/")
	wantContains(t, home, "<h1>Overview</h1>", `href="/apps/shop"`, `href="/apps/blog"`)
	p50 := chartPoints(t, home.body, "chart-duration", "android p50")
	p90 := chartPoints(t, home.body, "chart-duration", "android p90")
	// percentile_cont of 100 and 300 (the failed build is not a duration).
	if len(p50) != 2 || p50[day(2)] != 200 || p50[day(1)] != 60 || p90[day(2)] != 280 {
		t.Errorf("durations: p50 %v, p90 %v", p50, p90)
	}
	if q := chartPoints(t, home.body, "chart-queue", "android p50"); q[day(2)] != 20 || q[day(1)] != 40 {
		t.Errorf("queue waits: %v", q)
	}
	if r := chartPoints(t, home.body, "chart-success", "success rate"); len(r) != 2 || r[day(2)] < 0.66 || r[day(2)] > 0.67 || r[day(1)] != 1 {
		t.Errorf("success rate: %v", r)
	}
	u := chartPoints(t, home.body, "chart-utilisation", "busy share of the workers' slots")
	// 100+200+300 s of one slot's 86400 s.
	if got := u[day(2)]; got < 600.0/86400*0.99 || got > 600.0/86400*1.01 {
		t.Errorf("utilisation two days ago: %v", u)
	}
	// One app's page charts that app alone, without the farm's utilisation.
	app := b.get("/apps/blog")
	if p := chartPoints(t, app.body, "chart-duration", "android p50"); len(p) != 1 || p[day(1)] != 60 {
		t.Errorf("blog's durations: %v", p)
	}
	if strings.Contains(app.body, "chart-utilisation") {
		t.Error("an app's page shows the farm's utilisation")
	}
	// A developer bound to a project sees that project's figures only.
	if _, err := f.store.Pool().Exec(context.Background(), `INSERT INTO api_key_projects (key_id, project) SELECT id, 'blog' FROM api_keys WHERE name = 'alice'`); err != nil {
		t.Fatal(err)
	}
	dev := f.browser()
	dev.mustLogin(f.devKey)
	mine := dev.get("/")
	if p := chartPoints(t, mine.body, "chart-duration", "android p50"); len(p) != 1 {
		t.Errorf("a blog developer's durations: %v", p)
	}
	if strings.Contains(mine.body, `href="/apps/shop"`) || strings.Contains(mine.body, "chart-utilisation") {
		t.Error("a blog developer sees the shop app or the farm's utilisation")
	}
	if p := dev.get("/apps/shop"); p.status != 404 {
		t.Errorf("another project's app page: %d", p.status)
	}
}

func TestChartsInBrowser(t *testing.T) {
	t.Parallel()
	c := newChrome(t)
	f := newFarm(t)
	w := f.register("mac", api.Capabilities{Platforms: []string{"android", "ios"}, MaxConcurrentBuilds: 2})
	for i := range 6 {
		platform := []string{api.PlatformAndroid, api.PlatformIOS}[i%2]
		s := f.submitApp(platform, "Shop & Co", "shop", fmt.Sprintf("release %d", i), "")
		f.ended(w, s.ID, i != 3, i%3, time.Duration(5+i)*time.Second, time.Duration(120+30*i)*time.Second)
	}
	c.login(f.url, f.adminKey)
	c.run("open the overview", chromedp.Navigate(f.url+"/"), chromedp.WaitVisible(chromedp.CSS("#chart-duration")))
	for _, id := range []string{"chart-duration", "chart-queue", "chart-success", "chart-utilisation"} {
		// Drawn, inside the page, with points inside the drawing.
		got := c.eval(`(function () {
			var svg = document.getElementById("` + id + `"), r = svg.getBoundingClientRect();
			var pts = svg.querySelectorAll("circle.pt"), bad = 0;
			pts.forEach(function (p) { var y = Number(p.dataset.y); if (!(y >= 0) || p.getBoundingClientRect().bottom > r.bottom + 1) { bad++; } });
			return r.width > 200 && r.height > 60 && r.right <= window.innerWidth ? pts.length + " points, " + bad + " bad" : "not laid out";
		})()`)
		if !strings.HasSuffix(got, " 0 bad") || strings.HasPrefix(got, "0 ") {
			t.Errorf("%s: %s", id, got)
		}
	}
	if got := c.eval(`document.querySelector('#chart-duration g.series[data-name="ios p50"]') !== null ? "yes" : "no"`); got != "yes" {
		t.Error("no ios series in the duration chart")
	}
	c.screenshot("overview-charts")
	c.run("open the app", chromedp.Click(chromedp.CSS(`a[href="/apps/shop"]`)), chromedp.WaitVisible(chromedp.CSS("#chart-success")))
	if got := c.eval(`document.querySelector("h1").textContent`); !strings.Contains(got, "Shop & Co") {
		t.Errorf("the app page's heading: %q", got)
	}
	c.screenshot("app-charts")
	c.run("phone viewport", chromedp.EmulateViewport(375, 800, chromedp.EmulateMobile), chromedp.Navigate(f.url+"/"),
		chromedp.WaitVisible(chromedp.CSS("#chart-duration")))
	c.until("the overview fits a phone's width", `window.innerWidth <= 375 && document.documentElement.scrollWidth <= window.innerWidth`)
	c.screenshot("overview-phone")
}
