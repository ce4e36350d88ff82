package appconfig

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestAppJSON(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  api.App
	}{
		{"expo object", map[string]string{"app.json": `{"expo": {"name": "Shop", "slug": "shop", "version": "2.1.0", "owner": "acme", "sdkVersion": "53.0.0",
			"android": {"package": "com.acme.shop", "versionCode": 42}, "ios": {"bundleIdentifier": "com.acme.shop", "buildNumber": "17"}}}`},
			api.App{Name: "Shop", Slug: "shop", Version: "2.1.0", Owner: "acme", SDKVersion: "53.0.0", AndroidPackage: "com.acme.shop",
				AndroidVersionCode: 42, IOSBundleID: "com.acme.shop", IOSBuildNumber: "17", ConfigSource: "app.json"}},
		{"root-level config", map[string]string{"app.json": `{"name": "Root", "slug": "root", "version": "1.0.0", "android": {"package": "com.r"}}`},
			api.App{Name: "Root", Slug: "root", Version: "1.0.0", AndroidPackage: "com.r", ConfigSource: "app.json"}},
		{"package.json defaults", map[string]string{"app.json": `{"expo": {"slug": "pkg"}}`, "package.json": `{"name": "from-pkg", "version": "3.4.5"}`},
			api.App{Name: "from-pkg", Slug: "pkg", Version: "3.4.5", ConfigSource: "app.json"}},
		{"app extensions", map[string]string{"app.json": `{"expo": {"name": "Shop", "slug": "shop", "ios": {"bundleIdentifier": "com.acme.shop"},
			"extra": {"eas": {"build": {"experimental": {"ios": {"appExtensions": [
				{"targetName": "ShopWidget", "bundleIdentifier": "com.acme.shop.widget", "entitlements": {"com.apple.security.application-groups": ["group.shop"]}},
				{"targetName": "NotificationService", "bundleIdentifier": "com.acme.shop.notifications", "parentBundleIdentifier": "com.acme.shop"}]}}}}}}}`},
			api.App{Name: "Shop", Slug: "shop", Version: "1.0.0", IOSBundleID: "com.acme.shop", ConfigSource: "app.json",
				IOSAppExtensions: []api.IOSTarget{{Name: "ShopWidget", BundleID: "com.acme.shop.widget"}, {Name: "NotificationService", BundleID: "com.acme.shop.notifications"}}}},
		{"app.config.json first", map[string]string{"app.config.json": `{"expo": {"name": "A", "slug": "a"}}`, "app.json": `{"expo": {"name": "B", "slug": "b"}}`},
			api.App{Name: "A", Slug: "a", Version: "1.0.0", ConfigSource: "app.json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range c.files {
				write(t, filepath.Join(dir, name), content)
			}
			got, err := Read(t.Context(), dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Read = %+v\nwant   %+v", got, c.want)
			}
		})
	}
}

func TestAppJSONErrors(t *testing.T) {
	for _, c := range []struct {
		name, appJSON string
		want          []string
	}{
		{"syntax", "{\n  \"expo\": {\n    \"name\": \"x\",\n  }\n}", []string{"app.json: invalid JSON at line 4, column 3"}},
		{"comment", "{\n  // no\n}", []string{"app.json: invalid JSON at line 2, column 3", "no comments"}},
		{"truncated", `{"expo": {"name": "x"`, []string{"app.json: invalid JSON", "ends early"}},
		{"trailing data", `{"expo": {}} {}`, []string{"app.json: invalid JSON at line 1", "after the object"}},
		{"array", `[]`, []string{"app.json: must hold a JSON object"}},
		{"missing slug", `{"expo": {"name": "x"}}`, []string{"app.json: expo.slug is missing"}},
		{"empty slug", `{"expo": {"name": "x", "slug": " "}}`, []string{"expo.slug is empty"}},
		{"wrong types", `{"expo": {"name": 1, "slug": "s", "android": {"package": true, "versionCode": "12"}, "ios": []}}`,
			[]string{"expo.name must be a string, not a number", "expo.android.package must be a string, not a boolean",
				"expo.android.versionCode must be a whole number", "expo.ios must be an object, not an array"}},
		{"fractional versionCode", `{"expo": {"name": "x", "slug": "s", "android": {"versionCode": 1.5}}}`, []string{"expo.android.versionCode must be a whole number"}},
		{"expo not object", `{"expo": "x"}`, []string{"app.json: expo must be an object"}},
		{"app extensions not a list", `{"expo": {"name": "x", "slug": "s", "extra": {"eas": {"build": {"experimental": {"ios": {"appExtensions": {}}}}}}}}`,
			[]string{"expo.extra.eas.build.experimental.ios.appExtensions must be an array"}},
		{"app extension incomplete", `{"expo": {"name": "x", "slug": "s", "extra": {"eas": {"build": {"experimental": {"ios": {"appExtensions": [{"targetName": "W", "bundleId": "com.x.w"}]}}}}}}}`,
			[]string{"appExtensions[0].bundleId is not allowed", "appExtensions[0] needs targetName and bundleIdentifier"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "app.json"), c.appJSON)
			_, err := Read(t.Context(), dir, nil)
			if err == nil {
				t.Fatal("Read succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestNoConfig(t *testing.T) {
	if _, err := Read(t.Context(), t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "no app.json or app.config") {
		t.Errorf("Read(empty dir) = %v", err)
	}
}

func TestDynamicConfigWithoutCLI(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "app.config.ts"), `export default { name: "x", slug: "x" };`)
	write(t, filepath.Join(dir, "app.json"), `{"expo": {"name": "static", "slug": "static"}}`)
	_, err := Read(t.Context(), dir, nil)
	want := "app.config.ts is evaluated by the project's Expo CLI: run npm install (or your package manager) first"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Read = %v, want %q", err, want)
	}
}

// installExpoConfig installs the real @expo/config (testdata/expocli's
// lockfile) in root and the stand-in expo CLI at root/node_modules/.bin.
func installExpoConfig(t *testing.T, root string) {
	t.Helper()
	testtool.Need(t, "node", "npm")
	for _, name := range []string{"package.json", "package-lock.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", "expocli", name))
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(root, name), string(data))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	script, err := os.ReadFile(filepath.Join("testdata", "expocli", "expo.js"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "node_modules", ".bin", "expo")
	write(t, bin, string(script))
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestDynamicConfig evaluates app.config.js/ts with the real @expo/config
// behind a stand-in expo CLI hoisted to a monorepo's root.
func TestDynamicConfig(t *testing.T) {
	root := t.TempDir()
	installExpoConfig(t, root)
	env := append(os.Environ(), "APP_VARIANT=staging", "VERSION_CODE=77")

	t.Run("app.config.js sees env and app.json", func(t *testing.T) {
		dir := filepath.Join(root, "apps", "js")
		write(t, filepath.Join(dir, "package.json"), `{"name": "js-app", "version": "4.0.0"}`)
		write(t, filepath.Join(dir, "app.json"), `{"expo": {"owner": "acme", "ios": {"bundleIdentifier": "com.acme.js"}}}`)
		write(t, filepath.Join(dir, "app.config.js"), `module.exports = ({ config }) => ({
			...config,
			name: 'Shop ' + process.env.APP_VARIANT,
			slug: 'shop-' + process.env.APP_VARIANT,
			android: { package: 'com.acme.shop.' + process.env.APP_VARIANT, versionCode: Number(process.env.VERSION_CODE) },
		});`)
		got, err := Read(t.Context(), dir, env)
		if err != nil {
			t.Fatal(err)
		}
		want := api.App{Name: "Shop staging", Slug: "shop-staging", Version: "4.0.0", Owner: "acme", AndroidPackage: "com.acme.shop.staging",
			AndroidVersionCode: 77, IOSBundleID: "com.acme.js", ConfigSource: "expo config"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Read = %+v\nwant   %+v", got, want)
		}
	})

	t.Run("app.config.ts", func(t *testing.T) {
		dir := filepath.Join(root, "apps", "ts")
		write(t, filepath.Join(dir, "package.json"), `{"name": "ts-app"}`)
		write(t, filepath.Join(dir, "app.config.ts"), `import { ExpoConfig } from 'expo/config';
const variant: string = process.env.APP_VARIANT ?? 'none';
const config: ExpoConfig = { name: 'TS ' + variant, slug: 'ts', version: '1.2.3', ios: { bundleIdentifier: 'com.acme.ts', buildNumber: '9' } };
export default config;`)
		got, err := Read(t.Context(), dir, env)
		if err != nil {
			t.Fatal(err)
		}
		want := api.App{Name: "TS staging", Slug: "ts", Version: "1.2.3", IOSBundleID: "com.acme.ts", IOSBuildNumber: "9", ConfigSource: "expo config"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Read = %+v\nwant   %+v", got, want)
		}
	})

	t.Run("env is only what is passed", func(t *testing.T) {
		dir := filepath.Join(root, "apps", "noenv")
		write(t, filepath.Join(dir, "package.json"), `{"name": "noenv"}`)
		write(t, filepath.Join(dir, "app.config.js"), `module.exports = { name: 'v=' + (process.env.APP_VARIANT || 'unset'), slug: 's' };`)
		got, err := Read(t.Context(), dir, []string{"PATH=" + os.Getenv("PATH")})
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != "v=unset" {
			t.Errorf("Name = %q, want v=unset", got.Name)
		}
	})

	t.Run("failing config", func(t *testing.T) {
		dir := filepath.Join(root, "apps", "broken")
		write(t, filepath.Join(dir, "package.json"), `{"name": "broken"}`)
		write(t, filepath.Join(dir, "app.config.js"), `throw new Error('API_URL is not set for this profile');`)
		_, err := Read(t.Context(), dir, env)
		if err == nil || !strings.Contains(err.Error(), "evaluate app.config.js") || !strings.Contains(err.Error(), "API_URL is not set for this profile") {
			t.Errorf("Read = %v, want the config's own error", err)
		}
	})

	t.Run("config without slug", func(t *testing.T) {
		dir := filepath.Join(root, "apps", "noslug")
		write(t, filepath.Join(dir, "package.json"), `{"name": "noslug"}`)
		write(t, filepath.Join(dir, "app.config.js"), `module.exports = { name: 'N', slug: 42 };`)
		_, err := Read(t.Context(), dir, env)
		if err == nil || !strings.Contains(err.Error(), "app.config.js (evaluated by expo config): slug must be a string, not a number") {
			t.Errorf("Read = %v", err)
		}
	})

	t.Run("the app's own CLI first", func(t *testing.T) {
		dir := filepath.Join(root, "apps", "own")
		write(t, filepath.Join(dir, "app.config.js"), `module.exports = {};`)
		bin := filepath.Join(dir, "node_modules", ".bin", "expo")
		write(t, bin, "#!/bin/sh\necho 'warning: printed first'\necho '{\"name\": \"own\", \"slug\": \"own-cli\"}'\n")
		if err := os.Chmod(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		got, err := Read(t.Context(), dir, env)
		if err != nil {
			t.Fatal(err)
		}
		if got.Slug != "own-cli" {
			t.Errorf("Slug = %q: the hoisted CLI ran instead of the app's", got.Slug)
		}
	})
}

func TestDynamicConfigLimits(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "app.config.js"), `module.exports = {};`)
	bin := filepath.Join(dir, "node_modules", ".bin", "expo")
	write(t, bin, "#!/bin/sh\nhead -c 5000000 /dev/zero | tr '\\0' x\n")
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(t.Context(), dir, nil); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("Read(huge output) = %v", err)
	}
	write(t, bin, "#!/bin/sh\necho 'not json'\necho 'boom' >&2\n")
	if _, err := Read(t.Context(), dir, nil); err == nil || !strings.Contains(err.Error(), "printed no config") || !strings.Contains(err.Error(), "boom") {
		t.Errorf("Read(no JSON) = %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Read(ctx, dir, nil); err == nil {
		t.Error("Read with a cancelled context succeeded")
	}
}

// TestInstalledVersions: the app's SDK version and React Native version
// are what eas-cli sends as build metadata: the config's sdkVersion, else
// the installed expo's major as "NN.0.0", and the installed
// react-native's version, each resolved as Node does (a workspace hoists
// them to the root's node_modules).
func TestInstalledVersions(t *testing.T) {
	root := t.TempDir()
	app := filepath.Join(root, "apps", "mobile")
	write(t, filepath.Join(app, "app.json"), `{"expo":{"name":"A","slug":"a"}}`)
	got, err := Read(context.Background(), app, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.SDKVersion != "" || got.ReactNativeVersion != "" {
		t.Fatalf("nothing installed: SDK %q, React Native %q", got.SDKVersion, got.ReactNativeVersion)
	}
	write(t, filepath.Join(root, "node_modules", "expo", "package.json"), `{"name":"expo","version":"55.0.31"}`)
	write(t, filepath.Join(root, "node_modules", "react-native", "package.json"), `{"name":"react-native","version":"0.83.10"}`)
	write(t, filepath.Join(app, "node_modules", "react-native", "package.json"), `{"name":"react-native","version":"0.79.0-rc.1"}`)
	if got, err = Read(context.Background(), app, nil); err != nil {
		t.Fatal(err)
	}
	if got.SDKVersion != "55.0.0" || got.ReactNativeVersion != "0.79.0-rc.1" {
		t.Fatalf("SDK %q, React Native %q; want 55.0.0 (the hoisted expo's major) and 0.79.0-rc.1 (the app's own)", got.SDKVersion, got.ReactNativeVersion)
	}
	write(t, filepath.Join(app, "app.json"), `{"expo":{"name":"A","slug":"a","sdkVersion":"54.0.0"}}`)
	if got, err = Read(context.Background(), app, nil); err != nil || got.SDKVersion != "54.0.0" {
		t.Fatalf("a stated sdkVersion: %q (%v), want 54.0.0", got.SDKVersion, err)
	}
}
