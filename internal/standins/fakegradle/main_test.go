package main

import (
	"archive/zip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/internal/standins/fakegradle/fakegradletest"
	"github.com/freeagent-build/freeagent/internal/testsupport/expoapp"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

// TestDistributionDir: the directory is the one the real wrapper of the
// fixture looks in (checked against gradle-wrapper.jar: it creates this
// directory when it tries to download).
func TestDistributionDir(t *testing.T) {
	dir, zipName, version, err := distributionDir("/h", "https://user:pw@services.gradle.org/distributions/gradle-9.0.0-bin.zip")
	if err != nil || dir != "/h/wrapper/dists/gradle-9.0.0-bin/d6wjpkvcgsg3oed0qlfss3wgl" || zipName != "gradle-9.0.0-bin.zip" || version != "9.0.0" {
		t.Fatalf("distributionDir = %s %s %s %v", dir, zipName, version, err)
	}
	if _, _, _, err := distributionDir("/h", "https://example.com/tools.zip"); err == nil {
		t.Fatal("a URL that names no Gradle distribution was accepted")
	}
}

// TestWrapperRunsStandIn runs the fixture's real Gradle wrapper, as
// `expo prebuild` wrote it, against the installed stand-in: Gradle's
// failures (unknown task, missing keystore, wrong password) with its exit
// status, and debug outputs that aapt, apksigner and jarsigner read. The
// release build with its Hermes bundle is the end-to-end test's
// (agent/expo_e2e_test.go).
func TestWrapperRunsStandIn(t *testing.T) {
	testtool.Need(t, "node", "aapt", "keytool")
	gradleHome := fakegradletest.Install(t)
	dir := expoapp.Project(t)
	expoapp.Prebuild(t, dir, "android")
	android := filepath.Join(dir, "android")
	gradlew := func(args ...string) (string, int) {
		cmd := exec.Command("./gradlew", args...)
		cmd.Dir, cmd.Env = android, append(os.Environ(), "GRADLE_USER_HOME="+gradleHome)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}

	out, code := gradlew("assembleStaging")
	if code != 1 || !strings.Contains(out, "Task 'assembleStaging' not found in root project 'ExpoDefault'.") || !strings.Contains(out, "BUILD FAILED") {
		t.Fatalf("unknown task: exit %d\n%s", code, out)
	}
	if strings.Contains(out, "Downloading") {
		t.Fatalf("the wrapper did not find the stand-in distribution:\n%s", out)
	}

	ks := filepath.Join(t.TempDir(), "upload.jks")
	if out, err := exec.Command("keytool", "-genkeypair", "-keystore", ks, "-storetype", "JKS", "-storepass", "store-pw", "-keypass", "key-pw",
		"-alias", "upload", "-keyalg", "RSA", "-keysize", "2048", "-validity", "1000", "-dname", "CN=Upload").CombinedOutput(); err != nil {
		t.Fatalf("keytool: %v\n%s", err, out)
	}
	// As -P arguments: the wrapper is a /bin/sh script, and dash (Debian's
	// sh) drops ORG_GRADLE_PROJECT_android.injected.* variables from the
	// environment (their names are not shell names).
	injected := func(file, storePw string) []string {
		return []string{"-Pandroid.injected.signing.store.file=" + file, "-Pandroid.injected.signing.store.password=" + storePw,
			"-Pandroid.injected.signing.key.alias=upload", "-Pandroid.injected.signing.key.password=key-pw"}
	}
	missing := filepath.Join(t.TempDir(), "gone.jks")
	out, code = gradlew(append(injected(missing, "store-pw"), "assembleRelease")...)
	if code != 1 || !strings.Contains(out, "Keystore file '"+missing+"' not found for signing config 'externalOverride'.") {
		t.Fatalf("missing keystore: exit %d\n%s", code, out)
	}
	out, code = gradlew(append(injected(ks, "wrong-pw"), "assembleDebug")...)
	if code != 1 || !strings.Contains(out, "KeytoolException: Failed to read key upload from store \""+ks+"\"") {
		t.Fatalf("wrong store password: exit %d\n%s", code, out)
	}

	// Signed with the injected key, as EAS signs.
	out, code = gradlew(append(injected(ks, "store-pw"), "assembleDebug")...)
	if code != 0 || !strings.Contains(out, "native compilation is a stand-in") {
		t.Fatalf("assembleDebug: exit %d\n%s", code, out)
	}
	apk := filepath.Join(android, "app/build/outputs/apk/debug/app-debug.apk")
	badging, err := exec.Command("aapt", "dump", "badging", apk).CombinedOutput()
	if err != nil || !strings.Contains(string(badging), "package: name='dev.freeagent.expodefault' versionCode='1' versionName='1.0.0'") ||
		!strings.Contains(string(badging), "launchable-activity: name='dev.freeagent.expodefault.MainActivity'") {
		t.Fatalf("aapt dump badging: %v\n%s", err, badging)
	}
	if certs, err := exec.Command("apksigner", "verify", "--print-certs", apk).CombinedOutput(); err != nil || !strings.Contains(string(certs), "CN=Upload") {
		t.Fatalf("apksigner verify: %v\n%s", err, certs)
	}

	// The debug bundle: jarsigned with the template's debug key.
	if out, code = gradlew(":app:bundleDebug"); code != 0 {
		t.Fatalf("bundleDebug: exit %d\n%s", code, out)
	}
	aab := filepath.Join(android, "app/build/outputs/bundle/debug/app-debug.aab")
	if out, err := exec.Command("jarsigner", "-verify", "-verbose", "-certs", aab).CombinedOutput(); err != nil || !strings.Contains(string(out), "CN=Android Debug") {
		t.Fatalf("jarsigner -verify: %v\n%s", err, out)
	}
	z, err := zip.OpenReader(aab)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	names := map[string]bool{}
	for _, f := range z.File {
		names[f.Name] = true
	}
	if !names["base/manifest/AndroidManifest.xml"] || !names["base/assets/freeagent-stand-in.txt"] {
		t.Fatalf("the bundle's entries: %v", names)
	}
}
