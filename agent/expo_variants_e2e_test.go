package agent_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/standins/fakegradle/fakegradletest"
	"github.com/freeagent-build/freeagent/internal/testsupport/expoapp"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

// TestExpoTemplateAndroidVariants builds the shapes teams give Expo's
// default template, each once on the preview profile (every build costs a
// Metro bundle), through the same real parts as
// TestExpoTemplateAndroidProfiles:
//   - bare: android/ written by the real `expo prebuild` and committed
//     (not ignored), so expo-build resolves the app generic and the VM
//     builds that project as it is, without prebuild; its build.gradle
//     names an application id app.json does not, so the artifact shows
//     whose project was built;
//   - app.config.ts: Expo's "app variants" config names the package from
//     APP_VARIANT, which the preview profile's env sets; the VM's prebuild
//     evaluates it with that env, so the artifact is the variant;
//   - workspace: an npm workspace with the app in apps/mobile and a local
//     package, packages/greeting, that its home screen imports; expo-build
//     run on apps/mobile uploads the root with the app's folder recorded,
//     and Metro bundles the package from outside the app's folder.
func TestExpoTemplateAndroidVariants(t *testing.T) {
	testtool.Need(t, "node", "npx", "aapt", "apksigner")
	started := time.Now()
	gradleHome := fakegradletest.Install(t)

	const (
		marker   = "freeagent-bare-marker-3a9d"
		bareID   = "dev.freeagent.expodefault.bare"
		greeting = "freeagent-greeting-8b4e"
	)
	// Bare: the developer's checkout with node_modules installed, then
	// prebuild's android/ committed and its application id changed by
	// hand, as bare apps diverge from their config. A project of its own
	// (slug): a worker keeps one gradle cache per project and environment,
	// and the two apps' Gradle files differ.
	bare := expoapp.Project(t)
	replaceIn(t, filepath.Join(bare, "app.json"), `"slug": "expo-default"`, `"slug": "expo-bare"`)
	editScreen(t, bare, "{'"+marker+"'}")
	unignoreNative(t, bare)
	expoapp.Prebuild(t, bare, "android")
	gradle := filepath.Join(bare, "android", "app", "build.gradle")
	replaceIn(t, gradle, "applicationId 'dev.freeagent.expodefault'", "applicationId '"+bareID+"'")

	// app.config.ts: evaluated by expo-build with the project's own Expo
	// CLI, so installed here too.
	variant := expoapp.Project(t)
	if err := os.WriteFile(filepath.Join(variant, "app.config.ts"), []byte(expoapp.VariantConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	editEASJSON(t, variant, func(build map[string]any) {
		build["preview"].(map[string]any)["env"] = map[string]string{"APP_VARIANT": "preview"}
	})
	workspace := npmWorkspace(t, greeting)
	t.Logf("projects ready after %s", time.Since(started).Round(time.Second))

	f := newFarm(t, nil)
	expoBuild := f.expoBuild(t)
	submit := func(dir string) string {
		t.Helper()
		code, stdout, stderr := expoBuild("", "build", dir, "--platform", "android", "--profile", "preview", "--non-interactive", "--no-wait")
		if code != 0 {
			t.Fatalf("build %s: exit %d\n%s\n%s", dir, code, stdout, stderr)
		}
		return buildID(t, stdout+stderr)
	}
	const (
		prebuild = "▸ npx expo prebuild"
		skipped  = "▸ a bare app (its own android/ directory): skipping expo prebuild"
	)
	builds := []struct {
		name, dir, id string
		appID         string
		inLog, notLog []string
		bundled       []string
		project       api.Project // the spec's, when not the app alone
	}{
		{name: "bare", dir: bare, appID: bareID, inLog: []string{skipped}, notLog: []string{prebuild}, bundled: []string{marker}},
		{name: "app.config.ts", dir: variant, appID: "dev.freeagent.expodefault.preview", inLog: []string{prebuild}},
		{name: "workspace", dir: filepath.Join(workspace, "apps", "mobile"), appID: "dev.freeagent.expodefault", inLog: []string{"▸ cd apps/mobile && npx expo prebuild"}, bundled: []string{greeting},
			project: api.Project{AppDir: "apps/mobile", PackageManager: "npm", Lockfile: "package-lock.json", Workspace: true}},
	}
	agentDir := t.TempDir()
	seeds := map[string]string{"gradle": tarOf(t, 1, filepath.Join(gradleHome, "wrapper", "dists")), "npm": tarOf(t, 0, expoapp.NPMCache(t))}
	for i := range builds {
		builds[i].id = submit(builds[i].dir)
		seedCaches(t, f, agentDir, builds[i].id, seeds)
	}
	f.startLocalAgentIn(t, agentDir)

	for _, b := range builds {
		t.Run(b.name, func(t *testing.T) {
			out := t.TempDir()
			waited := time.Now()
			code, stdout, stderr := expoBuild("", "build:download", b.id, "--wait", "-o", out)
			log := buildLog(t, f, b.id)
			if code != 0 {
				t.Fatalf("build:download --wait: exit %d\n%s\n%s\n%s", code, stdout, stderr, log)
			}
			t.Logf("waited %s for the %s build", time.Since(waited).Round(time.Second), b.name)
			for _, want := range append([]string{"npm ci", "./gradlew :app:assembleRelease"}, b.inLog...) {
				if !strings.Contains(log, want) {
					t.Errorf("the build log lacks %q:\n%s", want, log)
				}
			}
			for _, unwanted := range b.notLog {
				if strings.Contains(log, unwanted) {
					t.Errorf("the build log has %q:\n%s", unwanted, log)
				}
			}
			build, err := f.dev.GetBuild(context.Background(), b.id)
			if err != nil {
				t.Fatal(err)
			}
			if b.project != (api.Project{}) && (build.Spec == nil || build.Spec.Project != b.project) {
				t.Errorf("spec project: %+v, want %+v", specProject(build.Spec), b.project)
			}
			artifact := filepath.Join(out, "app-release.apk")
			want := "package: name='" + b.appID + "' versionCode='" + build.BuildVersion + "'"
			if badging := badging(t, artifact); build.BuildVersion == "" || !strings.Contains(badging, want) {
				t.Errorf("want %s; aapt dump badging:\n%s", want, badging)
			}
			bundle := zipEntry(t, artifact, "index.android.bundle")
			if !bytes.HasPrefix(bundle, hermesMagic) {
				t.Errorf("index.android.bundle is not Hermes bytecode: % x", bundle[:min(len(bundle), 8)])
			}
			for _, s := range b.bundled {
				if !bytes.Contains(bundle, []byte(s)) {
					t.Errorf("%q is not in the Hermes bundle", s)
				}
			}
		})
	}
	t.Logf("%s in all", time.Since(started).Round(time.Second))
}

// unignoreNative drops the template's "/ios" and "/android" from its
// .gitignore: the native projects are then the team's own, committed.
func unignoreNative(t *testing.T, dir string) {
	t.Helper()
	replaceIn(t, filepath.Join(dir, ".gitignore"), "\n/ios\n/android\n", "\n")
}

// replaceIn replaces old, which must be there, with new in the file at path.
func replaceIn(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s has no %q: update this test", path, old)
	}
	if err := os.WriteFile(path, bytes.ReplaceAll(b, []byte(old), []byte(new)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// npmWorkspace makes an npm workspace, as a team's repository: the
// template in apps/mobile, whose home screen shows what the local package
// packages/greeting exports, greeting. Its package-lock.json is written by
// the real npm, from the template's lockfile moved to the root so that
// the versions stay the template's (the packages come from the npm cache
// the fixture was installed through).
func npmWorkspace(t *testing.T, greeting string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "workspace")
	app := filepath.Join(root, "apps", "mobile")
	if err := os.CopyFS(app, os.DirFS(expoapp.Dir(t))); err != nil {
		t.Fatal(err)
	}
	replaceIn(t, filepath.Join(app, "app.json"), `"slug": "expo-default"`, `"slug": "expo-workspace"`)
	editScreen(t, app, "{greeting}")
	replaceIn(t, filepath.Join(app, "src", "app", "index.tsx"), "import * as Device", "import greeting from 'greeting';\nimport * as Device")

	var lock map[string]any
	readJSON(t, filepath.Join(app, "package-lock.json"), &lock)
	packages := lock["packages"].(map[string]any)
	appPkg := packages[""].(map[string]any)
	appPkg["name"] = "mobile"
	appPkg["dependencies"].(map[string]any)["greeting"] = "1.0.0"
	delete(packages, "")
	packages["apps/mobile"] = appPkg
	packages[""] = map[string]any{"name": "workspace", "workspaces": []string{"apps/*", "packages/*"}}
	lock["name"] = "workspace"
	if err := os.Remove(filepath.Join(app, "package-lock.json")); err != nil {
		t.Fatal(err)
	}
	writeJSON(t, filepath.Join(root, "package-lock.json"), lock)

	var pkg map[string]any
	readJSON(t, filepath.Join(app, "package.json"), &pkg)
	pkg["name"] = "mobile"
	pkg["dependencies"].(map[string]any)["greeting"] = "1.0.0"
	writeJSON(t, filepath.Join(app, "package.json"), pkg)
	writeFiles(t, root, map[string]string{
		"package.json":                   `{"name":"workspace","private":true,"workspaces":["apps/*","packages/*"]}`,
		".gitignore":                     "node_modules/\n",
		"packages/greeting/package.json": `{"name":"greeting","version":"1.0.0","main":"index.js"}`,
		"packages/greeting/index.js":     "module.exports = '" + greeting + "';\n",
	})
	inDir(t, root, append(os.Environ(), "CI=1"), "npm", "install", "--no-audit", "--no-fund", "--prefer-offline", "--cache", expoapp.NPMCache(t))
	var written struct {
		Packages map[string]struct{ Link bool } `json:"packages"`
	}
	readJSON(t, filepath.Join(root, "package-lock.json"), &written)
	if !written.Packages["node_modules/greeting"].Link {
		t.Fatalf("npm's package-lock.json does not link the workspace's greeting package: %+v", written.Packages["node_modules/greeting"])
	}
	return root
}
