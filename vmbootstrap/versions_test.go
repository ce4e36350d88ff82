package vmbootstrap

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
)

func versionsPipeline(t *testing.T, files map[string]string, spec api.BuildSpec) *pipeline {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return &pipeline{tree: root, root: root, spec: spec, runner: &stepRunner{out: io.Discard}}
}

func remoteSpec(platform, configSource, buildVersion string) api.BuildSpec {
	return api.BuildSpec{Platform: platform, App: api.App{ConfigSource: configSource},
		Versions: &api.AppVersions{Source: api.VersionSourceRemote, ApplicationID: "com.example.app", AppVersion: "1.0.0", BuildVersion: buildVersion}}
}

// TestRemoteVersionsApplied: a remote-source build version goes into
// app.json before prebuild for a managed app with a static config, and
// into build.gradle for a bare one (or a dynamic config); a remote spec
// without a decided number is refused; the local source changes nothing.
func TestRemoteVersionsApplied(t *testing.T) {
	const app = `{"expo": {"name": "x", "android": {"package": "com.example.app", "versionCode": 1}, "ios": {"buildNumber": "1"}}}`
	p := versionsPipeline(t, map[string]string{"app.json": app}, remoteSpec(api.PlatformAndroid, "app.json", "57"))
	if set, err := p.versionsBeforePrebuild(); err != nil || !set {
		t.Fatalf("managed Android: %v %v", set, err)
	}
	if b, _ := os.ReadFile(filepath.Join(p.root, "app.json")); !strings.Contains(string(b), `"versionCode": 57`) {
		t.Errorf("app.json: %s", b)
	}
	p = versionsPipeline(t, map[string]string{"app.json": app}, remoteSpec(api.PlatformIOS, "app.json", "3.1"))
	if set, err := p.versionsBeforePrebuild(); err != nil || !set {
		t.Fatalf("managed iOS: %v %v", set, err)
	}
	if b, _ := os.ReadFile(filepath.Join(p.root, "app.json")); !strings.Contains(string(b), `"buildNumber": "3.1"`) {
		t.Errorf("app.json: %s", b)
	}

	gradle := "android {\n  defaultConfig {\n    versionCode 1\n  }\n}\n"
	p = versionsPipeline(t, map[string]string{"app.config.js": "", "android/app/build.gradle": gradle}, remoteSpec(api.PlatformAndroid, "expo config", "58"))
	if set, err := p.versionsBeforePrebuild(); err != nil || set {
		t.Fatalf("a dynamic config is left to the native files: %v %v", set, err)
	}
	if err := p.androidVersionsInNative(filepath.Join(p.root, "android")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(p.root, "android/app/build.gradle")); !strings.Contains(string(b), "versionCode 58\n") {
		t.Errorf("build.gradle: %s", b)
	}

	p = versionsPipeline(t, map[string]string{"app.json": app, "android/app/build.gradle": gradle}, remoteSpec(api.PlatformAndroid, "app.json", ""))
	if _, err := p.versionsBeforePrebuild(); !errors.Is(err, errConfig) {
		t.Errorf("a remote spec without a build version: %v", err)
	}
	if err := p.androidVersionsInNative(filepath.Join(p.root, "android")); !errors.Is(err, errConfig) {
		t.Errorf("a remote spec without a build version (bare): %v", err)
	}

	local := remoteSpec(api.PlatformAndroid, "app.json", "9")
	local.Versions.Source = api.VersionSourceLocal
	p = versionsPipeline(t, map[string]string{"app.json": app, "android/app/build.gradle": gradle}, local)
	if set, err := p.versionsBeforePrebuild(); err != nil || set {
		t.Fatalf("local source: %v %v", set, err)
	}
	if err := p.androidVersionsInNative(filepath.Join(p.root, "android")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(p.root, "android/app/build.gradle")); string(b) != gradle {
		t.Errorf("the local source changed build.gradle: %s", b)
	}
}
