package agent_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/agent/cache"
	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/cachekey"
	"github.com/freeagent-build/freeagent/internal/standins/fakegradle/fakegradletest"
	"github.com/freeagent-build/freeagent/internal/testsupport/expoapp"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

// hermesMagic opens every Hermes bytecode file.
var hermesMagic = []byte{0xc6, 0x1f, 0xbc, 0x03, 0xc1, 0x03, 0x19, 0x1f}

// TestExpoTemplateAndroidProfiles builds Expo's default template (SDK 55,
// testdata/expo-default) for Android on each of the three profiles
// `eas build:configure` writes, through every real part but native
// compilation: expo-build resolves eas.json, the controller queues and
// numbers the versions, the agent's local driver runs freeagent-vm with
// the worker's dependency caches on, whose pipeline runs the real `npm
// ci`, the real `expo prebuild`, and the real ./gradlew that prebuild
// wrote, which finds the stand-in Gradle (internal/standins/fakegradle) in
// the Gradle home the gradle cache restored: Metro and hermesc compile the
// app's own source.
//
// The worker's caches are seeded as a worker's first build on a networked
// machine leaves them: the gradle cache holds the Gradle distribution the
// wrapper names (here the stand-in), the npm cache the packages.
//
// Each artifact carries the app id and the versions the farm gave it, as
// aapt reads them; the release builds carry a screen's marker, the farm's
// plaintext EXPO_PUBLIC_ variable and (preview) the profile's
// EXPO_PUBLIC_API_URL in their Hermes bytecode; the development client is
// a debug build (:app:assembleDebug) that loads its JavaScript from Metro,
// so it has none. Then the bad input: a screen with a
// syntax error fails the bundle step with Metro's error, a package.json
// the lockfile does not match fails `npm ci` with npm's; neither is retried.
func TestExpoTemplateAndroidProfiles(t *testing.T) {
	testtool.Need(t, "node", "aapt", "apksigner")
	started := time.Now()
	gradleHome := fakegradletest.Install(t)
	expoapp.NodeModules(t) // fills the npm cache the worker's cache is seeded with
	t.Logf("stand-in Gradle and npm cache ready after %s", time.Since(started).Round(time.Second))

	const (
		marker   = "freeagent-e2e-marker-5c1f"
		apiURL   = "https://api.preview.example.test/v1"
		farmFlag = "farm-plaintext-flag-7d2e"
	)
	dir := expoapp.Copy(t)
	editScreen(t, dir, "{'"+marker+"'} {process.env.EXPO_PUBLIC_API_URL} {process.env.EXPO_PUBLIC_FARM_FLAG}")
	editEASJSON(t, dir, func(build map[string]any) {
		build["preview"].(map[string]any)["env"] = map[string]string{"EXPO_PUBLIC_API_URL": apiURL}
	})
	// A screen Metro cannot parse.
	syntax := expoapp.Copy(t)
	editScreen(t, syntax, "{'unclosed}")
	// A dependency package-lock.json does not have (not even deeper
	// down: npm ci would take one it locks for another package).
	unsynced := expoapp.Copy(t)
	pkgPath := filepath.Join(unsynced, "package.json")
	var pkg map[string]any
	readJSON(t, pkgPath, &pkg)
	pkg["dependencies"].(map[string]any)["left-pad"] = "1.3.0"
	writeJSON(t, pkgPath, pkg)

	f := newFarm(t, nil)
	expoBuild := f.expoBuild(t)
	if code, out, errOut := expoBuild(farmFlag+"\n", "env", "set", "EXPO_PUBLIC_FARM_FLAG", "--visibility", "plaintext", "--project", "expo-default"); code != 0 {
		t.Fatalf("env set: exit %d\n%s%s", code, out, errOut)
	}
	submit := func(dir, profile string) string {
		t.Helper()
		code, stdout, stderr := expoBuild("", "build", dir, "--platform", "android", "--profile", profile, "--non-interactive", "--no-wait")
		if code != 0 {
			t.Fatalf("build --profile %s: exit %d\n%s\n%s", profile, code, stdout, stderr)
		}
		return buildID(t, stdout+stderr)
	}
	type good struct {
		profile, id string
		task        string
		artifact    string
		bundled     []string // what the Hermes bundle carries; nil: no bundle
		notBundled  []string
	}
	builds := []*good{
		{profile: "preview", task: "./gradlew :app:assembleRelease", artifact: "app-release.apk", bundled: []string{marker, apiURL, farmFlag}},
		{profile: "production", task: "./gradlew :app:bundleRelease", artifact: "app-release.aab", bundled: []string{marker, farmFlag}, notBundled: []string{apiURL}},
		{profile: "development", task: "./gradlew :app:assembleDebug", artifact: "app-debug.apk"},
	}
	for _, b := range builds {
		b.id = submit(dir, b.profile)
	}
	syntaxID, unsyncedID := submit(syntax, "preview"), submit(unsynced, "preview")

	// The worker's caches before its first build here.
	agentDir := t.TempDir()
	seeds := map[string]string{"gradle": tarOf(t, 1, filepath.Join(gradleHome, "wrapper", "dists")), "npm": tarOf(t, 0, expoapp.NPMCache(t))}
	for _, id := range []string{builds[0].id, builds[1].id, builds[2].id, syntaxID} {
		seedCaches(t, f, agentDir, id, seeds)
	}
	worker := f.startLocalAgentIn(t, agentDir)

	for _, b := range builds {
		t.Run(b.profile, func(t *testing.T) {
			out := t.TempDir()
			waited := time.Now()
			code, stdout, stderr := expoBuild("", "build:download", b.id, "--wait", "-o", out)
			log := f.logs(b.id)
			if code != 0 {
				t.Fatalf("build:download --wait: exit %d\n%s\n%s\n%s", code, stdout, stderr, log)
			}
			t.Logf("waited %s for the %s build", time.Since(waited).Round(time.Second), b.profile)
			for _, want := range []string{"▸ cache gradle: restored", "npm ci", "expo prebuild", b.task, "native compilation is a stand-in"} {
				if !strings.Contains(log, want) {
					t.Errorf("the build log lacks %q:\n%s", want, log)
				}
			}
			build, err := f.dev.GetBuild(context.Background(), b.id)
			if err != nil {
				t.Fatal(err)
			}
			worker.logAttempts(t, build)
			artifact := filepath.Join(out, b.artifact)
			want := "package: name='dev.freeagent.expodefault' versionCode='" + build.BuildVersion + "' versionName='1.0.0'"
			if badging := badging(t, artifact); build.BuildVersion == "" || !strings.Contains(badging, want) {
				t.Errorf("want %s (the build's versions %q %q); aapt dump badging:\n%s", want, build.AppVersion, build.BuildVersion, badging)
			}
			bundle := zipEntry(t, artifact, "index.android.bundle")
			if b.bundled == nil {
				if bundle != nil || strings.Contains(log, "createBundleDebugJsAndAssets") {
					t.Errorf("the development client carries a JS bundle (%d bytes): a debug build loads it from Metro", len(bundle))
				}
			} else {
				if !bytes.HasPrefix(bundle, hermesMagic) {
					t.Errorf("index.android.bundle is not Hermes bytecode: % x", bundle[:min(len(bundle), 8)])
				}
				for _, s := range b.bundled {
					if !bytes.Contains(bundle, []byte(s)) {
						t.Errorf("%q is not in the Hermes bundle", s)
					}
				}
				for _, s := range b.notBundled {
					if bytes.Contains(bundle, []byte(s)) {
						t.Errorf("%q, of another profile, is in the Hermes bundle", s)
					}
				}
			}
		})
	}

	// Bad input: the tool's own error in the log, the step that failed,
	// an exit the CLI explains, one attempt.
	for _, c := range []struct {
		name, id string
		tool     []string // the tool's own words, in the log
		step     string   // the command that failed, in the build's error
	}{
		{"syntax error in a screen", syntaxID, []string{"SyntaxError", "src/app/index.tsx", "Execution failed for task ':app:createBundleReleaseJsAndAssets'"}, "./gradlew :app:assembleRelease"},
		{"lockfile out of sync", unsyncedID, []string{"`npm ci` can only install packages when your package.json and package-lock.json", "Missing: left-pad@1.3.0 from lock file"}, "npm ci --include=dev"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := expoBuild("", "build:download", c.id, "--wait", "-o", t.TempDir())
			log := f.logs(c.id)
			b, err := f.dev.GetBuild(context.Background(), c.id)
			if err != nil {
				t.Fatal(err)
			}
			worker.logAttempts(t, b)
			t.Logf("expo-build build:download --wait: exit %d\n%s%s", code, stdout, stderr)
			if code == 0 || !strings.Contains(stderr, "failed") {
				t.Errorf("build:download of a failed build: exit %d, want one saying it failed:\n%s%s", code, stdout, stderr)
			}
			for _, want := range c.tool {
				if !strings.Contains(log, want) {
					t.Errorf("the build log lacks %q:\n%s", want, log)
				}
			}
			if b.Status != api.StatusFailed || !strings.Contains(deref(b.ErrorMessage), c.step) || len(b.Artifacts) != 0 {
				t.Errorf("want a failed build naming `%s`, no artifact; got %s %q %d artifact(s)", c.step, b.Status, deref(b.ErrorMessage), len(b.Artifacts))
			}
			if b.Attempts != 1 || deref(b.ErrorCode) != api.CodeBuildFailed {
				t.Errorf("want one attempt ending %s, got %d attempt(s), code %s", api.CodeBuildFailed, b.Attempts, deref(b.ErrorCode))
			}
		})
	}
	t.Logf("%s in all", time.Since(started).Round(time.Second))
}

// editScreen puts text in place of "get started" on the template's home
// screen.
func editScreen(t *testing.T, dir, text string) {
	t.Helper()
	screen := filepath.Join(dir, "src", "app", "index.tsx")
	src, err := os.ReadFile(screen)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(src), "get started", text, 1)
	if edited == string(src) {
		t.Fatal("the template's home screen no longer says \"get started\": update this test")
	}
	if err := os.WriteFile(screen, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
}

// editEASJSON lets edit change eas.json's build profiles.
func editEASJSON(t *testing.T, dir string, edit func(build map[string]any)) {
	t.Helper()
	var eas map[string]any
	readJSON(t, filepath.Join(dir, "eas.json"), &eas)
	edit(eas["build"].(map[string]any))
	writeJSON(t, filepath.Join(dir, "eas.json"), eas)
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// tarOf writes a cache archive, as freeagent-vm saves one, whose tree i
// (the cache's i-th path) is dir, and returns its path.
func tarOf(t *testing.T, i int, dir string) string {
	t.Helper()
	out, err := os.CreateTemp(t.TempDir(), "seed-*.tar")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	tw := tar.NewWriter(out)
	prefix := []string{"0", "1", "2"}[i]
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(filepath.Join(prefix, rel))
		if d.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		t.Fatalf("archive %s: %v", dir, err)
	}
	return out.Name()
}

// seedCaches files seeds (cache name → archive) in the worker's cache
// store under build id's keys, in its cache domain (an environment's
// builds without secrets), as that
// worker's earlier build would have saved them.
func seedCaches(t *testing.T, f *farm, agentDir, id string, seeds map[string]string) {
	t.Helper()
	b, err := f.dev.GetBuild(context.Background(), id)
	if err != nil || b.Spec == nil {
		t.Fatalf("build %s: %v (spec %v)", id, err, b.Spec)
	}
	store, err := cache.Open(filepath.Join(agentDir, "caches"), 20<<30)
	if err != nil {
		t.Fatal(err)
	}
	domain := "environment:" + b.Spec.Environment + " without secrets"
	seeded := 0
	for _, c := range b.Spec.Caches {
		if seed, ok := seeds[c.Name]; ok {
			if err := store.Put(b.Spec.BuildProject(), domain, c.Name, cachekey.Qualify(domain, c.Key), seed); err != nil {
				t.Fatalf("seed the %s cache: %v", c.Name, err)
			}
			seeded++
		}
	}
	if seeded != len(seeds) {
		t.Fatalf("build %s has caches %+v: want %d to seed", id, b.Spec.Caches, len(seeds))
	}
}

// badging is `aapt dump badging` of an APK, or of an AAB's base manifest
// (which the stand-in writes as binary XML, as in an APK).
func badging(t *testing.T, path string) string {
	t.Helper()
	if strings.HasSuffix(path, ".aab") {
		manifest := zipEntry(t, path, "base/manifest/AndroidManifest.xml")
		apk := filepath.Join(t.TempDir(), "manifest-only.apk")
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		w, err := zw.Create("AndroidManifest.xml")
		if err == nil {
			_, err = w.Write(manifest)
		}
		if err == nil {
			err = zw.Close()
		}
		if err == nil {
			err = os.WriteFile(apk, buf.Bytes(), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		path = apk
	}
	return run(t, "aapt", "dump", "badging", path)
}

// zipEntry is the content of the first entry of the zip at path whose name
// ends in suffix, nil when there is none.
func zipEntry(t *testing.T, path, suffix string) []byte {
	t.Helper()
	z, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	for _, e := range z.File {
		if !strings.HasSuffix(e.Name, suffix) {
			continue
		}
		rc, err := e.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return nil
}

// expoTemplateApp copies Expo's template (expoapp) and makes it the
// app of a team's test: the home screen shows marker and
// EXPO_PUBLIC_API_URL, which the preview profile sets to apiURL. Every
// profile's caches are off: the farm's would point GRADLE_USER_HOME and
// npm's cache at the build's cache directories, where the real wrapper
// would download Gradle and npm would fetch every package; without them
// the build uses the agent's (or the guest's), which hold the stand-in
// Gradle and the machine's npm cache. Each of set's keys is set on every
// profile.
func expoTemplateApp(t *testing.T, marker, apiURL string, set map[string]any) string {
	t.Helper()
	dir := expoapp.Copy(t)
	editScreen(t, dir, "{'"+marker+"'} {process.env.EXPO_PUBLIC_API_URL}")
	editEASJSON(t, dir, func(build map[string]any) {
		for name, profile := range build {
			profile := profile.(map[string]any)
			profile["cache"] = map[string]bool{"disabled": true}
			for k, v := range set {
				profile[k] = v
			}
			if name == "preview" {
				profile["env"] = map[string]string{"EXPO_PUBLIC_API_URL": apiURL}
			}
		}
	})
	return dir
}
