package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

// chromium finds a Chromium or Chrome binary.
func chromium(t *testing.T) string {
	t.Helper()
	return testtool.Path(t, "chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
}

// artifactsDir is where the screenshots go: $TEST_ARTIFACTS_DIR, else
// <repo>/.artifacts/dashboard.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TEST_ARTIFACTS_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", ".artifacts")
	}
	dir, err := filepath.Abs(filepath.Join(dir, "dashboard"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// chrome drives one headless browser.
type chrome struct {
	t   *testing.T
	ctx context.Context
	dir string
}

func newChrome(t *testing.T) *chrome {
	path := chromium(t)
	// Without the background-networking flags Chromium stalls on a closed network.
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	c := &chrome{t: t, ctx: ctx, dir: artifactsDir(t)}
	// The first call starts the browser, which lives as long as that call's
	// context: it must be the test's, without a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return c
}

// run performs steps, failing the test with what was being done.
func (c *chrome) run(what string, steps ...chromedp.Action[chromedp.Void]) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		c.fatal(what, err)
	}
}

func (c *chrome) fatal(what string, err error) {
	c.t.Helper()
	body, _ := chromedp.Run(c.ctx, chromedp.Text(chromedp.CSS("body"))) // best effort, for the message
	c.t.Fatalf("%s: %v\npage text: %.800s", what, err, body)
}

// until waits for a JavaScript condition to hold. A navigation in between
// (a form post, a redirect) interrupts the poll; it is then polled again.
func (c *chrome) until(what, js string) {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithDeadline(c.ctx, deadline)
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond)))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.fatal("waiting until "+what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// eval evaluates a JavaScript expression to a string.
func (c *chrome) eval(js string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		c.fatal("evaluate "+js, err)
	}
	return v
}

func (c *chrome) screenshot(name string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		c.fatal("screenshot "+name, err)
	}
	if err := os.WriteFile(filepath.Join(c.dir, name+".png"), png, 0o644); err != nil {
		c.t.Fatal(err)
	}
}

func (c *chrome) login(base, key string) {
	c.t.Helper()
	c.run("sign in",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#api_key")),
		chromedp.SendKeys(chromedp.CSS("#api_key"), key),
		chromedp.Click(chromedp.CSS("main form button[type=submit]")),
	)
	c.until("the overview after sign-in", `document.querySelector("h1") && document.querySelector("h1").textContent === "Overview"`)
	c.run("open the builds", chromedp.Navigate(base+"/builds"))
	c.until("the builds page", `document.querySelector("h1") && document.querySelector("h1").textContent === "Builds"`)
	c.synced()
}

// synced waits until a live page has caught up after its stream connected,
// so a click does not race the first refresh.
func (c *chrome) synced() {
	c.t.Helper()
	c.until("the page is live", `document.body.hasAttribute("data-synced")`)
}

// markPage tags the current document; reloading or navigating loses the tag.
func (c *chrome) markPage() { c.eval(`window.faMarker = "same page"`) }

func (c *chrome) wantSamePage(what string) {
	c.t.Helper()
	if c.eval(`window.faMarker || ""`) != "same page" {
		c.t.Fatalf("%s: the page reloaded", what)
	}
}

func TestBrowser(t *testing.T) {
	t.Parallel()
	start := time.Now()
	// The browser closes first (cleanups run last-in first-out): Chrome's
	// idle preconnected sockets would hold the controller's shutdown for 5 s.
	f := newFarm(t)
	c := newChrome(t)
	ctx := context.Background()

	receiver := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer receiver.Close()
	hook, err := f.admin.CreateWebhook(ctx, api.WebhookRequest{URL: receiver.URL, Events: []string{"build.*"}, Description: "chat notifications"})
	if err != nil {
		t.Fatal(err)
	}

	// Login page, then sign in as an admin.
	c.run("open the dashboard", chromedp.Navigate(f.url+"/"), chromedp.WaitVisible(chromedp.CSS("#api_key")))
	c.screenshot("login")
	c.login(f.url, f.adminKey)
	if strings.Contains(c.eval(`document.cookie`), "freeagent_session") {
		t.Errorf("the session cookie is readable from JavaScript (not HttpOnly)")
	}

	// A build appears in the list and moves to completed without a reload.
	c.markPage()
	b1 := f.submit(api.PlatformAndroid)
	row := `document.querySelector('tr[data-build="` + b1.ID + `"]')`
	c.until("the submitted build appears", row+` !== null`)
	w := f.register("mac-studio", api.Capabilities{Platforms: []string{"android"}, MaxConcurrentBuilds: 1})
	job := w.poll()
	if job == nil || job.ID != b1.ID {
		t.Fatalf("worker got %+v, want %s", job, b1.ID)
	}
	w.heartbeat(job)
	c.until("the build shows as building", row+`.dataset.status === "building"`)
	w.complete(job, api.Result{Success: true, FileName: "app.apk", File: bytes.NewReader([]byte("APK bytes"))})
	c.until("the build shows as completed", row+`.dataset.status === "completed"`)
	c.wantSamePage("list while the build ran")
	c.screenshot("builds")

	// A running build's page follows its log live and shows the end.
	b2 := f.submit(api.PlatformAndroid)
	c.run("open the build page", chromedp.Navigate(f.url+"/builds/"+b2.ID), chromedp.WaitVisible(chromedp.CSS("#log")))
	c.synced()
	c.markPage()
	job = w.poll()
	w.heartbeat(job)
	c.until("the build page shows building", `document.getElementById("build-status").textContent === "building"`)
	vm := f.vmToken(job)
	offset := int64(0)
	for i := 1; i <= 3; i++ {
		line := []byte(fmt.Sprintf("> gradle task %d of 3\n", i))
		n, err := f.worker.AppendLog(ctx, job.ID, vm, offset, line)
		if err != nil {
			t.Fatal(err)
		}
		offset = n
		c.until(fmt.Sprintf("log line %d appears", i), fmt.Sprintf(`document.getElementById("log").textContent.includes("gradle task %d of 3")`, i))
	}
	w.complete(job, api.Result{Success: true, FileName: "app-release.apk", File: bytes.NewReader([]byte("release APK"))})
	c.until("the build page shows completed", `document.getElementById("build-status").textContent === "completed"`)
	c.until("the log follow ends", `document.getElementById("log").dataset.ended === "completed"`)
	c.until("the artifact is listed", `document.body.textContent.includes("app-release.apk")`)
	c.wantSamePage("build page while the build ran")
	logText := c.eval(`document.getElementById("log").textContent`)
	if strings.Count(logText, "gradle task") != 3 {
		t.Errorf("log shows each line once; got %q", logText)
	}
	c.screenshot("build")

	// On a phone the list fits the screen (wide tables scroll on their own).
	c.run("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Navigate(f.url+"/builds"),
		chromedp.WaitVisible(chromedp.CSS("table.list")))
	c.until("the page fits a phone's width", `document.documentElement.scrollWidth <= window.innerWidth + 1`)
	c.screenshot("builds-phone")
	c.run("desktop viewport", chromedp.EmulateViewport(1280, 900))

	// Cancel a pending build from its page.
	b3 := f.submit(api.PlatformAndroid)
	c.run("open a pending build", chromedp.Navigate(f.url+"/builds/"+b3.ID))
	c.synced()
	c.run("cancel it", chromedp.Click(chromedp.CSS(`form[action$="/cancel"] button`)))
	c.until("the build shows cancelled", `document.getElementById("build-status").textContent === "cancelled"`)
	if s := f.buildStatus(b3.ID); s != api.StatusCancelled {
		t.Fatalf("after the cancel button: %s", s)
	}
	c.screenshot("build-cancelled")
	if c.eval(`String(document.getElementById("spec") === null)`) != "true" {
		t.Error("a build submitted without a spec shows a Build section")
	}

	// A build submitted with a spec shows what it is.
	spec := &api.BuildSpec{Version: api.SpecVersion, Platform: api.PlatformAndroid, ProfileName: "production", Environment: "production",
		Profile: api.BuildProfile{Distribution: "store", Env: map[string]string{"API_URL": "https://api.example.com", "APP_VARIANT": "prod"},
			GradleCommand: ":app:bundleRelease", BuildType: api.AndroidAppBundle, CredentialsSource: api.CredentialsLocal},
		App:     api.App{Name: "Shop", Slug: "shop", Version: "2.0.1", AndroidPackage: "com.example.shop", AndroidVersionCode: 42, ConfigSource: "app.json"},
		Project: api.Project{AppDir: "apps/shop", PackageManager: api.PackageManagerYarn, Lockfile: "yarn.lock", YarnBerry: true},
		Android: &api.AndroidBuild{GradleCommand: ":app:bundleRelease", BuildType: api.AndroidAppBundle, ApplicationArchivePaths: []string{"android/app/build/outputs/**/*.aab"}},
		Credentials: api.CredentialsInfo{Source: api.CredentialsLocal, Android: &api.KeystoreInfo{Type: "JKS", KeyAlias: "upload",
			CertificateSHA256: strings.Repeat("9f", 32)}},
		Message: "spring sale release"}
	b4, err := f.dev.Submit(ctx, api.SubmitRequest{Platform: api.PlatformAndroid, Spec: spec, Source: bytes.NewReader(project(t))})
	if err != nil {
		t.Fatal(err)
	}
	c.run("open a build with a spec", chromedp.Navigate(f.url+"/builds/"+b4.ID), chromedp.WaitVisible(chromedp.CSS("#spec")))
	section := c.eval(`document.getElementById("spec").innerText`)
	for _, want := range []string{"production", "Shop", "shop", "2.0.1", "com.example.shop", "42", "yarn", "yarn.lock", "apps/shop",
		":app:bundleRelease", "app-bundle", "local", strings.Repeat("9f", 32), "spring sale release", "API_URL", "https://api.example.com", "APP_VARIANT"} {
		if !strings.Contains(section, want) {
			t.Errorf("the Build section does not show %q:\n%s", want, section)
		}
	}
	if c.eval(`String(document.querySelector("#spec details").open)`) != "false" {
		t.Error("the resolved profile is not folded away")
	}
	c.run("unfold the resolved profile", chromedp.Click(chromedp.CSS("#spec summary")))
	c.until("the resolved profile shows", `document.getElementById("spec-profile").offsetHeight > 0`)
	var profile api.BuildProfile
	if err := json.Unmarshal([]byte(c.eval(`document.getElementById("spec-profile").textContent`)), &profile); err != nil ||
		profile.GradleCommand != ":app:bundleRelease" || profile.Env["APP_VARIANT"] != "prod" || profile.Distribution != "store" {
		t.Errorf("the resolved profile JSON: %+v %v", profile, err)
	}
	c.screenshot("build-spec")

	// The queue says why builds wait.
	f.submit(api.PlatformIOS)
	c.run("open the queue", chromedp.Navigate(f.url+"/queue"), chromedp.WaitVisible(chromedp.CSS("td.reason")))
	c.until("the queue gives the reason", `document.body.textContent.includes("No online worker builds ios.")`)
	c.screenshot("queue")

	// Pause the worker: it gets no build while paused.
	c.run("open the workers", chromedp.Navigate(f.url+"/workers"))
	c.synced()
	c.run("pause the worker", chromedp.Click(chromedp.CSS(`form[action="/workers/`+w.id+`/pause"] button`)))
	c.until("the worker shows paused", `document.querySelector('form[action="/workers/`+w.id+`/resume"]') !== null`)
	c.screenshot("workers")
	c.run("open the audit log", chromedp.Navigate(f.url+"/events"), chromedp.WaitVisible(chromedp.CSS("#chain-state")))
	c.until("the chain is verified", `document.getElementById("chain-state").textContent.includes("Hash chain verified")`)
	c.screenshot("events")
	c.run("open the controllers", chromedp.Navigate(f.url+"/controllers"), chromedp.WaitVisible(chromedp.CSS("tr[data-controller]")))
	c.screenshot("controllers")
	c.run("open the webhooks", chromedp.Navigate(f.url+"/webhooks"), chromedp.Click(chromedp.CSS(`a[href="/webhooks/`+hook.ID+`"]`)))
	c.until("deliveries are listed", `document.querySelector('tr[data-status="delivered"]') !== null`)
	c.screenshot("webhook-deliveries")
	b5 := f.submit(api.PlatformAndroid)
	if j := w.poll(); j != nil {
		t.Fatalf("a paused worker was given %s", j.ID)
	}

	// A token from an ended session is refused.
	stale := c.eval(`document.querySelector('input[name="csrf"]').value`)
	c.run("sign out", chromedp.Click(chromedp.CSS("form.signout button")), chromedp.WaitVisible(chromedp.CSS("#api_key")))
	// Signing in again, by keyboard alone: the key field has focus, Enter submits.
	c.run("sign in by keyboard", chromedp.WaitVisible(chromedp.CSS("#api_key")), chromedp.KeyEvent(f.adminKey+"\r"))
	c.until("the overview after a keyboard sign-in", `document.querySelector("h1") && document.querySelector("h1").textContent === "Overview"`)
	c.run("tab once", chromedp.KeyEvent("\t"))
	c.until("the first tab stop is the skip link", `document.activeElement && document.activeElement.className === "skip"`)
	c.run("open a pending build", chromedp.Navigate(f.url+"/builds/"+b5.ID), chromedp.WaitVisible(chromedp.CSS(`form[action$="/cancel"] button`)))
	c.synced()
	c.eval(`document.querySelector('form[action$="/cancel"] input[name="csrf"]').value = ` + jsString(stale))
	c.run("cancel with a stale token", chromedp.Click(chromedp.CSS(`form[action$="/cancel"] button`)))
	c.until("the stale token is refused", `document.body.textContent.includes("security token is missing or stale")`)
	if s := f.buildStatus(b5.ID); s != api.StatusPending {
		t.Fatalf("a stale token cancelled the build: %s", s)
	}

	// Without a session, an action is refused.
	c.run("open the build again", chromedp.Navigate(f.url+"/builds/"+b5.ID), chromedp.WaitVisible(chromedp.CSS("form.signout button")))
	c.synced()
	live := c.eval(`document.querySelector('input[name="csrf"]').value`)
	c.run("sign out", chromedp.Click(chromedp.CSS("form.signout button")), chromedp.WaitVisible(chromedp.CSS("#api_key")))
	c.eval(`(function () {
		var f = document.createElement("form");
		f.method = "post"; f.action = "/builds/` + b5.ID + `/cancel";
		var i = document.createElement("input"); i.type = "hidden"; i.name = "csrf"; i.value = ` + jsString(live) + `;
		f.appendChild(i); document.body.appendChild(f); f.submit(); return "sent"; })()`)
	c.until("the signed-out action is refused", `document.body.textContent.includes("You are not signed in")`)
	if s := f.buildStatus(b5.ID); s != api.StatusPending {
		t.Fatalf("a signed-out request cancelled the build: %s", s)
	}
	t.Logf("browser test took %v; screenshots in %s", time.Since(start).Round(time.Millisecond), c.dir)
}

func jsString(s string) string { return fmt.Sprintf("%q", s) }
