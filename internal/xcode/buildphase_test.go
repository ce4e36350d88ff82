package xcode

import (
	"slices"
	"strings"
	"testing"
)

// TestShellScriptPhasesOfExpoPrebuild reads the run script phases of
// `expo prebuild`'s project in their build order.
func TestShellScriptPhasesOfExpoPrebuild(t *testing.T) {
	p := loadFixture(t, "expo-prebuild.pbxproj")
	phases, err := p.ShellScriptPhases("MyCoolApp")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ph := range phases {
		names = append(names, ph.Name)
	}
	if len(phases) == 0 || !strings.Contains(strings.Join(names, "|"), "Bundle React Native code and images") {
		t.Fatalf("phases %q", names)
	}
	for _, ph := range phases {
		if ph.Name == "Bundle React Native code and images" && (ph.ShellPath != "/bin/sh" || !strings.Contains(ph.Script, "react-native-xcode.sh")) {
			t.Errorf("the bundle phase: %+v", ph)
		}
	}
}

// TestResourcePathsOfExpoPrebuild: the app target's Copy Bundle
// Resources files, placed through their groups.
func TestResourcePathsOfExpoPrebuild(t *testing.T) {
	p := loadFixture(t, "expo-prebuild.pbxproj")
	got, err := p.ResourcePaths("MyCoolApp")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"MyCoolApp/Supporting/Expo.plist", "MyCoolApp/Images.xcassets", "MyCoolApp/SplashScreen.storyboard"}
	if !slices.Equal(got, want) {
		t.Fatalf("resources %q, want %q", got, want)
	}
	if _, err := p.ResourcePaths("NoSuchTarget"); err == nil {
		t.Fatal("an unknown target has resources")
	}
}

// TestBaseConfigurationAsCocoaPodsIntegrates: a configuration's xcconfig
// is found through its groups (this fixture's references are in none:
// relative to the project's directory); setting one as CocoaPods does is
// read back, is idempotent, and leaves a configuration based on another
// file alone.
func TestBaseConfigurationAsCocoaPodsIntegrates(t *testing.T) {
	p := loadFixture(t, "expo-prebuild.pbxproj")
	got, err := p.BaseConfigurationPath("MyCoolApp", "Release")
	if err != nil || got != "Target Support Files/Pods-MyCoolApp/Pods-MyCoolApp.release.xcconfig" {
		t.Fatalf("the prebuild project's Release base: %q %v", got, err)
	}
	if ok, err := p.SetBaseConfiguration("MyCoolApp", "Release", "Pods/Other.xcconfig"); ok || err != nil {
		t.Fatalf("replaced another base configuration: %v %v", ok, err)
	}

	p = loadFixture(t, "app-with-extensions.pbxproj")
	const path = "Pods/Target Support Files/Pods-Shop/Pods-Shop.release.xcconfig"
	for range 2 {
		if ok, err := p.SetBaseConfiguration("Shop", "Release", path); !ok || err != nil {
			t.Fatalf("SetBaseConfiguration: %v %v", ok, err)
		}
	}
	if err := p.splice(0, 0, ""); err != nil { // the edited text parses
		t.Fatal(err)
	}
	if got, err := p.BaseConfigurationPath("Shop", "Release"); got != path || err != nil {
		t.Fatalf("read back %q %v", got, err)
	}
	if got, _ := p.BaseConfigurationPath("Shop", "Debug"); got != "" {
		t.Fatalf("Debug based on %q", got)
	}
	if n := strings.Count(string(p.Bytes()), "Pods-Shop.release.xcconfig"); n != 2 { // the reference's name and path
		t.Fatalf("%d mentions of the xcconfig after two edits:\n%s", n, p.Bytes())
	}
}
