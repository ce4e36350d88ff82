package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/buildphase"
	"github.com/freeagent-build/freeagent/internal/testsupport/syncbuf"
)

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// queueBuild queues a build of dir for platform and returns its id.
func (e *env) queueBuild(dir, platform string, extra ...string) string {
	e.t.Helper()
	return queuedID(e.t, e.mustRun(0, nil, append([]string{"build", "--no-wait", dir, "--platform", platform, "--json"}, extra...)...))
}

// TestSubmitBuildDownload: submit → a worker builds from exactly the files
// that should leave the machine → download gives the exact bytes.
func TestSubmitBuildDownload(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := project(t, map[string]string{
		"package.json":                   `{"name":"demo"}`,
		"App.tsx":                        "export default function App() {}",
		"assets/icon.png":                "PNG",
		"node_modules/left-pad/index.js": "NODE_MODULES_MUST_NOT_LEAVE",
		"ios/Pods/Manifest.lock":         "pods",
		"android/app/build/old.apk":      "old",
		".gitignore":                     "secrets.env\n",
		"secrets.env":                    "KEY=1",
		"eas.json":                       `{"build":{"production":{},"preview":{}}}`,
	})
	r := e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "android", "--profile", "preview", "--priority", "1", "--json")
	sub := jsonOf[[]map[string]any](t, r)[0]
	id, _ := sub["id"].(string)
	if id == "" || sub["status"] != "IN_QUEUE" || sub["queuePosition"] != float64(1) || sub["buildProfile"] != "preview" {
		t.Fatalf("build --no-wait --json: %v", sub)
	}
	cfg, err := loadConfig(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	token := cfg.token(id)
	if token == "" {
		t.Fatal("the build token was not stored")
	}
	if strings.Contains(r.stdout+r.stderr, token) || strings.Contains(r.stdout+r.stderr, e.devKey) {
		t.Fatal("a secret was printed")
	}
	if st, _ := os.Stat(e.cfgPath); st.Mode().Perm() != 0o600 {
		t.Fatalf("config mode %v", st.Mode().Perm())
	}

	w := e.worker("android")
	job := w.claim()
	if job.ID != id || job.Profile != "preview" || job.Priority != 1 || job.Platform != "android" {
		t.Fatalf("job: %+v", job)
	}
	files := untar(t, w.source(job))
	for _, want := range []string{"app.json", "package.json", "App.tsx", "assets/icon.png", "eas.json", ".gitignore"} {
		if _, ok := files[want]; !ok {
			t.Errorf("%s missing from the uploaded source", want)
		}
	}
	for name, body := range files {
		if strings.Contains(name, "node_modules") || strings.Contains(body, "NODE_MODULES_MUST_NOT_LEAVE") ||
			strings.Contains(name, "secrets.env") || strings.Contains(name, "Pods") || strings.Contains(name, "app/build") {
			t.Errorf("%s left the machine", name)
		}
	}
	v := w.vm(job)
	now := time.Now()
	v.log(buildphase.Marker(buildphase.Install, now) + "\nnpm ci\n" + buildphase.Marker(buildphase.Build, now.Add(83*time.Second)) + "\n./gradlew assembleRelease\n")
	apk := randomBytes(t, 3<<20+17)
	w.finish(job, true, "app-release.apk", apk)

	b := jsonOf[api.Build](t, e.mustRun(0, nil, "status", id, "--json"))
	if b.Status != api.StatusCompleted || len(b.Artifacts) != 1 || b.Artifacts[0].SHA256 != sha(apk) || b.InstallURL == nil {
		t.Fatalf("status: %+v", b)
	}
	if b.ArtifactsExpireAt == nil || b.ArtifactsExpired {
		t.Fatalf("a completed build without its artifacts' expiry: %+v", b)
	}
	expires := b.ArtifactsExpireAt.Local().Format(time.DateOnly)
	human := e.mustRun(0, nil, "status", id)
	for _, want := range []string{"completed", "app-release.apk", "expo-build build:download " + id, "priority 1", "/install/" + id + "?",
		"artifacts expire " + expires, "Phases", "Install dependencies", "1m23s  succeeded", "Build (Gradle / pods and Xcode)"} {
		if !strings.Contains(human.stdout, want) {
			t.Errorf("status output lacks %q:\n%s", want, human.stdout)
		}
	}
	// logs prints each phase marker as a heading, the lines as they are.
	logs := e.mustRun(0, nil, "logs", id)
	if !strings.Contains(logs.stdout, "── Install dependencies ──\nnpm ci\n") || strings.Contains(logs.stdout, "##[phase") {
		t.Errorf("logs:\n%s", logs.stdout)
	}
	if list := e.mustRun(0, nil, "list"); !strings.Contains(list.stdout, "ARTIFACTS UNTIL") || !strings.Contains(list.stdout, expires) {
		t.Errorf("list output lacks the artifacts' expiry %s:\n%s", expires, list.stdout)
	}
	// list --json carries each build's artifacts: name, size, checksum,
	// and when they expire.
	listed := jsonOf[api.BuildList](t, e.mustRun(0, nil, "list", "--json"))
	if len(listed.Builds) != 1 || len(listed.Builds[0].Artifacts) != 1 || listed.Builds[0].ArtifactsExpireAt == nil {
		t.Fatalf("list --json: %+v", listed.Builds)
	}
	if a := listed.Builds[0].Artifacts[0]; a.Name != "app-release.apk" || a.Size != int64(len(apk)) || a.SHA256 != sha(apk) {
		t.Errorf("list --json artifact: %+v", a)
	}
	if r := e.mustRun(0, nil, "logs", id); r.stdout != "\n── Install dependencies ──\nnpm ci\n\n── Build (Gradle / pods and Xcode) ──\n./gradlew assembleRelease\n" {
		t.Errorf("logs: %q", r.stdout)
	}

	out := t.TempDir()
	r = e.mustRun(0, nil, "download", id, "-o", out, "--json")
	dl := jsonOf[map[string]any](t, r)
	path := filepath.Join(out, "app-release.apk")
	if got, _ := os.ReadFile(path); !bytes.Equal(got, apk) {
		t.Fatalf("downloaded %d bytes, not the artifact (%v)", len(got), dl)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 1 {
		t.Fatalf("leftovers in the output directory: %v", entries)
	}
	// Again: the same bytes are already there.
	if r := e.mustRun(0, nil, "download", id, "-o", out); !strings.Contains(r.stderr, "already here") {
		t.Errorf("second download: %s", r)
	}
	// A different file is never overwritten without --force.
	os.WriteFile(path, []byte("my own file"), 0o644)
	r = e.mustRun(ExitFailed, nil, "download", id, "-o", out)
	if !strings.Contains(r.stderr, "--force") {
		t.Errorf("refusal does not say what to do: %s", r)
	}
	if got, _ := os.ReadFile(path); string(got) != "my own file" {
		t.Fatal("the existing file was overwritten without --force")
	}
	e.mustRun(0, nil, "download", id, "-o", out, "--force")
	if got, _ := os.ReadFile(path); !bytes.Equal(got, apk) {
		t.Fatal("--force did not replace the file")
	}
	// -o always names a directory, created if missing, even when its
	// name looks like a file's.
	e.mustRun(0, nil, "download", id, "-o", filepath.Join(out, "renamed.apk"))
	if got, _ := os.ReadFile(filepath.Join(out, "renamed.apk", "app-release.apk")); !bytes.Equal(got, apk) {
		t.Fatal("-o renamed.apk did not make a directory holding the artifact")
	}
	// Unknown artifact name.
	e.mustRun(ExitNotFound, nil, "download", id, "--artifact", "nope.ipa", "-o", out)
}

// TestLogsFollowLive: logs -f prints each line as it is appended, resumes a
// cut stream without repeating lines, and exits 1 when the build fails.
func TestLogsFollowLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.proxy()
	id := e.queueBuild(project(t, map[string]string{}), "ios")
	w := e.worker()
	job := w.claim()
	v := w.vm(job)

	// The event stream breaks in the middle of the second event (the first,
	// "id: 15\ndata: step 1: npm ci\n\n", is 29 bytes): the CLI drops the
	// partial event and resumes from the last line it received.
	p.cutStreamsAt.Store(40)
	p.streamCutsLeft.Store(1)
	var out, errb syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- e.app(&out, &errb, map[string]string{"EXPO_CONTROLLER_URL": p.URL}).Run(context.Background(), []string{"logs", id, "-f"})
	}()
	v.log("step 1: npm ci\n")
	waitFor(t, &out, "step 1: npm ci\n", 5*time.Second)
	v.log("step 2: expo prebuild\nstep 3: pod ")
	waitFor(t, &out, "step 2: expo prebuild\n", 5*time.Second)
	time.Sleep(100 * time.Millisecond)
	if strings.Contains(out.String(), "step 3") {
		t.Fatal("an unfinished line was printed")
	}
	v.log("install\n")
	waitFor(t, &out, "step 3: pod install\n", 5*time.Second)
	w.finish(job, false, "", nil)
	select {
	case code := <-done:
		if code != ExitFailed {
			t.Fatalf("exit %d, want 1 for a failed build\n%s\n%s", code, out.String(), errb.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("logs -f did not end with the build")
	}
	if got := out.String(); got != "step 1: npm ci\nstep 2: expo prebuild\nstep 3: pod install\n" {
		t.Errorf("output %q", got)
	}
	if !strings.Contains(errb.String(), "xcodebuild exited with status 65") {
		t.Errorf("the failure is not explained: %s", errb.String())
	}
	resumed := false
	for _, r := range p.log() {
		if strings.HasSuffix(r.Path, "/logs") && r.LastEventID == "15" {
			resumed = true
		}
	}
	if !resumed {
		t.Errorf("no reconnection with Last-Event-ID: %+v", p.log())
	}

	// A finished build: -f prints the whole log and ends at once; JSON lines.
	r := e.mustRun(ExitFailed, nil, "logs", id, "-f", "--json")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], `"line":"step 1: npm ci"`) || !strings.Contains(lines[3], `"event":"end"`) {
		t.Errorf("json follow: %s", r.stdout)
	}
	// status --watch of an ended build exits like the build.
	e.mustRun(ExitFailed, nil, "status", id, "--watch")
}

// TestDownloadResumes: a download cut mid-way resumes with Range, within a
// run and across runs, and the result is verified.
func TestDownloadResumes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.proxy()
	id := e.queueBuild(project(t, map[string]string{}), "ios")
	w := e.worker()
	job := w.claim()
	ipa := randomBytes(t, 2<<20)
	w.finish(job, true, "App.ipa", ipa)
	viaProxy := map[string]string{"EXPO_CONTROLLER_URL": p.URL}

	// Within one run: the connection breaks after 700 000 bytes.
	p.cutDownloadsAt.Store(700_000)
	p.cutsLeft.Store(1)
	out := t.TempDir()
	e.mustRun(0, viaProxy, "download", id, "-o", out)
	if got, _ := os.ReadFile(filepath.Join(out, "App.ipa")); !bytes.Equal(got, ipa) {
		t.Fatal("resumed download differs")
	}
	if ranges := rangesOf(p); len(ranges) != 2 || ranges[0] != "" || ranges[1] != "bytes=700000-" {
		t.Fatalf("requests' Range headers: %q", ranges)
	}

	// Across runs: the first run gives up (exit 3) and keeps the partial file.
	p.requests = nil
	p.cutsLeft.Store(1)
	p.blockDownloads.Store(true)
	out2 := t.TempDir()
	r := e.mustRun(ExitUnreachable, viaProxy, "download", id, "-o", out2)
	if !strings.Contains(r.stderr, "run the same command again") {
		t.Errorf("no advice: %s", r)
	}
	parts, _ := filepath.Glob(filepath.Join(out2, ".App.ipa.*.part"))
	if len(parts) != 1 {
		t.Fatalf("partial file: %v", parts)
	}
	if st, _ := os.Stat(parts[0]); st.Size() != 700_000 {
		t.Fatalf("partial file holds %d bytes", st.Size())
	}
	p.blockDownloads.Store(false)
	p.requests = nil
	r = e.mustRun(0, viaProxy, "download", id, "-o", out2)
	if !strings.Contains(r.stderr, "Resuming App.ipa") {
		t.Errorf("no resume message: %s", r)
	}
	if got, _ := os.ReadFile(filepath.Join(out2, "App.ipa")); !bytes.Equal(got, ipa) {
		t.Fatal("download resumed across runs differs")
	}
	if ranges := rangesOf(p); len(ranges) != 1 || ranges[0] != "bytes=700000-" {
		t.Fatalf("second run's Range headers: %q", ranges)
	}
	if parts, _ := filepath.Glob(filepath.Join(out2, "*.part")); len(parts) != 0 {
		t.Fatalf("partial files left: %v", parts)
	}

	// A corrupt partial file (same name, wrong bytes) is detected by the
	// checksum and the download starts over.
	out3 := t.TempDir()
	os.WriteFile(filepath.Join(out3, filepath.Base(parts0(t, out2, ipa))), bytes.Repeat([]byte("x"), 1000), 0o644)
	e.mustRun(0, nil, "download", id, "-o", out3)
	if got, _ := os.ReadFile(filepath.Join(out3, "App.ipa")); !bytes.Equal(got, ipa) {
		t.Fatal("download after a corrupt partial file differs")
	}
}

// parts0 is the name a partial download of data as App.ipa gets.
func parts0(t *testing.T, dir string, data []byte) string {
	return filepath.Join(dir, ".App.ipa."+sha(data)[:16]+".part")
}

func rangesOf(p *faultProxy) []string {
	var out []string
	for _, r := range p.log() {
		if strings.Contains(r.Path, "/artifacts/") {
			out = append(out, r.Range)
		}
	}
	return out
}

// TestRetriedSubmitMakesOneBuild: a submit whose answer is lost is retried
// with the same Idempotency-Key, within a run and by re-running it.
func TestRetriedSubmitMakesOneBuild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.proxy()
	dir := project(t, map[string]string{"package.json": "{}", "index.js": "1"})
	viaProxy := map[string]string{"EXPO_CONTROLLER_URL": p.URL}
	countBuilds := func() int {
		list, err := e.admin.ListBuilds(context.Background(), api.ListOptions{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Builds)
	}
	submitKeys := func() []string {
		var keys []string
		for _, r := range p.log() {
			if r.Method == http.MethodPost && r.Path == "/api/builds" {
				keys = append(keys, r.IdempotencyKey)
			}
		}
		return keys
	}

	p.dropSubmits.Store(1)
	r := e.mustRun(0, viaProxy, "build", "--no-wait", dir, "--platform", "ios", "--json")
	id := queuedID(t, r)
	keys := submitKeys()
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		t.Fatalf("submit requests' keys: %q", keys)
	}
	if n := countBuilds(); n != 1 {
		t.Fatalf("%d builds after a retried submit", n)
	}
	if b, err := e.admin.GetBuild(context.Background(), id); err != nil || b.ID != id {
		t.Fatalf("the reported build: %v", err)
	}

	// Every answer lost: the run gives up (exit 3) and says re-running is safe.
	p.requests = nil
	dir2 := project(t, map[string]string{"index.js": "2"})
	p.dropSubmits.Store(100)
	r = e.mustRun(ExitUnreachable, viaProxy, "build", "--no-wait", dir2, "--platform", "android")
	if !strings.Contains(r.stderr, "run the same command again") {
		t.Errorf("no advice: %s", r)
	}
	failedKeys := submitKeys()
	p.dropSubmits.Store(0)
	p.requests = nil
	r = e.mustRun(0, viaProxy, "build", "--no-wait", dir2, "--platform", "android", "--json")
	if k := submitKeys(); len(k) != 1 || k[0] != failedKeys[0] {
		t.Fatalf("re-run key %q, failed run's %q", k, failedKeys)
	}
	if n := countBuilds(); n != 2 {
		t.Fatalf("%d builds, want 2 (the re-run must not add one)", n)
	}
	// Once answered, the same command is a new build.
	e.mustRun(0, nil, "build", "--no-wait", dir2, "--platform", "android")
	if n := countBuilds(); n != 3 {
		t.Fatalf("%d builds, want 3", n)
	}
}

// TestBadInput: each mistake gives a clear message and its exit code.
func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := project(t, map[string]string{})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := "http://" + ln.Addr().String()
	ln.Close()
	id := e.queueBuild(dir, "android")
	p12 := filepath.Join(t.TempDir(), "dist.p12")
	os.WriteFile(p12, []byte("P12"), 0o600)

	cases := []struct {
		name string
		vars map[string]string
		args []string
		code int
		want []string
	}{
		{"no project", nil, []string{"build", "--no-wait", t.TempDir(), "--platform", "ios"}, ExitUsage, []string{"no Expo project", "app.json"}},
		{"unknown platform", nil, []string{"build", "--no-wait", dir, "--platform", "windows"}, ExitUsage, []string{`unknown platform "windows"`, "--platform android, ios or all"}},
		{"no platform, no terminal", nil, []string{"build", "--no-wait", dir}, ExitUsage, []string{"pass --platform android, ios or all"}},
		{"wrong key", map[string]string{"EXPO_CONTROLLER_API_KEY": "fa_not_a_real_key_0123456789"}, []string{"build", "--no-wait", dir, "--platform", "ios"}, ExitAuth,
			[]string{"401", "expo-build config --api-key-stdin"}},
		{"worker key cannot submit", map[string]string{"EXPO_CONTROLLER_API_KEY": e.workerKey}, []string{"build", "--no-wait", dir, "--platform", "ios"}, ExitAuth,
			[]string{"403", "role"}},
		{"no key", map[string]string{"EXPO_CONTROLLER_API_KEY": ""}, []string{"build", "--no-wait", dir, "--platform", "ios"}, ExitAuth, []string{"no API key", "--api-key-stdin"}},
		{"unreachable controller", map[string]string{"EXPO_CONTROLLER_URL": closed}, []string{"status", id}, ExitUnreachable,
			[]string{"cannot reach the controller at " + closed, "EXPO_CONTROLLER_URL"}},
		{"unreachable on submit", map[string]string{"EXPO_CONTROLLER_URL": closed}, []string{"build", "--no-wait", dir, "--platform", "ios"}, ExitUnreachable,
			[]string{"cannot reach the controller"}},
		{"no controller URL", map[string]string{"EXPO_CONTROLLER_URL": ""}, []string{"status", id}, ExitUsage, []string{"no controller URL", "expo-build config --controller-url"}},
		{"bad controller URL", map[string]string{"EXPO_CONTROLLER_URL": "ftp://x"}, []string{"status", id}, ExitUsage, []string{"not an http(s) URL"}},
		{"unknown build", nil, []string{"status", "b_doesnotexist"}, ExitNotFound, []string{`no build "b_doesnotexist"`, "404", "expo-build build:list"}},
		{"unknown build logs", nil, []string{"logs", "b_doesnotexist", "-f"}, ExitNotFound, []string{"b_doesnotexist"}},
		{"unknown command", nil, []string{"sumbit"}, ExitUsage, []string{`unknown command "sumbit"`}},
		{"unknown flag", nil, []string{"status", id, "--wacth"}, ExitUsage, []string{"wacth", "expo-build status --help"}},
		{"missing id", nil, []string{"logs"}, ExitUsage, []string{"takes <id>"}},
		{"bad priority", nil, []string{"build", "--no-wait", dir, "--platform", "ios", "--priority", "9"}, ExitUsage, []string{"--priority must be"}},
		{"unknown eas profile", nil, []string{"build", "--no-wait", project(t, map[string]string{"eas.json": `{"build":{"production":{}}}`}), "--platform", "ios", "--profile", "qa"},
			ExitUsage, []string{`no build profile "qa"`, "production"}},
		{"p12 without profile", nil, []string{"build", "--no-wait", dir, "--platform", "ios", "--p12", p12}, ExitUsage, []string{"--p12 needs at least one --provisioning-profile"}},
		{"p12 for android", nil, []string{"build", "--no-wait", dir, "--platform", "android", "--certs", p12}, ExitUsage, []string{"iOS signing material"}},
		{"p12 password with no terminal", nil, []string{"build", "--no-wait", dir, "--platform", "ios", "--p12", p12, "--provisioning-profile", p12 + ".mobileprovision"}, ExitUsage,
			[]string{"EXPO_P12_PASSWORD"}},
		{"workers with a developer key", nil, []string{"workers"}, ExitAuth, []string{"admin"}},
		{"download before the build ends", nil, []string{"download", id}, ExitFailed, []string{"no artifacts yet", "--wait"}},
		{"retry of a pending build", nil, []string{"retry", id}, ExitFailed, []string{"still pending"}},
	}
	os.WriteFile(p12+".mobileprovision", []byte("PROFILE"), 0o600)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.run(c.vars, c.args...)
			if r.code != c.code {
				t.Fatalf("want exit %d\n%s", c.code, r)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q\n%s", w, r)
				}
			}
			if strings.Contains(r.stdout+r.stderr, e.devKey) || strings.Contains(r.stdout+r.stderr, e.workerKey) {
				t.Error("a key was printed")
			}
		})
	}
	// --json errors are JSON on standard error, with the exit code.
	r := e.run(nil, "build:view", "b_doesnotexist", "--json")
	var je struct {
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stderr)), &je); err != nil || je.ExitCode != ExitNotFound || r.stdout != "" {
		t.Errorf("json error: %s (%v)", r, err)
	}
}

// TestBuildTokenAccess: the token saved at submit reads and acts on that
// build even when the API key may not.
func TestBuildTokenAccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.queueBuild(project(t, map[string]string{}), "android")
	w := e.worker()
	job := w.claim()
	w.vm(job).log("hello\n")
	w.finish(job, true, "app.apk", []byte("APK"))
	for _, vars := range []map[string]string{
		{"EXPO_CONTROLLER_API_KEY": e.workerKey}, // a key lacking access
		{"EXPO_CONTROLLER_API_KEY": ""},          // no key at all
	} {
		r := e.mustRun(0, vars, "status", id)
		if !strings.Contains(r.stdout, "completed") {
			t.Errorf("status: %s", r)
		}
		if r := e.mustRun(0, vars, "logs", id); r.stdout != "hello\n" {
			t.Errorf("logs: %s", r)
		}
		e.mustRun(0, vars, "download", id, "-o", t.TempDir())
	}
	// Another machine (no token) with the worker key is refused.
	other := map[string]string{"EXPO_CONTROLLER_API_KEY": e.workerKey, "EXPO_BUILD_CONFIG": filepath.Join(t.TempDir(), "c.json")}
	r := e.mustRun(ExitAuth, other, "status", id)
	if !strings.Contains(r.stderr, "403") {
		t.Errorf("refusal: %s", r)
	}
	// A build token creates no build: a retry with the token alone is
	// refused, saying what works; with the developer key it gets its own token.
	r = e.mustRun(ExitAuth, map[string]string{"EXPO_CONTROLLER_API_KEY": ""}, "retry", id, "--json")
	if !strings.Contains(r.stderr, "developer API key") {
		t.Errorf("retry with a build token: %s", r)
	}
	r = e.mustRun(0, nil, "retry", id, "--json")
	nid := jsonOf[map[string]any](t, r)["id"].(string)
	cfg, _ := loadConfig(e.cfgPath)
	if tok := cfg.token(nid); tok == "" || strings.Contains(r.stdout+r.stderr, tok) {
		t.Fatalf("retry token stored=%v, or printed", tok != "")
	}
	e.mustRun(0, map[string]string{"EXPO_CONTROLLER_API_KEY": ""}, "cancel", nid)
}

// TestSigningMaterialReachesVM: --p12/--provisioning-profile become the certs zip the
// VM receives; the password comes from the environment or a prompt.
func TestSigningMaterialReachesVM(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := project(t, map[string]string{})
	sec := t.TempDir()
	p12, prof, prof2 := randomBytes(t, 2048), randomBytes(t, 900), randomBytes(t, 700)
	os.WriteFile(filepath.Join(sec, "dist.p12"), p12, 0o600)
	os.WriteFile(filepath.Join(sec, "app.mobileprovision"), prof, 0o600)
	os.WriteFile(filepath.Join(sec, "widget.mobileprovision"), prof2, 0o600)
	args := []string{"build", "--no-wait", dir, "--platform", "ios", "--json", "--p12", filepath.Join(sec, "dist.p12"),
		"--provisioning-profile", filepath.Join(sec, "app.mobileprovision"), "--provisioning-profile", filepath.Join(sec, "widget.mobileprovision")}
	w := e.worker()
	check := func(r result, password string) {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("submit: %s", r)
		}
		if strings.Contains(r.stdout+r.stderr, password) {
			t.Fatal("the password was printed")
		}
		job := w.claim()
		if job.CertsURL == nil {
			t.Fatal("the job has no certificates")
		}
		certs, err := (&api.Client{BaseURL: e.URL}).CertsSecure(context.Background(), job.ID, w.vm(job).token)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(certs.P12, p12) || certs.P12Password != password || len(certs.ProvisioningProfiles) != 2 {
			t.Fatalf("certs: password %q, %d profiles", certs.P12Password, len(certs.ProvisioningProfiles))
		}
		w.finish(job, false, "", nil)
	}
	check(e.run(map[string]string{"EXPO_P12_PASSWORD": "from-env-s3cret"}, args...), "from-env-s3cret")
	prompted := ""
	r := e.runApp(func(a *App) {
		a.ReadPassword = func(prompt string) (string, error) { prompted = prompt; return "typed-s3cret", nil }
	}, nil, append(args, "--idempotency-key", "second")...)
	check(r, "typed-s3cret")
	if !strings.Contains(prompted, "dist.p12") {
		t.Errorf("prompt %q", prompted)
	}
}

// TestSubmitWait: submit --wait follows the build and downloads the
// artifact when it completes.
func TestSubmitWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := project(t, map[string]string{})
	out := t.TempDir()
	var stdout, stderr syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- e.app(&stdout, &stderr, nil).Run(context.Background(), []string{"build", dir, "--platform", "android", "--logs", "-o", out})
	}()
	w := e.worker()
	job := w.claim()
	v := w.vm(job)
	v.log("BUILD SUCCESSFUL\n")
	waitFor(t, &stdout, "BUILD SUCCESSFUL", 5*time.Second)
	aab := randomBytes(t, 100_000)
	w.finish(job, true, "app.aab", aab)
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("submit --wait did not return")
	}
	if got, _ := os.ReadFile(filepath.Join(out, "app.aab")); !bytes.Equal(got, aab) {
		t.Fatal("--wait did not download the artifact")
	}

	// Status changes mode; a failed build exits 1.
	go func() {
		done <- e.app(&stdout, &stderr, nil).Run(context.Background(), []string{"build", dir, "--platform", "android", "--idempotency-key", "k2"})
	}()
	job = w.claim()
	w.finish(job, false, "", nil)
	select {
	case code := <-done:
		if code != ExitFailed {
			t.Fatalf("exit %d for a failed build\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("submit --wait did not return")
	}
	if !strings.Contains(stderr.String(), "expo-build logs "+job.ID) {
		t.Errorf("no hint: %s", stderr.String())
	}
}

// TestListCancelRetry: paging, filters, cancel and retry.
func TestListCancelRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := project(t, map[string]string{})
	var ids []string
	for i := range 3 {
		ids = append(ids, e.queueBuild(dir, []string{"ios", "android", "ios"}[i], "--idempotency-key", "k"+string(rune('a'+i))))
	}
	page := jsonOf[api.BuildList](t, e.mustRun(0, nil, "list", "--limit", "2", "--json"))
	if len(page.Builds) != 2 || page.NextCursor == "" {
		t.Fatalf("page 1: %d builds, cursor %q", len(page.Builds), page.NextCursor)
	}
	rest := jsonOf[api.BuildList](t, e.mustRun(0, nil, "list", "--limit", "2", "--cursor", page.NextCursor, "--json"))
	if len(rest.Builds) != 1 || rest.NextCursor != "" {
		t.Fatalf("page 2: %d builds", len(rest.Builds))
	}
	if all := jsonOf[api.BuildList](t, e.mustRun(0, nil, "list", "--limit", "1", "--all", "--json")); len(all.Builds) != 3 {
		t.Fatalf("--all: %d builds", len(all.Builds))
	}
	if ios := jsonOf[api.BuildList](t, e.mustRun(0, nil, "list", "--platform", "ios", "--json")); len(ios.Builds) != 2 {
		t.Fatalf("--platform ios: %d builds", len(ios.Builds))
	}
	human := e.mustRun(0, nil, "list", "--limit", "2")
	if !strings.Contains(human.stdout, "More: expo-build list --cursor") || !strings.Contains(human.stdout, "STATUS") {
		t.Errorf("list: %s", human.stdout)
	}
	if r := e.mustRun(0, nil, "cancel", ids[0]); !strings.Contains(r.stdout, "cancelled") {
		t.Errorf("cancel: %s", r)
	}
	r := e.mustRun(0, nil, "retry", ids[0], "--json")
	nid := jsonOf[map[string]any](t, r)["id"].(string)
	b := jsonOf[api.Build](t, e.mustRun(0, nil, "status", nid, "--json"))
	if b.Status != api.StatusPending || b.RetryOf == nil || *b.RetryOf != ids[0] {
		t.Fatalf("retried build: %+v", b)
	}
	e.mustRun(0, nil, "list", "--status", "cancelled")
	e.mustRun(ExitUsage, nil, "list", "--status", "bogus")
}

// TestWorkersAndConfig: the admin's worker list; storing the controller
// and key; secrets never shown.
func TestWorkersAndConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.worker("ios")
	r := e.mustRun(0, map[string]string{"EXPO_CONTROLLER_API_KEY": e.adminKey}, "workers")
	if !strings.Contains(r.stdout, "test-mac") || !strings.Contains(r.stdout, "ios") {
		t.Errorf("workers: %s", r)
	}
	if ws := jsonOf[map[string][]map[string]any](t, e.mustRun(0, map[string]string{"EXPO_CONTROLLER_API_KEY": e.adminKey}, "workers", "--json")); len(ws["workers"]) != 1 {
		t.Errorf("workers --json: %v", ws)
	}

	cfgPath := filepath.Join(t.TempDir(), "conf", "config.json")
	noEnv := map[string]string{"EXPO_CONTROLLER_URL": "", "EXPO_CONTROLLER_API_KEY": "", "EXPO_BUILD_CONFIG": cfgPath}
	e.mustRun(0, noEnv, "config", "--controller-url", e.URL+"/")
	// A key the controller rejects is not saved.
	r = e.runApp(func(a *App) { a.Stdin = strings.NewReader("fa_wrong_key_123456789\n") }, noEnv, "config", "--api-key-stdin")
	if r.code != ExitAuth || strings.Contains(r.stdout+r.stderr, "fa_wrong_key_123456789") {
		t.Fatalf("bad key: %s", r)
	}
	r = e.runApp(func(a *App) { a.Stdin = strings.NewReader(e.devKey + "\n") }, noEnv, "config", "--api-key-stdin")
	if r.code != 0 || strings.Contains(r.stdout+r.stderr, e.devKey) {
		t.Fatalf("config --api-key-stdin: %s", r)
	}
	st, _ := os.Stat(cfgPath)
	dst, _ := os.Stat(filepath.Dir(cfgPath))
	if st.Mode().Perm() != 0o600 || dst.Mode().Perm() != 0o700 {
		t.Fatalf("modes: file %v dir %v", st.Mode().Perm(), dst.Mode().Perm())
	}
	r = e.mustRun(0, noEnv, "config", "--check")
	if !strings.Contains(r.stdout, "API key         set (from config file)") || !strings.Contains(r.stdout, "accepted (developer)") ||
		!strings.Contains(r.stdout, e.URL+" (from config file)") || strings.Contains(r.stdout, e.devKey) {
		t.Errorf("config: %s", r)
	}
	view := jsonOf[map[string]any](t, e.mustRun(0, noEnv, "config", "--json"))
	if view["api_key_set"] != true || view["controller_url"] != e.URL {
		t.Errorf("config --json: %v", view)
	}
	// The stored settings work.
	id := e.queueBuild(project(t, map[string]string{}), "ios")
	e.mustRun(0, noEnv, "status", id)
	e.mustRun(ExitUsage, noEnv, "config", "--controller-url", "not a url")
	e.mustRun(0, noEnv, "config", "--clear-api-key")
	e.mustRun(ExitAuth, noEnv, "list")
}

// TestInteractivePrompts: on a terminal the platform and secrets are asked
// for; global flags may come before the command.
func TestInteractivePrompts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := project(t, map[string]string{})
	r := e.runApp(func(a *App) {
		a.StdinTTY = true
		a.Stdin = strings.NewReader("windows\nandroid\n")
	}, nil, "build", "--no-wait", dir)
	if r.code != 0 || strings.Count(r.stderr, "Platform to build (android/ios/all)") != 2 || !strings.Contains(r.stdout, "expo-build logs") {
		t.Fatalf("platform prompt: %s", r)
	}
	list := jsonOf[api.BuildList](t, e.mustRun(0, nil, "--controller-url", e.URL, "--json", "list"))
	if len(list.Builds) != 1 || list.Builds[0].Platform != "android" {
		t.Fatalf("builds: %+v", list.Builds)
	}
	cfg := map[string]string{"EXPO_CONTROLLER_API_KEY": "", "EXPO_BUILD_CONFIG": filepath.Join(t.TempDir(), "c.json")}
	r = e.runApp(func(a *App) {
		a.StdinTTY = true
		a.ReadPassword = func(string) (string, error) { return e.devKey, nil }
	}, cfg, "config", "--api-key-stdin")
	if r.code != 0 || strings.Contains(r.stdout+r.stderr, e.devKey) {
		t.Fatalf("hidden key prompt: %s", r)
	}
	e.mustRun(0, cfg, "list")
}
