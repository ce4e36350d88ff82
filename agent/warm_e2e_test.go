package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/internal/cachekey"
	"github.com/freeagent-build/freeagent/internal/standins/faketart/faketarttest"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

// roProbe is the project's post-install hook: it tries to change the
// caches the worker shared with the build, and says whether it could (the
// quotes keep npm's echo of the command from matching).
const roProbe = `if [ -d "$TART_FAKE_SHARED_FILES/caches" ]; then if touch "$TART_FAKE_SHARED_FILES/caches/npm.tar" 2>/dev/null; then echo CACHE_SHARE_"WRITABLE"; else echo CACHE_SHARE_"READONLY"; fi; fi`

// warmProject is an Expo app whose dependencies (is-number, ms) come from
// the registry, locked by the package-lock.json the real npm wrote, for
// project slug; failHook makes its post-install hook fail the build.
func warmProject(t *testing.T, slug string, failHook bool) string {
	t.Helper()
	hook := roProbe
	if failHook {
		hook = "echo the hook fails; exit 1"
	}
	return npmApp(t, slug, map[string]string{"eas-build-post-install": hook}, map[string]string{"is-number": "7.0.0", "ms": "2.1.3"})
}

// npmApp is the stand-in Android app as project slug, with scripts and
// registry dependencies locked by the real npm (node_modules removed).
func npmApp(tb testing.TB, slug string, scripts, deps map[string]string) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), slug)
	if err := os.CopyFS(dir, os.DirFS("../vmbootstrap/testdata/android-app")); err != nil {
		tb.Fatal(err)
	}
	files := map[string]string{
		"app.json": `{"expo":{"name":"Warm","slug":"` + slug + `","version":"1.0.0","android":{"package":"com.example.warm","versionCode":1}}}`,
		"eas.json": `{"build":{"production":{"distribution":"internal","android":{"buildType":"apk"}}}}`,
		"package.json": mustJSON(tb, map[string]any{"name": "warm", "version": "1.0.0", "private": true, "main": "index.js",
			"scripts": scripts, "dependencies": deps}),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	inDir(tb, dir, append(os.Environ(), "npm_config_cache="+tb.TempDir()), "npm", "install", "--no-audit", "--no-fund")
	removeNodeModules(tb, dir)
	return dir
}

// TestWarmBuilds is the dependency caches through the real parts:
// expo-build decides the npm and node_modules caches and their keys, the
// agent shares the project's archives read-only with the fake Tart VM,
// freeagent-vm runs the real `npm ci` and saves both after a success, and
// the agent validates and keeps them; the repeat build restores
// node_modules and skips `npm ci`. Another project never sees them, a
// failed build never writes one, and corrupt archives leave the build
// green and cold.
func TestWarmBuilds(t *testing.T) {
	testtool.Need(t, "node", "npm", "jar", "jarsigner", "apksigner", "zipalign")
	f := newFarm(t, nil)
	agent := f.startAgent()
	run := f.expoBuild(t)
	build := func(dir string, wantOK bool) (string, string) {
		t.Helper()
		code, stdout, stderr := run("", "build", dir, "--platform", "android", "--non-interactive", "-o", t.TempDir())
		if (code == 0) != wantOK {
			t.Fatalf("build %s: exit %d\n%s%s", dir, code, stdout, stderr)
		}
		id := buildID(t, stdout+stderr)
		return id, buildLog(t, f, id)
	}
	archivesOf := func(project, name string) []string { return projectArchives(agent.dir, project, name) }
	archives := func(project string) []string { return archivesOf(project, "npm") }
	must := func(log string, lines ...string) {
		t.Helper()
		for _, l := range lines {
			if !strings.Contains(log, l) {
				t.Fatalf("no %q in the build log:\n%s", l, log)
			}
		}
	}
	mustNot := func(log string, lines ...string) {
		t.Helper()
		for _, l := range lines {
			if strings.Contains(log, l) {
				t.Fatalf("%q in the build log:\n%s", l, log)
			}
		}
	}

	a := warmProject(t, "warm-a", false)
	id, log := build(a, true)
	must(log, "▸ cache npm: miss", "▸ cache node_modules: miss", "▸ npm ci", "▸ cache npm: saved (key ", "▸ cache node_modules: saved (key ")
	b, err := f.dev.GetBuild(context.Background(), id)
	if err != nil || b.Spec == nil || len(b.Spec.Caches) == 0 || b.Spec.Caches[0].Name != "npm" {
		t.Fatalf("spec caches %+v (%v)", b.Spec, err)
	}
	// The worker holds it under the farm's key bound to the build's cache
	// domain (production, no secrets).
	key := cachekey.Qualify("environment:"+b.Spec.Environment+" without secrets", b.Spec.Caches[0].Key)
	// The agent keeps it once the VM is gone, after the build's success
	// was reported.
	if !faketarttest.WaitFor(30*time.Second, func() bool { got := archives("warm-a"); return len(got) == 1 && filepath.Base(got[0]) == key+".tar" }) {
		t.Fatalf("the worker keeps %v for warm-a, want %s.tar", archives("warm-a"), key)
	}

	if !faketarttest.WaitFor(30*time.Second, func() bool { return len(archivesOf("warm-a", "node_modules")) == 1 }) {
		t.Fatalf("the worker keeps no node_modules archive for warm-a")
	}

	// The repeat build restores node_modules in place of `npm ci`, so it
	// needs no npm cache; the shares are read-only; nothing is saved.
	_, log = build(a, true)
	must(log, "▸ cache npm: found (key "+key[:12], "▸ node_modules restored from cache ", ", npm ci skipped", "CACHE_SHARE_READONLY")
	mustNot(log, "CACHE_SHARE_WRITABLE", "▸ npm ci", "cache npm: restored", "cache npm: saved", "cache node_modules: saved")

	// Project B, same files and lockfile: its own key, no archive of A's.
	bDir := warmProject(t, "warm-b", false)
	if la, lb := readFile(t, filepath.Join(a, "package-lock.json")), readFile(t, filepath.Join(bDir, "package-lock.json")); la != lb {
		t.Fatalf("the two projects' lockfiles differ:\n%s\n%s", la, lb)
	}
	_, log = build(bDir, true)
	must(log, "▸ cache npm: miss")
	mustNot(log, "cache npm: restored")

	// A failed build writes no cache.
	c := warmProject(t, "warm-c", true)
	_, log = build(c, false)
	mustNot(log, "cache npm: saved")

	// Corrupt archives on the worker: the build warns, installs cold and
	// succeeds, and saves good ones.
	corrupt := []string{archives("warm-a")[0], archivesOf("warm-a", "node_modules")[0]}
	for _, path := range corrupt {
		os.Chmod(path, 0o644)
		if err := os.WriteFile(path, []byte(strings.Repeat("not a tar archive\n", 64)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, log = build(a, true)
	must(log, "▸ warning: cache node_modules: the archive is unusable", "▸ warning: cache npm: the archive is unusable", "▸ npm ci",
		"▸ cache npm: saved (key ", "▸ cache node_modules: saved (key ")
	for _, path := range corrupt {
		if !faketarttest.WaitFor(30*time.Second, func() bool {
			data, err := os.ReadFile(path)
			return err == nil && !strings.HasPrefix(string(data), "not a tar")
		}) {
			t.Fatalf("the corrupt archive %s was not replaced", path)
		}
	}
	// By now the failed build's VM is long gone: it kept nothing.
	if got := archives("warm-c"); len(got) != 0 {
		t.Fatalf("a failed build left a cache: %v", got)
	}

	// The worker reports after each build: A's two restores, the misses
	// of A's first build, B's and C's.
	admin := f.adminClient(t)
	var wc *api.WorkerCache
	if !faketarttest.WaitFor(30*time.Second, func() bool {
		ws, err := admin.ListWorkers(context.Background())
		if err != nil || len(ws.Workers) != 1 {
			return false
		}
		wc = ws.Workers[0].Cache
		return wc != nil && wc.Bytes > 0 && wc.Hits == 2 && wc.Misses == 3
	}) {
		t.Fatalf("the worker's cache report %+v, want bytes, 2 hits, 3 misses", wc)
	}
}

// projectArchives are the archives of cache name the worker in agentDir
// holds for project, in any cache domain: its directories are the
// project's lower-case name, "~", a hash.
func projectArchives(agentDir, project, name string) []string {
	m, _ := filepath.Glob(filepath.Join(agentDir, "caches", project+"~*", name, "*.tar"))
	return m
}

// TestPlantedCacheIsNotRestoredWithSecrets is the planted-Gradle probe
// through the real parts: a build without secrets plants a Gradle
// distribution (with the wrapper's .ok marker) in its gradle cache, which
// the worker keeps; once the environment has a secret, the next build of
// the same source is in another cache domain and restores nothing of it,
// nor is it placed or staged for it. The keys the worker files are the
// farm's, from the source.
func TestPlantedCacheIsNotRestoredWithSecrets(t *testing.T) {
	testtool.Need(t, "node", "npm", "jar", "jarsigner", "apksigner", "zipalign")
	f := newFarm(t, nil)
	agent := f.startAgent()
	run := f.expoBuild(t)
	const plant = `mkdir -p "$GRADLE_USER_HOME/wrapper/dists/gradle-8.10-bin/planted/gradle-8.10" && echo planted > "$GRADLE_USER_HOME/wrapper/dists/gradle-8.10-bin/planted/gradle-8.10-bin.zip.ok" && echo PLANTED`
	dir := npmApp(t, "planted", map[string]string{"eas-build-post-install": plant}, map[string]string{"is-number": "7.0.0"})
	build := func() (api.Build, string) {
		t.Helper()
		code, stdout, stderr := run("", "build", dir, "--platform", "android", "--non-interactive", "-o", t.TempDir())
		if code != 0 {
			t.Fatalf("build: exit %d\n%s%s", code, stdout, stderr)
		}
		id := buildID(t, stdout+stderr)
		b, err := f.dev.GetBuild(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return b, buildLog(t, f, id)
	}

	first, log := build()
	if !strings.Contains(log, "PLANTED") || !strings.Contains(log, "▸ cache gradle: saved (key ") {
		t.Fatalf("the first build planted nothing:\n%s", log)
	}
	if !faketarttest.WaitFor(30*time.Second, func() bool { return len(projectArchives(agent.dir, "planted", "gradle")) == 1 }) {
		t.Fatal("the worker keeps no gradle archive of the first build")
	}
	// Without the secret, the same source would restore it (the control).
	_, log = build()
	if !strings.Contains(log, "▸ cache gradle: restored (key ") {
		t.Fatalf("a second build without secrets did not restore the gradle cache:\n%s", log)
	}

	if _, err := f.adminClient(t).SetVariable(context.Background(), "planted", api.SetVariableRequest{Name: "SIGNING_PASSWORD",
		Value: "a production secret", Visibility: api.VisibilitySecret, Environments: []string{first.Spec.Environment}}); err != nil {
		t.Fatal(err)
	}
	secret, log := build()
	if !strings.Contains(log, "▸ cache gradle: miss") || strings.Contains(log, "cache gradle: restored") {
		t.Fatalf("the build with a secret was given the planted gradle cache:\n%s", log)
	}
	if secret.Spec.Caches[len(secret.Spec.Caches)-1].Key != first.Spec.Caches[len(first.Spec.Caches)-1].Key {
		t.Fatal("the same source has another farm key: the miss proves nothing")
	}
	if !faketarttest.WaitFor(30*time.Second, func() bool { return len(projectArchives(agent.dir, "planted", "gradle")) == 2 }) {
		t.Fatalf("the worker holds %v: want one gradle archive per domain", projectArchives(agent.dir, "planted", "gradle"))
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// adminClient is a client of the farm's controller with a new admin key.
func (f *farm) adminClient(t *testing.T) *api.Client {
	t.Helper()
	st, err := store.Open(context.Background(), f.dsn, store.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, key, err := st.CreateKey(context.Background(), "admin", "admin")
	if err != nil {
		t.Fatal(err)
	}
	return &api.Client{BaseURL: f.url, APIKey: key}
}
