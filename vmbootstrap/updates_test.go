package vmbootstrap

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/internal/plist"
)

func TestSetAndroidChannel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	manifest := filepath.Join(dir, "AndroidManifest.xml")
	// As expo prebuild writes it, without a channel.
	os.WriteFile(manifest, []byte(`<manifest xmlns:android="http://schemas.android.com/apk/res/android">
  <application android:name=".MainApplication" android:label="@string/app_name">
    <meta-data android:name="expo.modules.updates.EXPO_UPDATE_URL" android:value="https://u.expo.dev/x"/>
  </application>
</manifest>
`), 0o644)
	if err := setAndroidChannel(manifest, "production"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(manifest)
	want := `<meta-data android:name="expo.modules.updates.UPDATES_CONFIGURATION_REQUEST_HEADERS_KEY" android:value="{&#34;expo-channel-name&#34;:&#34;production&#34;}"/>`
	if !strings.Contains(string(b), want) || !strings.Contains(string(b), "EXPO_UPDATE_URL") {
		t.Fatalf("manifest:\n%s", b)
	}
	// A second channel replaces the first and keeps other headers.
	os.WriteFile(manifest, []byte(strings.Replace(string(b), "{&#34;expo-channel-name&#34;:&#34;production&#34;}",
		"{&quot;expo-channel-name&quot;:&quot;old&quot;,&quot;x-team&quot;:&quot;a&quot;}", 1)), 0o644)
	if err := setAndroidChannel(manifest, "preview"); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(manifest)
	if !strings.Contains(string(b), `{&#34;expo-channel-name&#34;:&#34;preview&#34;,&#34;x-team&#34;:&#34;a&#34;}`) || strings.Count(string(b), "REQUEST_HEADERS_KEY") != 1 {
		t.Fatalf("manifest:\n%s", b)
	}
	os.WriteFile(manifest, []byte(`<manifest/>`), 0o644)
	if err := setAndroidChannel(manifest, "x"); err == nil {
		t.Fatal("no <application>: no error")
	}
}

func TestExpoUpdatesInstalled(t *testing.T) {
	t.Parallel()
	tree := t.TempDir()
	app := filepath.Join(tree, "apps", "mobile")
	os.MkdirAll(app, 0o755)
	if expoUpdatesInstalled(tree, app) {
		t.Fatal("nothing installed")
	}
	os.MkdirAll(filepath.Join(tree, "node_modules", "expo-updates"), 0o755)
	os.WriteFile(filepath.Join(tree, "node_modules", "expo-updates", "package.json"), []byte("{}"), 0o644)
	if !expoUpdatesInstalled(tree, app) {
		t.Fatal("hoisted expo-updates not found")
	}
}

func TestSetIOSChannel(t *testing.T) {
	t.Parallel()
	expoPlist := filepath.Join(t.TempDir(), "Expo.plist")
	os.WriteFile(expoPlist, []byte(`<?xml version="1.0" encoding="UTF-8"?>
<plist version="1.0">
<dict>
	<key>EXUpdatesURL</key>
	<string>https://u.expo.dev/x</string>
</dict>
</plist>
`), 0o644)
	if err := setIOSChannel(expoPlist, "production"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(expoPlist)
	v, err := plist.Parse(b)
	d, _ := v.(map[string]any)
	h, _ := d["EXUpdatesRequestHeaders"].(map[string]any)
	if err != nil || h["expo-channel-name"] != "production" || d["EXUpdatesURL"] != "https://u.expo.dev/x" {
		t.Fatalf("%v %v:\n%s", d, err, b)
	}
	// Again: replaced, other headers kept, one entry.
	os.WriteFile(expoPlist, []byte(strings.Replace(string(b), "<key>expo-channel-name</key>", "<key>x-team</key><string>a</string><key>expo-channel-name</key>", 1)), 0o644)
	if err := setIOSChannel(expoPlist, "preview"); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(expoPlist)
	v, _ = plist.Parse(b)
	h, _ = v.(map[string]any)["EXUpdatesRequestHeaders"].(map[string]any)
	if h["expo-channel-name"] != "preview" || h["x-team"] != "a" || strings.Count(string(b), "EXUpdatesRequestHeaders") != 1 {
		t.Fatalf("%v:\n%s", h, b)
	}
	// Headers that are not a dictionary are an error, never dropped.
	os.WriteFile(expoPlist, []byte(`<plist version="1.0"><dict><key>EXUpdatesRequestHeaders</key><string>x</string></dict></plist>`), 0o644)
	if err := setIOSChannel(expoPlist, "preview"); err == nil || !strings.Contains(err.Error(), "EXUpdatesRequestHeaders is not a dictionary") {
		t.Fatalf("error %v", err)
	}
}
