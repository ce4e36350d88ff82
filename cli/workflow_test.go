package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
)

// TestWorkflowByWhatIsUploaded: an app is bare on a platform when the
// upload holds a marker of its native project (eas-cli's rule), and
// managed when the native directory, however complete locally, is ignored
// (.gitignore, a .gitignore inside it, .easignore) or has no marker.
func TestWorkflowByWhatIsUploaded(t *testing.T) {
	t.Parallel()
	gradle := map[string]string{"android/app/build.gradle": "android {}\n"}
	manifest := map[string]string{"android/app/src/main/AndroidManifest.xml": "<manifest/>\n"}
	pbxproj := map[string]string{"ios/App.xcodeproj/project.pbxproj": "// !$*UTF8*$!\n"}
	with := func(base map[string]string, extra ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(extra); i += 2 {
			out[extra[i]] = extra[i+1]
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		files    map[string]string
		platform string
		want     string
	}{
		{"tracked android/", gradle, api.PlatformAndroid, api.WorkflowGeneric},
		{"only the manifest", manifest, api.PlatformAndroid, api.WorkflowGeneric},
		{"gitignored android/", with(gradle, ".gitignore", "/android\n"), api.PlatformAndroid, api.WorkflowManaged},
		{"gitignored inside android/", with(gradle, "android/.gitignore", "app/build.gradle\n"), api.PlatformAndroid, api.WorkflowManaged},
		{"easignored android/", with(gradle, ".easignore", "android/\n"), api.PlatformAndroid, api.WorkflowManaged},
		{".easignore replaces .gitignore", with(gradle, ".gitignore", "/android\n", ".easignore", "node_modules/\n"), api.PlatformAndroid, api.WorkflowGeneric},
		{"android/ without a marker", map[string]string{"android/README": "x"}, api.PlatformAndroid, api.WorkflowManaged},
		{"no android/", nil, api.PlatformAndroid, api.WorkflowManaged},
		{"tracked ios/", pbxproj, api.PlatformIOS, api.WorkflowGeneric},
		{"gitignored ios/", with(pbxproj, ".gitignore", "ios/\n"), api.PlatformIOS, api.WorkflowManaged},
		{"ios/ with only Pods", map[string]string{"ios/Pods/Pods.xcodeproj/project.pbxproj": "x", "ios/Pods.xcodeproj/project.pbxproj": "x"}, api.PlatformIOS, api.WorkflowManaged},
		{"android/ says nothing of iOS", gradle, api.PlatformIOS, api.WorkflowManaged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := project(t, with(tc.files))
			got, err := resolveWorkflow(dir, api.Project{}, tc.platform)
			if err != nil || got != tc.want {
				t.Errorf("%s: %q, %v; want %q", tc.platform, got, err, tc.want)
			}
		})
	}
	// In a monorepo the app's folder is uploaded from the workspace root,
	// whose .gitignore rules apply to it too.
	root := project(t, map[string]string{".gitignore": "apps/*/android/\n", "apps/mobile/android/app/build.gradle": "android {}\n"})
	if got, err := resolveWorkflow(root, api.Project{AppDir: "apps/mobile"}, api.PlatformAndroid); err != nil || got != api.WorkflowManaged {
		t.Errorf("an app whose android/ the workspace root ignores: %q, %v; want managed", got, err)
	}
}

// TestIgnoredAndroidIsManaged: an app whose android/ is in .gitignore
// (continuous native generation, after a local `expo prebuild`) is
// resolved managed, as EAS decides: the spec says so, the local
// autoIncrement bumps app.json and leaves the ignored build.gradle (which
// is never uploaded) alone, and an app config without android.package is
// refused, as prebuild needs it. An ignored ios/ is managed too; the same
// android/ tracked is bare.
func TestIgnoredAndroidIsManaged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.worker(api.PlatformAndroid)
	local := `{"cli":{"appVersionSource":"local"},"build":{"production":{"autoIncrement":true}}}`
	const gradle = "android {\n  defaultConfig {\n    versionCode 5\n    versionName \"0.9\"\n  }\n}\n"
	dir := project(t, map[string]string{"app.json": appJSON("cng-app"), "eas.json": local,
		".gitignore": "node_modules/\n/android\n", "android/app/build.gradle": gradle})
	r := e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "android", "--json")
	if !strings.Contains(r.stderr, "expo.android.versionCode from 42 to 43 in app.json") || strings.Contains(r.stderr, "build.gradle") {
		t.Errorf("the bump told:\n%s", r)
	}
	if g, _ := os.ReadFile(filepath.Join(dir, "android/app/build.gradle")); string(g) != gradle {
		t.Errorf("the ignored build.gradle was changed:\n%s", g)
	}
	if a, _ := os.ReadFile(filepath.Join(dir, "app.json")); !strings.Contains(string(a), `"versionCode":43`) {
		t.Errorf("app.json after the bump:\n%s", a)
	}
	id := queuedID(t, r)
	b := e.build(t, id)
	if b.Spec.Workflow != api.WorkflowManaged || b.BuildVersion != "43" || b.AppVersion != "1.2.3" {
		t.Errorf("build: workflow %q, versions %q/%q; want managed, 1.2.3/43", b.Spec.Workflow, b.AppVersion, b.BuildVersion)
	}
	if _, view := w.claimAsVM(t, id); view.job.Spec.Workflow != api.WorkflowManaged {
		t.Errorf("the VM's spec says workflow %q", view.job.Spec.Workflow)
	}

	noPackage := project(t, map[string]string{"app.json": `{"expo":{"name":"n","slug":"cng-nopkg"}}`,
		".gitignore": "/android\n", "android/app/build.gradle": gradle})
	if r := e.mustRun(ExitUsage, nil, "build", "--no-wait", noPackage, "--platform", "android"); !strings.Contains(r.stderr, "no android.package") {
		t.Errorf("a managed app without android.package:\n%s", r)
	}

	// iOS alike: an ignored ios/ (here an Xcode project with no shared
	// scheme, which a bare app would be refused for) is prebuild's, and
	// the build's scheme comes from the app config.
	e.worker(api.PlatformIOS)
	ios := project(t, map[string]string{".gitignore": "/ios\n", "ios/Local.xcodeproj/project.pbxproj": "// !$*UTF8*$!\n{}\n"})
	r = e.mustRun(0, nil, "build", "--no-wait", ios, "--platform", "ios", "--json")
	if b := e.build(t, queuedID(t, r)); b.Spec.Workflow != api.WorkflowManaged || b.Spec.IOS == nil || b.Spec.IOS.Scheme != "demo" {
		t.Errorf("an app with an ignored ios/: workflow %q, iOS build %+v", b.Spec.Workflow, b.Spec.IOS)
	}

	os.Remove(filepath.Join(dir, ".gitignore"))
	r = e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "android", "--json")
	if b := e.build(t, queuedID(t, r)); b.Spec.Workflow != api.WorkflowGeneric {
		t.Errorf("a tracked android/ builds with workflow %q, want generic", b.Spec.Workflow)
	}
	if g, _ := os.ReadFile(filepath.Join(dir, "android/app/build.gradle")); !strings.Contains(string(g), "versionCode 44\n") {
		t.Errorf("a bare app's build.gradle after the bump:\n%s", g)
	}
}
