package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/testsupport/expoapp"
)

// TestAppConfigTSVariants: Expo's default template with an app.config.ts
// that reads the profile's environment is evaluated by the project's real
// Expo CLI (@expo/config) with each profile's env, as EAS evaluates it:
// each profile builds its own variant, and the spec carries that identity.
func TestAppConfigTSVariants(t *testing.T) {
	t.Parallel()
	dir := expoapp.Project(t)
	if err := os.WriteFile(filepath.Join(dir, "app.config.ts"), []byte(expoapp.VariantConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	eas := `{"cli":{"appVersionSource":"remote"},"build":{
  "development":{"developmentClient":true,"distribution":"internal","env":{"APP_VARIANT":"development"}},
  "preview":{"distribution":"internal","env":{"APP_VARIANT":"preview"}},
  "production":{"autoIncrement":true}}}`
	if err := os.WriteFile(filepath.Join(dir, "eas.json"), []byte(eas), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.worker(api.PlatformAndroid)
	for _, tc := range []struct{ profile, name, id string }{
		{"development", "ExpoDefault (development)", "dev.freeagent.expodefault.dev"},
		{"preview", "ExpoDefault (preview)", "dev.freeagent.expodefault.preview"},
		{"production", "ExpoDefault", "dev.freeagent.expodefault"},
	} {
		r := e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "android", "--profile", tc.profile, "--json")
		b := e.build(t, queuedID(t, r))
		app := b.Spec.App
		if app.Name != tc.name || app.AndroidPackage != tc.id || app.IOSBundleID != tc.id || app.Slug != "expo-default" || app.ConfigSource != "expo config" {
			t.Errorf("profile %s: the app is %+v; want %q, %s", tc.profile, app, tc.name, tc.id)
		}
		// The remote build version is kept per application id: each
		// variant counts on its own.
		if v := b.Spec.Versions; v == nil || v.ApplicationID != tc.id {
			t.Errorf("profile %s: versions %+v, want them kept under %s", tc.profile, v, tc.id)
		}
	}
}
