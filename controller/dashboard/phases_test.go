package dashboard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/buildphase"
)

// TestBuildPagePhases: a build's log is split into its phases, live while
// it runs; the failing phase is open and its last lines are the error
// summary, shown once and preformatted.
func TestBuildPagePhases(t *testing.T) {
	t.Parallel()
	c := newChrome(t)
	f := newFarm(t)
	ctx := context.Background()
	w := f.register("mac", api.Capabilities{Platforms: []string{"android"}, MaxConcurrentBuilds: 1})
	sub := f.submitApp(api.PlatformAndroid, "Shop", "shop", "", "")
	job := w.poll()
	w.heartbeat(job)
	vm := f.vmToken(job)
	var offset int64
	write := func(lines ...string) {
		t.Helper()
		n, err := f.worker.AppendLog(ctx, job.ID, vm, offset, []byte(strings.Join(lines, "\n")+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		offset = n
	}
	now := time.Now()
	write("▸ freeagent-vm 1.0", buildphase.Marker(buildphase.Source, now), "▸ downloaded the source", buildphase.Marker(buildphase.Install, now.Add(time.Second)), "added 1200 packages")

	c.login(f.url, f.devKey)
	c.run("open the build", chromedp.Navigate(f.url+"/builds/"+sub.ID), chromedp.WaitVisible(chromedp.CSS("#phases")))
	c.synced()
	phases := func() string {
		return c.eval(`Array.from(document.querySelectorAll("#phases details")).map(function (d) {
			return d.dataset.phase + ":" + d.querySelector(".ph-status").textContent + (d.open ? ":open" : "") }).join(" ")`)
	}
	if got := phases(); got != "spin_up:succeeded source:succeeded install:running:open" {
		t.Fatalf("phases of the running build: %s", got)
	}
	// A new phase appears live.
	write(buildphase.Marker(buildphase.Build, now.Add(time.Minute)), "> Task :app:compileReleaseKotlin FAILED", "e: Unresolved reference: foo",
		"✖ `gradlew :app:assembleRelease` failed with exit status 1")
	c.until("the build phase appears live", `document.querySelector('#phases details[data-phase="build"][open]') !== null &&
		document.getElementById("log").textContent.includes("Unresolved reference")`)
	if got := phases(); got != "spin_up:succeeded source:succeeded install:succeeded build:running:open" {
		t.Errorf("phases after the live marker: %s", got)
	}
	c.screenshot("build-phases-live")

	msg := "`gradlew :app:assembleRelease` failed with exit status 1"
	w.complete(job, api.Result{ErrorCode: api.CodeBuildFailed, ErrorMessage: msg + buildphase.TailSeparator +
		"e: Unresolved reference: foo\n✖ " + msg})
	c.until("the page shows failed", `document.getElementById("build-status").textContent === "failed"`)
	c.run("reload", chromedp.Navigate(f.url+"/builds/"+sub.ID), chromedp.WaitVisible(chromedp.CSS("#error-summary")))
	if got := phases(); got != "spin_up:succeeded source:succeeded install:succeeded build:failed:open" {
		t.Errorf("phases of the failed build: %s", got)
	}
	headline := c.eval(`document.getElementById("error-headline").textContent`)
	if strings.Contains(headline, "last lines") || strings.Contains(headline, "Unresolved") || !strings.Contains(headline, msg) {
		t.Errorf("the error headline: %q", headline)
	}
	summary := c.eval(`document.getElementById("error-summary").textContent`)
	if !strings.Contains(summary, "e: Unresolved reference: foo\n✖ `gradlew") || strings.Contains(summary, "added 1200 packages") {
		t.Errorf("the error summary (the failing phase's last lines, as lines): %q", summary)
	}
	// Outside the log itself the failing lines are told once: the summary.
	if n := strings.Count(c.eval(`document.querySelector("main").textContent`), "Unresolved reference"); n != 2 { // the summary and the log
		t.Errorf("the page shows the failing line %d times", n)
	}
	c.screenshot("build-phases-failed")
}
