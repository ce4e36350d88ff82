package agent_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/internal/plist"
	"github.com/freeagent-build/freeagent/internal/provisioning/provisioningtest"
	"github.com/freeagent-build/freeagent/internal/testsupport/expoapp"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

// TestExpoTemplateIOS builds Expo's default template (SDK 55,
// testdata/expo-default) for iOS on the three stock profiles through
// every real part but native compilation: expo-build resolves eas.json
// (the remote version source), the controller queues, the agent runs each
// build in a fake Tart VM whose freeagent-vm runs the real `npm ci` and
// `expo prebuild`, the stand-in pod install (it reads the real Podfile and
// integrates the real project) and the strict stand-in xcodebuild, which
// runs the project's own "Bundle React Native code and images" phase:
// React Native's react-native-xcode.sh through Expo's wrapper, Metro and
// hermesc over the app's own source. The preview and production .ipa
// carry a screen's marker (and, on preview only, the profile's
// EXPO_PUBLIC_API_URL) in their Hermes bytecode; development's (Debug)
// carries no bundle, as React Native's script skips it in Debug. Each
// has the bundle id, the app's version and the build number the farm
// gave it (production's autoIncrement bumps it), and its own profile.
func TestExpoTemplateIOS(t *testing.T) {
	testtool.Need(t, "node", "bash")
	started := time.Now()
	expoapp.NodeModules(t) // fills the npm cache the build's npm ci reads
	const marker = "freeagent-e2e-ios-marker-7d2a"
	const apiURL = "https://api.preview.example.test/v1"
	// The template's .gitignore keeps the certificate and profile out of
	// the source archive; credentials.json is added.
	dir := expoTemplateApp(t, marker, apiURL, map[string]any{"credentialsSource": "local"})
	gi, err := os.OpenFile(filepath.Join(dir, ".gitignore"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = gi.WriteString("credentials.json\n")
		gi.Close()
	}
	if err != nil {
		t.Fatal(err)
	}

	f := newFarm(t, nil)
	f.iosGuest(t, "")
	f.guestEnv(map[string]string{"npm_config_cache": expoapp.NPMCache(t), "npm_config_prefer_offline": "true"})
	f.startAgent()
	expoBuild := f.expoBuild(t)
	t.Logf("npm cache and farm ready after %s", time.Since(started).Round(time.Second))

	const bundleID = "dev.freeagent.expodefault"
	type build struct {
		profile      string
		adHoc        bool
		buildVersion string
		inlined      []string // nil: no bundle (a Debug build loads its JavaScript from Metro)
		kit          provisioningtest.Kit
		id           string
	}
	builds := []*build{
		// The farm starts the remote build number at the project's "1";
		// production's autoIncrement bumps it.
		{profile: "preview", adHoc: true, buildVersion: "1", inlined: []string{marker, apiURL}},
		{profile: "production", adHoc: false, buildVersion: "2", inlined: []string{marker}},
		// developmentClient: the Debug configuration, whose bundle phase
		// skips bundling as React Native's script does in Debug.
		{profile: "development", adHoc: true, buildVersion: "2"},
	}
	// Submitted one after the other (the farm decides build numbers at
	// the submit), built side by side (the agent takes two builds).
	for _, c := range builds {
		c.kit = provisioningtest.NewKit(t, "TEAM123456", "kit-p12-password", c.adHoc, bundleID)
		files := map[string][]byte{
			"credentials.json":          []byte(`{"ios":{"provisioningProfilePath":"certs/app.mobileprovision","distributionCertificate":{"path":"certs/dist.p12","password":"kit-p12-password"}}}`),
			"certs/dist.p12":            c.kit.P12,
			"certs/app.mobileprovision": c.kit.Profiles[bundleID],
		}
		for name, body := range files {
			p := filepath.Join(dir, filepath.FromSlash(name))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, body, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		code, stdout, stderr := expoBuild("", "build", dir, "--platform", "ios", "--profile", c.profile, "--non-interactive", "--wait=false")
		if code != 0 {
			t.Fatalf("expo-build build --profile %s: exit %d\n%s\n%s", c.profile, code, stdout, stderr)
		}
		c.id = buildID(t, stdout+stderr)
	}
	submitted := time.Now()
	for _, c := range builds {
		out := t.TempDir()
		code, stdout, stderr := expoBuild("", "build:download", c.id, "--wait", "-o", out)
		log := f.logs(c.id)
		if code != 0 {
			t.Fatalf("the %s build: exit %d\n%s\n%s\n%s", c.profile, code, stdout, stderr, log)
		}
		t.Logf("the %s build was done %s after the submits", c.profile, time.Since(submitted).Round(time.Second))
		wants := []string{"npm ci", "expo prebuild", "cd ios && pod install", "Pod installation complete!",
			"PhaseScriptExecution Bundle\\ React\\ Native\\ code\\ and\\ images", "** ARCHIVE SUCCEEDED **", "** EXPORT SUCCEEDED **"}
		if c.inlined != nil {
			wants = append(wants, "export:embed", "hermesc")
		} else {
			wants = append(wants, "-configuration Debug", "SKIP_BUNDLING enabled; skipping.")
		}
		for _, want := range wants {
			if !strings.Contains(log, want) {
				t.Errorf("%s: the build log lacks %q:\n%s", c.profile, want, log)
			}
		}
		b, err := f.dev.GetBuild(context.Background(), c.id)
		if err != nil {
			t.Fatal(err)
		}
		if b.BuildVersion != c.buildVersion {
			t.Errorf("%s: the farm recorded build number %q, want %q", c.profile, b.BuildVersion, c.buildVersion)
		}

		ipa := filepath.Join(out, "ExpoDefault.ipa")
		entries := zipFiles(t, ipa, "Payload/ExpoDefault.app/Info.plist", "Payload/ExpoDefault.app/embedded.mobileprovision")
		var info struct {
			ID           string `plist:"CFBundleIdentifier"`
			ShortVersion string `plist:"CFBundleShortVersionString"`
			Version      string `plist:"CFBundleVersion"`
		}
		if _, err := plist.Unmarshal(entries[0], &info); err != nil {
			t.Fatal(err)
		}
		if info.ID != bundleID || info.ShortVersion != "1.0.0" || info.Version != c.buildVersion {
			t.Errorf("%s: the .ipa's Info.plist has %+v, want %s 1.0.0 (%s)", c.profile, info, bundleID, c.buildVersion)
		}
		if !bytes.Equal(entries[1], c.kit.Profiles[bundleID]) {
			t.Errorf("%s: the .ipa does not embed the build's profile", c.profile)
		}
		if c.inlined == nil {
			zr, err := zip.OpenReader(ipa)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := zr.Open("Payload/ExpoDefault.app/main.jsbundle"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s: a Debug build has a JavaScript bundle (%v)", c.profile, err)
			}
			zr.Close()
			continue
		}
		bundle := zipFiles(t, ipa, "Payload/ExpoDefault.app/main.jsbundle")[0]
		if !bytes.HasPrefix(bundle, hermesMagic) {
			t.Errorf("%s: main.jsbundle is not Hermes bytecode: % x", c.profile, bundle[:min(len(bundle), 8)])
		}
		for _, want := range c.inlined {
			if !bytes.Contains(bundle, []byte(want)) {
				t.Errorf("%s: %q is not in the .ipa's Hermes bundle", c.profile, want)
			}
		}
		if c.profile != "preview" && bytes.Contains(bundle, []byte(apiURL)) {
			t.Errorf("%s: the preview profile's EXPO_PUBLIC_API_URL is in the bundle", c.profile)
		}
	}
	t.Logf("in all %s", time.Since(started).Round(time.Second))
}
