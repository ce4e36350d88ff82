package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

// stockEASJSON is the eas.json `eas build:configure` writes.
const stockEASJSON = `{
  "cli": {
    "version": ">= 16.0.0",
    "appVersionSource": "remote"
  },
  "build": {
    "development": {
      "developmentClient": true,
      "distribution": "internal"
    },
    "preview": {
      "distribution": "internal"
    },
    "production": {
      "autoIncrement": true
    }
  },
  "submit": {
    "production": {}
  }
}
`

// TestStockEASJSONRemoteVersions: the eas.json of `eas build:configure`
// builds unchanged. The first production build starts after the app
// config's versionCode (as eas-cli initializes it), the next takes the
// number after; both builds record their versions, the VM receives them
// in the spec, and a preview build (no autoIncrement) takes the current.
func TestStockEASJSONRemoteVersions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.worker(api.PlatformAndroid)
	dir := project(t, map[string]string{"app.json": appJSON("demo-app"), "eas.json": stockEASJSON})
	var ids []string
	for range 2 {
		r := e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "android", "--profile", "production", "--json")
		ids = append(ids, queuedID(t, r))
		if !strings.Contains(r.stderr, "android.versionCode in the app config is ignored") {
			t.Errorf("no warning that app.json's versionCode is ignored:\n%s", r)
		}
	}
	for i, want := range []string{"43", "44"} {
		b := e.build(t, ids[i])
		if b.BuildVersion != want || b.AppVersion != "1.2.3" {
			t.Errorf("build %d records %q/%q, want 1.2.3/%s", i+1, b.AppVersion, b.BuildVersion, want)
		}
		v := b.Spec.Versions
		if v == nil || v.Source != api.VersionSourceRemote || v.ApplicationID != "com.example.demo" || v.BuildVersion != want {
			t.Errorf("build %d spec versions %+v", i+1, v)
		}
	}
	j, view := w.claimAsVM(t, ids[0])
	if v := view.job.Spec.Versions; v == nil || v.BuildVersion != "43" {
		t.Errorf("the VM's spec has versions %+v, want build version 43", v)
	}
	w.finish(j, true, "app.aab", []byte("aab"))
	if r := e.mustRun(0, nil, "status", ids[0]); !strings.Contains(r.stdout, "1.2.3 · versionCode 43 · remote version source") {
		t.Errorf("status does not show the versions:\n%s", r)
	}
	if r := e.mustRun(0, nil, "list"); !strings.Contains(r.stdout, "1.2.3 (43)") || !strings.Contains(r.stdout, "1.2.3 (44)") {
		t.Errorf("list does not show the versions:\n%s", r)
	}
	// What webhooks deliver: the build's events carry its versions (listed
	// once sealed, a moment after their change).
	seen := map[string]bool{}
	for deadline := time.Now().Add(time.Minute); !seen["build.submitted"] || !seen["build.completed"]; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no build.submitted and build.completed events with the versions: %v", seen)
		}
		events, err := e.admin.Events(t.Context(), 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range events.Events {
			var p map[string]any
			json.Unmarshal(ev.Payload, &p)
			if ev.EntityID == ids[0] && p["build_version"] == "43" && p["app_version"] == "1.2.3" {
				seen[ev.EventType] = true
			}
		}
	}
	preview := e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "android", "--profile", "preview", "--json")
	if b := e.build(t, queuedID(t, preview)); b.BuildVersion != "44" {
		t.Errorf("a preview build without autoIncrement has %q, want the current 44", b.BuildVersion)
	}
	got := e.mustRun(0, nil, "build:version:get", dir, "--platform", "android", "--json")
	if v := jsonOf[map[string]string](t, got); v["versionCode"] != "44" {
		t.Errorf("build:version:get answered %v", v)
	}
}

// TestParallelSubmitsGetDistinctVersions: twenty submits at once of the
// stock configuration get twenty different versionCodes, one after another.
func TestParallelSubmitsGetDistinctVersions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := project(t, map[string]string{"app.json": appJSON("demo-app"), "eas.json": stockEASJSON})
	const n = 20
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i] = e.run(nil, "build", "--no-wait", dir, "--platform", "android", "--json", "--idempotency-key", "parallel-"+strconv.Itoa(i))
		})
	}
	wg.Wait()
	var codes []int
	for _, r := range results {
		if r.code != 0 {
			t.Fatalf("a parallel submit failed:\n%s", r)
		}
		code, err := strconv.Atoi(e.build(t, queuedID(t, r)).BuildVersion)
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, code)
	}
	slices.Sort(codes)
	for i, c := range codes {
		if c != 43+i {
			t.Fatalf("versionCodes %v, want 43 to %d once each", codes, 43+n-1)
		}
	}
}

// TestLocalAutoIncrementBumpsAppJSON: with the local version source,
// autoIncrement bumps app.json before the upload (keeping its other bytes)
// and says so; the build records the bumped versions; "version" bumps the
// patch; a bare app's build.gradle follows app.json; a config only
// JavaScript can write is refused with EAS's message, nothing built.
func TestLocalAutoIncrementBumpsAppJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.worker(api.PlatformAndroid)
	local := `{"cli":{"appVersionSource":"local"},"build":{"production":{"autoIncrement":true},"bump":{"android":{"autoIncrement":"version"}}}}`
	app := "{\n  \"expo\": {\"name\": \"Demo App\", \"slug\": \"demo-app\", \"version\": \"1.2.3\",\n    \"android\": {\"package\": \"com.example.demo\", \"versionCode\": 42}}\n}\n"
	dir := project(t, map[string]string{"app.json": app, "eas.json": local})
	r := e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "android", "--json")
	if !strings.Contains(r.stderr, "expo.android.versionCode from 42 to 43") {
		t.Errorf("the bump is not told:\n%s", r)
	}
	bumped, _ := os.ReadFile(filepath.Join(dir, "app.json"))
	if want := strings.Replace(app, `"versionCode": 42`, `"versionCode": 43`, 1); string(bumped) != want {
		t.Errorf("app.json after the bump:\n%s\nwant\n%s", bumped, want)
	}
	id := queuedID(t, r)
	if b := e.build(t, id); b.BuildVersion != "43" || b.Spec.Versions.Source != api.VersionSourceLocal || b.Spec.App.AndroidVersionCode != 43 {
		t.Errorf("build records %q, spec %+v", b.BuildVersion, b.Spec.Versions)
	}
	if _, view := w.claimAsVM(t, id); !strings.Contains(view.files["app.json"], `"versionCode": 43`) {
		t.Errorf("the upload has app.json\n%s", view.files["app.json"])
	}
	r = e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "android", "--profile", "bump", "--json")
	if b := e.build(t, queuedID(t, r)); b.AppVersion != "1.2.4" || b.BuildVersion != "43" {
		t.Errorf("autoIncrement \"version\" built %q/%q, want 1.2.4/43", b.AppVersion, b.BuildVersion)
	}

	bare := project(t, map[string]string{"app.json": appJSON("bare-app"), "eas.json": local,
		"android/app/build.gradle": "android {\n  defaultConfig {\n    versionCode 42\n    versionName \"1.2.3\"\n  }\n}\n"})
	e.mustRun(0, nil, "build", "--no-wait", bare, "--platform", "android", "--json")
	if g, _ := os.ReadFile(filepath.Join(bare, "android/app/build.gradle")); !strings.Contains(string(g), "versionCode 43\n") {
		t.Errorf("build.gradle after the bump:\n%s", g)
	}

	before := e.buildCount(t)
	dynamic := project(t, map[string]string{"app.json": "", "app.config.js": "module.exports = () => ({})", "eas.json": local,
		"node_modules/.bin/expo": "#!/bin/sh\nprintf '{\"name\":\"d\",\"slug\":\"dyn\",\"version\":\"1.0.0\",\"android\":{\"package\":\"com.example.dyn\"}}'\n"})
	os.Remove(filepath.Join(dynamic, "app.json"))
	os.Chmod(filepath.Join(dynamic, "node_modules/.bin/expo"), 0o755)
	r = e.mustRun(ExitUsage, nil, "build", "--no-wait", dynamic, "--platform", "android")
	if !strings.Contains(r.stderr, "autoIncrement option is not supported when using app.config.js") || e.buildCount(t) != before {
		t.Errorf("a dynamic config with autoIncrement:\n%s", r)
	}
}

// TestBuildVersionCommands: build:version:set, get and sync work as
// eas-cli's, and bad input (a non-number, an unknown platform or project,
// a project on the local version source) is refused with nothing stored.
func TestBuildVersionCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gradle := "android {\n  defaultConfig {\n    applicationId \"com.example.bare\"\n    versionCode 3\n    versionName \"1.0\"\n  }\n}\n"
	dir := project(t, map[string]string{"app.json": `{"expo":{"name":"Bare","slug":"bare-app","version":"2.0.0"}}`, "eas.json": stockEASJSON,
		"android/app/build.gradle": gradle})
	get := func() map[string]string {
		return jsonOf[map[string]string](t, e.mustRun(0, nil, "build:version:get", dir, "--platform", "android", "--json"))
	}
	if v := get(); len(v) != 0 {
		t.Fatalf("a new project has versions %v", v)
	}
	// Nothing is kept for a project the farm does not know yet.
	r := e.mustRun(ExitUsage, nil, "build:version:set", dir, "--platform", "android", "--build-version", "ten")
	if !strings.Contains(r.stderr, "versionCode needs to be a positive integer") {
		t.Errorf("a non-number:\n%s", r)
	}
	if r := e.run(nil, "build:version:set", dir, "--platform", "windows", "--build-version", "10"); r.code != ExitUsage || !strings.Contains(r.stderr, "unknown platform") {
		t.Errorf("an unknown platform:\n%s", r)
	}
	if r := e.run(nil, "build:version:set", dir, "--platform", "android", "--build-version", "10"); r.code == 0 || !strings.Contains(r.stderr, "unknown to the farm") {
		t.Errorf("a project the farm does not know:\n%s", r)
	}
	if v := get(); len(v) != 0 {
		t.Fatalf("refused sets stored %v", v)
	}
	// The first build initializes the version from build.gradle (3, then
	// autoIncrement: 4), keyed by its applicationId.
	b := e.build(t, queuedID(t, e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "android", "--json")))
	if b.BuildVersion != "4" || b.AppVersion != "1.0" || b.Spec.Versions.ApplicationID != "com.example.bare" {
		t.Fatalf("first build: %q/%q %+v", b.AppVersion, b.BuildVersion, b.Spec.Versions)
	}
	e.mustRun(0, nil, "build:version:set", dir, "--platform", "android", "--build-version", "100")
	if v := get(); v["versionCode"] != "100" {
		t.Fatalf("after set 100: %v", v)
	}
	if r := e.mustRun(0, nil, "build:version:set", dir, "--platform", "android", "--build-version", "99"); !strings.Contains(r.stderr, "lower than the farm's 100") {
		t.Errorf("a lower number is accepted (as in EAS) with a warning:\n%s", r)
	}
	if r := e.mustRun(ExitUsage, nil, "build:version:set", dir, "--platform", "android", "--build-version", "0"); !strings.Contains(r.stderr, "positive integer") {
		t.Errorf("zero:\n%s", r)
	}
	if b := e.build(t, queuedID(t, e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "android", "--json"))); b.BuildVersion != "100" {
		t.Errorf("the build after set 99 has %q, want 100", b.BuildVersion)
	}
	e.mustRun(0, nil, "build:version:sync", dir, "--platform", "android")
	if g, _ := os.ReadFile(filepath.Join(dir, "android/app/build.gradle")); !strings.Contains(string(g), "versionCode 100\n") {
		t.Errorf("build.gradle after sync:\n%s", g)
	}
	managed := project(t, map[string]string{"app.json": appJSON("bare-app"), "eas.json": stockEASJSON})
	if r := e.mustRun(0, nil, "build:version:sync", managed, "--platform", "android"); !strings.Contains(r.stderr, "no versions configured on the farm") {
		t.Errorf("sync without a version:\n%s", r)
	}
	e.mustRun(0, nil, "build:version:set", managed, "--platform", "android", "--build-version", "5")
	if r := e.mustRun(0, nil, "build:version:sync", managed, "--platform", "android"); !strings.Contains(r.stderr, "no effect on projects using the managed workflow") {
		t.Errorf("sync of a managed app:\n%s", r)
	}
	localSource := project(t, map[string]string{"app.json": appJSON("bare-app"), "eas.json": `{"cli":{"appVersionSource":"local"},"build":{"production":{}}}`})
	if r := e.run(nil, "build:version:get", localSource, "--platform", "android"); r.code != ExitUsage || !strings.Contains(r.stderr, `"appVersionSource": "remote"`) {
		t.Errorf("get with the local source:\n%s", r)
	}
}
