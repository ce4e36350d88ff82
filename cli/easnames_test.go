package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/testsupport/syncbuf"
)

// easProject is a project with EAS's usual profiles and a versioned app.
func easProject(t *testing.T) string {
	return project(t, map[string]string{
		"app.json": `{"expo":{"name":"demo","slug":"demo","version":"2.1.0","sdkVersion":"52.0.0",` +
			`"android":{"package":"com.example.demo","versionCode":7},"ios":{"bundleIdentifier":"com.example.demo","buildNumber":"9"}}}`,
		"eas.json": `{"build":{"production":{"channel":"production","ios":{"simulator":true}},` +
			`"preview":{"distribution":"internal","channel":"beta","ios":{"simulator":true}}}}`,
	})
}

// runAsync starts expo-build and returns a channel with its exit code.
func (e *env) runAsync(stdout, stderr *syncbuf.Buffer, args ...string) <-chan int {
	done := make(chan int, 1)
	go func() { done <- e.app(stdout, stderr, nil).Run(context.Background(), args) }()
	return done
}

func exitWithin(t *testing.T, done <-chan int, stdout, stderr *syncbuf.Buffer) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(2 * time.Minute): // a bound for a hang, not a timing
		t.Fatalf("expo-build did not return\n%s\n%s", stdout.String(), stderr.String())
		return -1
	}
}

// `expo-build build -p android -e production`, as `eas build`: it waits
// for the build, then saves the artifact; --json prints eas-cli's array.
func TestBuildWaitsAndDownloadsByDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := easProject(t)
	out := t.TempDir()
	var stdout, stderr syncbuf.Buffer
	done := e.runAsync(&stdout, &stderr, "build", dir, "-p", "android", "-e", "production", "-o", out, "--json")
	w := e.worker()
	job := w.claim()
	aab := randomBytes(t, 50_000)
	w.finish(job, true, "app-release.aab", aab)
	if code := exitWithin(t, done, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	if got, _ := os.ReadFile(filepath.Join(out, "app-release.aab")); !bytes.Equal(got, aab) {
		t.Fatal("build did not wait and download the artifact")
	}
	builds := jsonOf[[]map[string]any](t, result{stdout: stdout.String()})
	if len(builds) != 1 {
		t.Fatalf("want one build in the array: %s", stdout.String())
	}
	b := builds[0]
	if b["id"] != job.ID || b["status"] != "FINISHED" || b["platform"] != "ANDROID" || b["buildProfile"] != "production" {
		t.Errorf("build --json: %v", b)
	}
	if arts, _ := b["artifacts"].(map[string]any); arts == nil || !strings.HasSuffix(arts["buildUrl"].(string), "/api/builds/"+job.ID+"/artifacts/app-release.aab") {
		t.Errorf("artifacts.buildUrl: %v", b["artifacts"])
	}

	// A failed build exits 1 after printing it, as eas build does.
	var stdout2 syncbuf.Buffer
	done = e.runAsync(&stdout2, &stderr, "build", dir, "-p", "android", "--json")
	job = w.claim()
	w.finish(job, false, "", nil)
	if code := exitWithin(t, done, &stdout2, &stderr); code != ExitFailed {
		t.Fatalf("exit %d for a failed build\n%s", code, stderr.String())
	}
	if b := jsonOf[[]map[string]any](t, result{stdout: stdout2.String()})[0]; b["status"] != "ERRORED" || b["error"] == nil {
		t.Errorf("failed build --json: %v", b)
	}
}

// --no-wait returns once the build is queued; the other eas build flags
// are honoured, accepted or refused with the alternative.
func TestBuildNoWaitAndEASFlags(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := easProject(t)
	r := e.mustRun(0, nil, "build", dir, "-p", "android", "--no-wait", "--json", "--clear-cache", "--freeze-credentials", "-m", "from CI")
	b := jsonOf[[]map[string]any](t, r)[0]
	if b["status"] != "IN_QUEUE" || b["message"] != "from CI" || b["queuePosition"] != float64(1) || b["appVersion"] != "2.1.0" {
		t.Fatalf("build --no-wait --json: %v", b)
	}
	st, err := (&api.Client{BaseURL: e.URL, APIKey: e.devKey}).GetBuild(context.Background(), b["id"].(string))
	if err != nil || st.Spec == nil || !st.Spec.ClearCache {
		t.Errorf("--clear-cache did not reach the spec: %+v %v", st.Spec, err)
	}
	if r := e.mustRun(0, nil, "build", dir, "-p", "android", "--wait=false"); !strings.Contains(r.stdout, "queued") {
		t.Errorf("--wait=false: %s", r)
	}
	for flag, want := range map[string]string{"--local": "freeagent run --vm-driver local", "--submit": "--auto-submit",
		"--refresh-ad-hoc-provisioning-profile": "credentials.json"} {
		r := e.mustRun(ExitUsage, nil, "build", dir, "-p", "android", "--no-wait", flag)
		if !strings.Contains(r.stderr, want) {
			t.Errorf("build %s: want %q in the message\n%s", flag, want, r)
		}
	}
	e.mustRun(ExitUsage, nil, "build", dir, "-p", "android", "--wait", "--no-wait")
	// --resource-class, deprecated in EAS, overrides the profile's
	// resourceClass as eas build does: here no online worker has a large
	// one's 8 cores, so the build is refused before the upload.
	r = e.mustRun(ExitUsage, nil, "build", dir, "-p", "android", "--no-wait", "--resource-class", "large")
	for _, want := range []string{"--resource-class flag has been deprecated", `resourceClass "large"`, "8 CPU cores"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("build --resource-class large: want %q\n%s", want, r)
		}
	}
}

// build:list --json prints builds as eas build:list --json does, and
// filters as it does.
func TestBuildListJSONShape(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := easProject(t)
	w := e.worker()
	e.mustRun(0, nil, "build", dir, "-p", "android", "-e", "preview", "--no-wait")
	job := w.claim()
	w.finish(job, true, "app.apk", []byte("apk"))
	running := jsonOf[[]map[string]any](t, e.mustRun(0, nil, "build", dir, "-p", "ios", "--no-wait", "--json"))[0]["id"].(string)
	w.claim()
	queued := jsonOf[[]map[string]any](t, e.mustRun(0, nil, "build", dir, "-p", "android", "--no-wait", "--json"))[0]["id"].(string)

	list := jsonOf[[]map[string]any](t, e.mustRun(0, nil, "build:list", "--json"))
	if len(list) != 3 || list[0]["id"] != queued || list[1]["id"] != running || list[2]["id"] != job.ID {
		t.Fatalf("build:list --json: %v", list)
	}
	done := list[2]
	for k, want := range map[string]any{"status": "FINISHED", "platform": "ANDROID", "buildProfile": "preview", "distribution": "INTERNAL",
		"appVersion": "2.1.0", "appBuildVersion": "7", "appIdentifier": "com.example.demo", "sdkVersion": "52.0.0"} {
		if done[k] != want {
			t.Errorf("%s: %v, want %v", k, done[k], want)
		}
	}
	if done["createdAt"] == nil || done["completedAt"] == nil || done["updateChannel"].(map[string]any)["name"] != "beta" {
		t.Errorf("times or channel: %v", done)
	}
	if list[1]["status"] != "IN_PROGRESS" || list[1]["platform"] != "IOS" || list[0]["status"] != "IN_QUEUE" || list[0]["completedAt"] != nil {
		t.Errorf("running and queued: %v %v", list[1], list[0])
	}
	ids := func(args ...string) []string {
		t.Helper()
		var out []string
		for _, b := range jsonOf[[]map[string]any](t, e.mustRun(0, nil, append([]string{"build:list", "--json"}, args...)...)) {
			out = append(out, b["id"].(string))
		}
		return out
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"-p", "ios"}, []string{running}},
		{[]string{"--status", "finished"}, []string{job.ID}},
		{[]string{"--status", "in-progress"}, []string{running}},
		{[]string{"--status", "in-queue"}, []string{queued}},
		{[]string{"-e", "preview"}, []string{job.ID}},
		{[]string{"--build-profile", "production"}, []string{queued, running}},
		{[]string{"--distribution", "internal"}, []string{job.ID}},
		{[]string{"--channel", "production"}, []string{queued, running}},
		{[]string{"--app-build-version", "9"}, []string{running}},
		{[]string{"--simulator", "-p", "ios"}, []string{running}},
		{[]string{"--limit", "1", "--offset", "1"}, []string{running}},
		{[]string{"--app-version", "1.0.0"}, nil},
	} {
		if got := ids(c.args...); strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("build:list %v: %v, want %v", c.args, got, c.want)
		}
	}
	for _, args := range [][]string{{"--runtime-version", "1"}, {"--fingerprint-hash", "abc"}, {"--status", "done"}, {"--simulator"}} {
		e.mustRun(ExitUsage, nil, append([]string{"build:list"}, args...)...)
	}
	if r := e.mustRun(0, nil, "build:list", "--limit", "2"); !strings.Contains(r.stdout, "More: expo-build build:list --offset 2") {
		t.Errorf("human list: %s", r)
	}

	// build:view without an id is the newest build, in the same shape.
	if v := jsonOf[map[string]any](t, e.mustRun(0, nil, "build:view", "--json")); v["id"] != queued || v["status"] != "IN_QUEUE" {
		t.Errorf("build:view --json: %v", v)
	}
	// build:download: the application archive, as EAS's {"path"}.
	out := t.TempDir()
	d := jsonOf[map[string]string](t, e.mustRun(0, nil, "build:download", "--build-id", job.ID, "-o", out, "--json"))
	if got, _ := os.ReadFile(d["path"]); string(got) != "apk" || filepath.Dir(d["path"]) != out {
		t.Errorf("build:download --json: %v", d)
	}
	e.mustRun(ExitUsage, nil, "build:download", "--fingerprint", "abc")
	// build:cancel: an id, or (not on a terminal) a usage error.
	e.mustRun(ExitUsage, nil, "build:cancel", "--non-interactive")
	e.mustRun(ExitUsage, nil, "build:cancel", queued, "-p", "android")
	if r := e.mustRun(0, nil, "build:cancel", queued); !strings.Contains(r.stdout, "cancelled") {
		t.Errorf("build:cancel: %s", r)
	}
}

// Today's names keep working as they did for one release, each with a
// note naming the new one.
func TestOldCommandNamesStillWork(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := project(t, map[string]string{})
	note := func(r result, old, now string) {
		t.Helper()
		if !strings.Contains(r.stderr, "`expo-build "+old+"` is now `expo-build "+now+"`") {
			t.Errorf("%s: no note naming %s\n%s", old, now, r)
		}
	}
	id := jsonOf[[]map[string]any](t, e.mustRun(0, nil, "build", dir, "--no-wait", "--platform", "android", "--json"))[0]["id"].(string)
	r := e.mustRun(0, nil, "status", id, "--json")
	note(r, "status", "build:view")
	if b := jsonOf[api.Build](t, r); b.Status != api.StatusPending {
		t.Errorf("status --json keeps its shape: %s", r.stdout)
	}
	r = e.mustRun(0, nil, "list", "--json")
	note(r, "list", "build:list")
	if l := jsonOf[api.BuildList](t, r); len(l.Builds) != 1 {
		t.Errorf("list --json keeps its shape: %s", r.stdout)
	}
	note(e.mustRun(ExitFailed, nil, "download", id), "download", "build:download")
	note(e.mustRun(0, nil, "cancel", id), "cancel", "build:cancel")
	if r := e.mustRun(0, nil, "build:view", id); strings.Contains(r.stderr, "is now") {
		t.Errorf("a new name prints the note: %s", r.stderr)
	}
	if h := e.mustRun(0, nil, "--help"); !strings.Contains(h.stdout, "status → build:view") {
		t.Errorf("help does not list the renames: %s", h.stdout)
	}
}
