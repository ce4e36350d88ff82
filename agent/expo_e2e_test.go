package agent_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/internal/standins/fakegradle/fakegradletest"
	"github.com/freeagent-build/freeagent/internal/testsupport/expoapp"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

// hermesMagic opens every Hermes bytecode file.
var hermesMagic = []byte{0xc6, 0x1f, 0xbc, 0x03, 0xc1, 0x03, 0x19, 0x1f}

// TestExpoTemplateAndroidPreview builds Expo's default template (SDK 55,
// testdata/expo-default) for Android with its preview profile through
// every real part but native compilation: expo-build resolves eas.json,
// the controller queues, the agent's local driver runs freeagent-vm, whose
// pipeline runs the real `npm ci` (from the machine's npm cache, see
// expoapp), the real `expo prebuild`, and the real ./gradlew that prebuild
// wrote, which finds the stand-in Gradle (internal/standins/fakegradle):
// Metro and hermesc compile the app's own source. The APK carries a
// screen's marker and the profile's EXPO_PUBLIC_API_URL in its Hermes
// bytecode, the app id and versions aapt reads, and a signature apksigner
// verifies (the template's debug key: the preview profile has no
// credentials).
func TestExpoTemplateAndroidPreview(t *testing.T) {
	testtool.Need(t, "node", "aapt", "apksigner")
	started := time.Now()
	gradleHome := fakegradletest.Install(t)
	expoapp.NodeModules(t) // fills the npm cache the build's npm ci reads
	t.Logf("stand-in Gradle and npm cache ready after %s", time.Since(started).Round(time.Second))

	const marker = "freeagent-e2e-marker-5c1f"
	const apiURL = "https://api.preview.example.test/v1"
	dir := expoTemplateApp(t, marker, apiURL, nil)

	f := newFarm(t, nil)
	f.startLocalAgent(t, "GRADLE_USER_HOME="+gradleHome, "npm_config_cache="+expoapp.NPMCache(t), "npm_config_prefer_offline=true")
	out := t.TempDir()
	built := time.Now()
	code, stdout, stderr := f.expoBuild(t)("", "build", dir, "--platform", "android", "--profile", "preview", "--non-interactive", "-o", out)
	if code != 0 {
		t.Fatalf("expo-build build --profile preview: exit %d\n%s\n%s", code, stdout, stderr)
	}
	t.Logf("the build took %s (%s in all)", time.Since(built).Round(time.Second), time.Since(started).Round(time.Second))
	log := f.logs(buildID(t, stdout+stderr))
	for _, want := range []string{"npm ci", "expo prebuild", "./gradlew :app:assembleRelease", "native compilation is a stand-in", "> Task :app:createBundleReleaseJsAndAssets"} {
		if !strings.Contains(log, want) {
			t.Errorf("the build log lacks %q:\n%s", want, log)
		}
	}

	apk := filepath.Join(out, "app-release.apk")
	badging := run(t, "aapt", "dump", "badging", apk)
	if !strings.Contains(badging, "package: name='dev.freeagent.expodefault' versionCode='1' versionName='1.0.0'") {
		t.Errorf("aapt dump badging:\n%s", badging)
	}
	if certs := run(t, "apksigner", "verify", "--print-certs", apk); !strings.Contains(certs, "CN=Android Debug") {
		t.Errorf("apksigner verify:\n%s", certs)
	}
	z, err := zip.OpenReader(apk)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	rc, err := z.Open("assets/index.android.bundle")
	if err != nil {
		t.Fatalf("no JS bundle in the APK: %v", err)
	}
	bundle, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(bundle, hermesMagic) {
		t.Errorf("assets/index.android.bundle is not Hermes bytecode: % x", bundle[:min(len(bundle), 8)])
	}
	for _, want := range []string{marker, apiURL} {
		if !bytes.Contains(bundle, []byte(want)) {
			t.Errorf("%q is not in the APK's Hermes bundle", want)
		}
	}
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
	screen := filepath.Join(dir, "src", "app", "index.tsx")
	src, err := os.ReadFile(screen)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(src), "get started", "{'"+marker+"'} {process.env.EXPO_PUBLIC_API_URL}", 1)
	if edited == string(src) {
		t.Fatal("the template's home screen no longer says \"get started\": update this test")
	}
	if err := os.WriteFile(screen, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	var eas map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "eas.json"))
	if err == nil {
		err = json.Unmarshal(b, &eas)
	}
	if err != nil {
		t.Fatal(err)
	}
	for name, profile := range eas["build"].(map[string]any) {
		profile := profile.(map[string]any)
		profile["cache"] = map[string]bool{"disabled": true}
		for k, v := range set {
			profile[k] = v
		}
		if name == "preview" {
			profile["env"] = map[string]string{"EXPO_PUBLIC_API_URL": apiURL}
		}
	}
	if b, err = json.MarshalIndent(eas, "", "  "); err == nil {
		err = os.WriteFile(filepath.Join(dir, "eas.json"), b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
