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
	"github.com/freeagent-build/freeagent/controller/serve"
	"github.com/freeagent-build/freeagent/controller/submit"
	"github.com/freeagent-build/freeagent/internal/standins/fakeplay"
)

const shopPackage = "com.example.shop"

// newPlayEnv is a controller whose submissions go to a stand-in Play with
// the app shopPackage, and the service account key that may release it.
func newPlayEnv(t *testing.T) (*env, *fakeplay.Server, []byte) {
	t.Helper()
	p := fakeplay.New(t)
	key := p.ServiceAccount("publisher")
	p.AddApp(shopPackage, key)
	e := newEnvWith(t, func(c *serve.Config) {
		c.Submit = submit.Config{Interval: 50 * time.Millisecond}
		c.Submit.Play.Endpoint, c.Submit.Play.TokenURL = p.URL, p.TokenURL
		c.Submit.Play.Retry = api.RetryPolicy{Backoff: api.Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond}, Attempts: 3}
	})
	return e, p, key
}

func shopProject(t *testing.T, key []byte) string {
	t.Helper()
	return project(t, map[string]string{
		"package.json": `{"name":"shop"}`,
		"app.json":     `{"expo":{"name":"Shop","slug":"shop","version":"1.0.0","android":{"package":"` + shopPackage + `","versionCode":3}}}`,
		"eas.json": `{"build":{"production":{}},
			"submit":{"production":{"android":{"serviceAccountKeyPath":"./keys/play.json","track":"internal"}}}}`,
		"keys/play.json": string(key),
	})
}

// TestAutoSubmit: `build --auto-submit` queues the submission with the
// build; once a worker completes it the controller (the CLI long gone)
// lands the .aab in the stand-in Play's internal track. The key file never
// travels in the source archive, nor shows in any output.
// (t.Chdir: not parallel.)
func TestAutoSubmit(t *testing.T) {
	e, play, key := newPlayEnv(t)
	dir := shopProject(t, key)
	r := e.mustRun(0, nil, "build", dir, "--platform", "android", "--auto-submit", "--no-wait", "--json")
	id := jsonOf[[]map[string]any](t, r)[0]["id"].(string)
	w := e.worker("android")
	j := w.claim()
	src := w.source(j)
	files := untar(t, src)
	if _, ok := files["keys/play.json"]; ok {
		t.Fatal("the service account key travelled in the source archive")
	}
	var all bytes.Buffer
	all.Write(src)
	for _, f := range files {
		all.WriteString(f)
	}
	all.WriteString(r.stdout + r.stderr)
	w.finish(j, true, "app-release.aab", fakeplay.Bundle(shopPackage, 3, 2000))

	ctx := context.Background()
	dev := &api.Client{BaseURL: e.URL, APIKey: e.devKey}
	var sub api.Submission
	for deadline := time.Now().Add(30 * time.Second); ; {
		l, err := dev.ListSubmissions(ctx, id)
		if err != nil || len(l.Submissions) != 1 {
			t.Fatalf("the build's submissions: %+v, %v", l, err)
		}
		if sub = l.Submissions[0]; sub.Status.Terminal() || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if sub.Status != api.SubmissionSucceeded {
		s, _ := dev.GetSubmission(ctx, sub.ID)
		t.Fatalf("submission %+v\n%s", s, s.Log)
	}
	c := play.Commits()
	if len(c) != 1 || len(c[0].Tracks["internal"]) != 1 || c[0].Tracks["internal"][0].VersionCodes[0] != 3 || c[0].Tracks["internal"][0].Status != "completed" {
		t.Fatalf("Play's record: %+v", c)
	}
	// Submitting the same build again: Play has version code 3, and the
	// CLI says so, with the fix, before anything is uploaded.
	t.Chdir(dir)
	r = e.run(nil, "submit", "--platform", "android", "--latest")
	if r.code != ExitFailed || !strings.Contains(r.stderr, "Version code 3 has already been used") || !strings.Contains(r.stderr, "raise versionCode") {
		t.Fatalf("submitting version code 3 again:\n%s", r)
	}
	all.WriteString(r.stdout + r.stderr)
	if play.Requests("bundles.upload") != 1 {
		t.Fatalf("%d uploads", play.Requests("bundles.upload"))
	}
	fakeplay.AssertNoKey(t, all.Bytes(), key)
}

// TestStoreSubmitRefusals: what the CLI refuses before asking the controller.
// (t.Chdir: not parallel.)
func TestStoreSubmitRefusals(t *testing.T) {
	e, _, key := newPlayEnv(t)
	dir := shopProject(t, key)
	t.Chdir(dir)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"submit", "--platform", "android"}, "pass --latest or --id BUILD"},
		{[]string{"submit", "--platform", "android", "--path", "app.aab"}, "--path and --url are not supported yet"},
		{[]string{"submit", "--platform", "android", "--latest", "--profile", "beta"}, `no submit profile "beta"`},
		{[]string{"submit", "--platform", "android", "--latest", "."}, "run `expo-build build .`"},
		// The old `expo-build submit` built: its command lines say what to run now.
		{[]string{"submit", dir, "--platform", "android", "--no-wait"},
			"`submit` now sends a finished build to the stores, as `eas submit`; to build, run `expo-build build " + dir + "`"},
		{[]string{"submit", "--platform", "android", "--p12", "cert.p12"}, "to build, run `expo-build build`"},
		{[]string{"submit", "--platform", "android", "--latest", "--wait", "--no-wait"}, "--wait and --no-wait contradict each other"},
		{[]string{"submit", "--platform", "all", "--id", "b1"}, "--id names one build"},
		{[]string{"submit", "--platform", "windows", "--latest"}, "pass --platform android, ios or all"},
		{[]string{"submit", "--platform", "ios", "--latest", "--what-to-test", "fixes"}, "--what-to-test is not supported"},
		{[]string{"submit", "--platform", "ios", "--latest", "-g", "qa"}, "--groups is not supported"},
	} {
		r := e.run(nil, c.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: want exit %d saying %q\n%s", c.args, ExitUsage, c.want, r)
		}
	}
	if n := e.buildCount(t); n != 0 {
		t.Fatalf("refused submits made %d builds", n)
	}
	if err := os.Remove(filepath.Join(dir, "keys", "play.json")); err != nil {
		t.Fatal(err)
	}
	r := e.run(nil, "build", ".", "--platform", "android", "--auto-submit", "--no-wait")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "serviceAccountKeyPath") {
		t.Fatalf("--auto-submit with a missing key file:\n%s", r)
	}
}

// TestStoreSubmitWithKeptKey: the project's key kept on the farm with
// `credentials set --service-account-key` submits a build whose eas.json
// names no key file; `credentials list` shows it by its account only.
// (t.Chdir: not parallel.)
func TestStoreSubmitWithKeptKey(t *testing.T) {
	e, play, key := newPlayEnv(t)
	dir := project(t, map[string]string{
		"package.json": `{"name":"shop"}`,
		"app.json":     `{"expo":{"name":"Shop","slug":"shop","version":"1.0.0","android":{"package":"` + shopPackage + `","versionCode":5}}}`,
		"eas.json":     `{"build":{"production":{}},"submit":{"production":{"android":{"track":"beta"}}}}`,
	})
	keyFile := filepath.Join(t.TempDir(), "play.json")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	out := e.mustRun(0, nil, "credentials", "set", "--platform", "android", "--service-account-key", keyFile)
	list := e.mustRun(0, nil, "credentials", "list")
	if !strings.Contains(list.stdout, "publisher@farm-tests.iam.gserviceaccount.com") {
		t.Fatalf("credentials list:\n%s", list)
	}
	r := e.mustRun(0, nil, "build", ".", "--platform", "android", "--no-wait", "--json")
	id := jsonOf[[]map[string]any](t, r)[0]["id"].(string)
	w := e.worker("android")
	w.finish(w.claim(), true, "app-release.aab", fakeplay.Bundle(shopPackage, 5, 100))
	// -p all submits both platforms or neither: there is no iOS build.
	if r := e.run(nil, "submit", "--platform", "all", "--latest"); r.code != ExitFailed || !strings.Contains(r.stderr, "no completed ios build") {
		t.Fatalf("submit -p all without an iOS build:\n%s", r)
	}
	if l, err := e.admin.ListSubmissions(context.Background(), id); err != nil || len(l.Submissions) != 0 {
		t.Fatalf("submit -p all queued %+v (%v)", l.Submissions, err)
	}
	sub := e.mustRun(0, nil, "submit", "--platform", "android", "--id", id)
	if !strings.Contains(sub.stdout, "version code 5 is in track beta") || !strings.Contains(sub.stdout, "Committed edit") {
		t.Fatalf("submit:\n%s", sub)
	}
	if c := play.Commits(); len(c) != 1 || len(c[0].Tracks["beta"]) != 1 {
		t.Fatalf("Play's record: %+v", c)
	}
	fakeplay.AssertNoKey(t, []byte(out.stdout+out.stderr+list.stdout+list.stderr+sub.stdout+sub.stderr), key)
}
