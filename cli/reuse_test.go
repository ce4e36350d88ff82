package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestSubmitReuse: submit --reuse returns the completed build of the same
// tree, profile, platform and credentials instead of uploading and
// building (no build is created), per platform with --platform all; a
// touched file still matches, a changed file or another profile builds.
func TestSubmitReuse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := project(t, map[string]string{"app.json": appJSON("reuse"), "App.tsx": "export default 1",
		"eas.json": `{"build":{"production":{"android":{"buildType":"apk"},"ios":{"simulator":true}},"preview":{"android":{"buildType":"apk"}}}}`})
	// build --json prints EAS's builds: a reused one is the earlier,
	// finished build; a new one is queued.
	type built struct {
		ID         string `json:"id"`
		Platform   string `json:"platform"`
		Status     string `json:"status"`
		InstallURL string `json:"installUrl"`
		Artifacts  []struct {
			Name string `json:"name"`
		} `json:"farmArtifacts"`
	}
	submit := func(args ...string) built {
		t.Helper()
		return jsonOf[[]built](t, e.mustRun(0, nil, append([]string{"build", "--no-wait", dir, "--json"}, args...)...))[0]
	}

	// The first submit (streamed: the spec follows the packed source)
	// stores the tree's fingerprint; both platforms' trees are the same.
	r := e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "all", "--json")
	first := jsonOf[[]built](t, r)
	if len(first) != 2 {
		t.Fatalf("--platform all: %s", r)
	}
	android, ios := first[0], first[1]
	fp := e.storedSpec(t, android.ID).SourceFingerprint
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(fp) || e.storedSpec(t, ios.ID).SourceFingerprint != fp {
		t.Fatalf("source fingerprints %q and %q", fp, e.storedSpec(t, ios.ID).SourceFingerprint)
	}
	// Nothing completed yet: --reuse builds.
	again := submit("--platform", "android", "--reuse")
	if again.Status != "IN_QUEUE" || again.ID == android.ID {
		t.Fatalf("reused a build that has not completed: %+v", again)
	}
	w := e.worker("android")
	for range 2 {
		job := w.claim()
		w.finish(job, true, "app.apk", []byte("APK-"+job.ID))
	}
	count := e.buildCount(t)
	newest := again.ID // both completed: the newest is reused

	// Android completed, iOS is still queued: one reused, one new.
	r = e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "all", "--reuse", "--json")
	both := jsonOf[[]built](t, r)
	if len(both) != 2 || both[0].Status != "FINISHED" || both[0].ID != newest ||
		len(both[0].Artifacts) != 1 || both[0].Artifacts[0].Name != "app.apk" || both[0].InstallURL == "" {
		t.Fatalf("android was not reused from %s: %s", newest, r)
	}
	if both[1].Status != "IN_QUEUE" || both[1].ID == ios.ID || both[1].Platform != "IOS" {
		t.Fatalf("ios: %+v", both[1])
	}
	if n := e.buildCount(t); n != count+1 {
		t.Fatalf("%d builds, want %d: only the iOS one is new", n, count+1)
	}
	count++

	// A touched file is the same tree.
	later := time.Now().Add(time.Hour)
	os.Chtimes(filepath.Join(dir, "App.tsx"), later, later)
	if got := submit("--platform", "android", "--reuse"); got.Status != "FINISHED" || got.ID != newest {
		t.Fatalf("after touching a file: %+v", got)
	}
	human := e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "android", "--reuse")
	if !strings.Contains(human.stdout, "Build "+newest+" reused") || !strings.Contains(human.stdout, "app.apk") {
		t.Fatalf("the human answer: %s", human)
	}
	// --wait downloads the reused build's artifact at once.
	out := t.TempDir()
	e.mustRun(0, nil, "build", dir, "--platform", "android", "--reuse", "--output", out)
	if b, err := os.ReadFile(filepath.Join(out, "app.apk")); err != nil || string(b) != "APK-"+newest {
		t.Fatalf("downloaded %q, %v", b, err)
	}
	if n := e.buildCount(t); n != count {
		t.Fatalf("%d builds after reusing, want %d", n, count)
	}

	// Another profile, or another byte of source: a new build.
	if got := submit("--platform", "android", "--profile", "preview", "--reuse"); got.Status != "IN_QUEUE" {
		t.Fatalf("reused across profiles: %+v", got)
	}
	os.WriteFile(filepath.Join(dir, "App.tsx"), []byte("export default 2"), 0o644)
	if got := submit("--platform", "android", "--reuse"); got.Status != "IN_QUEUE" {
		t.Fatalf("reused a build of other source: %+v", got)
	}
	if n := e.buildCount(t); n != count+2 {
		t.Fatalf("%d builds, want %d", n, count+2)
	}
}
