package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/internal/testsupport/expoapp"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
	"github.com/freeagent-build/freeagent/internal/xcode"
)

// TestInstallIntegratesExpoPrebuildsProject runs the stand-in on the
// ios/ that the real `expo prebuild` writes for Expo's template: the
// workspace holds the app's and the Pods project, the app's
// configurations are based on Pods-ExpoDefault's xcconfigs, whose
// HERMES_CLI_PATH is the installed hermesc for this OS, the lock files
// agree (the project's "[CP] Check Pods Manifest.lock" phase compares
// them), and a second install changes nothing.
func TestInstallIntegratesExpoPrebuildsProject(t *testing.T) {
	testtool.Need(t, "node", "npm")
	dir := expoapp.Project(t)
	expoapp.Prebuild(t, dir, "ios")
	ios := filepath.Join(dir, "ios")
	var out bytes.Buffer
	if err := install(ios, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	ws, err := xcode.FindWorkspace(ios)
	if err != nil || filepath.Base(ws) != "ExpoDefault.xcworkspace" {
		t.Fatalf("workspace %q %v", ws, err)
	}
	data, _ := os.ReadFile(filepath.Join(ws, "contents.xcworkspacedata"))
	if !strings.Contains(string(data), `"group:ExpoDefault.xcodeproj"`) || !strings.Contains(string(data), `"group:Pods/Pods.xcodeproj"`) {
		t.Errorf("contents.xcworkspacedata:\n%s", data)
	}
	pods, err := xcode.LoadProject(filepath.Join(ios, "Pods", "Pods.xcodeproj"))
	if err != nil || len(pods.Targets()) != 1 || pods.Targets()[0].Name != "Pods-ExpoDefault" {
		t.Fatalf("the Pods project: %v", err)
	}
	proj, err := xcode.LoadProject(filepath.Join(ios, "ExpoDefault.xcodeproj"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"Debug", "Release"} {
		base, err := proj.BaseConfigurationPath("ExpoDefault", c)
		want := "Pods/Target Support Files/Pods-ExpoDefault/Pods-ExpoDefault." + strings.ToLower(c) + ".xcconfig"
		if err != nil || base != want {
			t.Errorf("%s is based on %q (%v), want %q", c, base, err, want)
		}
	}
	xc, _ := os.ReadFile(filepath.Join(ios, "Pods", "Target Support Files", "Pods-ExpoDefault", "Pods-ExpoDefault.release.xcconfig"))
	var hermesc string
	for _, line := range strings.Split(string(xc), "\n") {
		if v, ok := strings.CutPrefix(line, "HERMES_CLI_PATH = $(PODS_ROOT)/"); ok {
			hermesc = filepath.Join(ios, "Pods", v)
		}
	}
	if st, err := os.Stat(hermesc); hermesc == "" || err != nil || st.Mode()&0o111 == 0 {
		t.Errorf("HERMES_CLI_PATH is no executable hermesc (%v):\n%s", err, xc)
	}
	podfileLock, _ := os.ReadFile(filepath.Join(ios, "Podfile.lock"))
	manifest, _ := os.ReadFile(filepath.Join(ios, "Pods", "Manifest.lock"))
	if len(podfileLock) == 0 || !bytes.Equal(podfileLock, manifest) {
		t.Errorf("Podfile.lock %q and Manifest.lock %q differ", podfileLock, manifest)
	}
	before := proj.Bytes()
	if err := install(ios, &out); err != nil {
		t.Fatal(err)
	}
	again, _ := xcode.LoadProject(filepath.Join(ios, "ExpoDefault.xcodeproj"))
	if !bytes.Equal(before, again.Bytes()) {
		t.Error("a second pod install changed the project again")
	}
}

// TestInstallFailsAsCocoaPods: without node_modules the Podfile's
// require of Expo's autolinking fails (as Ruby's does), and a Podfile
// with no target is refused; neither leaves a workspace.
func TestInstallFailsAsCocoaPods(t *testing.T) {
	testtool.Need(t, "node", "npm")
	dir := expoapp.Project(t)
	expoapp.Prebuild(t, dir, "ios")
	// Removes this copy's links only: the machine's install keeps its files.
	if err := os.RemoveAll(filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	noTargets := t.TempDir()
	if err := os.WriteFile(filepath.Join(noTargets, "Podfile"), []byte("platform :ios, '15.1'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for ios, want := range map[string]string{
		filepath.Join(dir, "ios"): "Invalid `Podfile` file: cannot load such file -- " + filepath.Join(dir, "ios", "scripts", "autolinking") + ".",
		noTargets:                 "The Podfile does not contain any targets",
		t.TempDir():               "No `Podfile' found in the project directory.",
	} {
		var out bytes.Buffer
		err := install(ios, &out)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", ios, err, want)
		}
		if ws, _ := filepath.Glob(filepath.Join(ios, "*.xcworkspace")); len(ws) != 0 {
			t.Errorf("%s: a failed install left %v", ios, ws)
		}
	}
}
