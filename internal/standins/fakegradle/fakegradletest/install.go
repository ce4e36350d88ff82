// Package fakegradletest installs the stand-in Gradle
// (internal/standins/fakegradle) for the tests that run a project's real
// Gradle wrapper.
package fakegradletest

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

// Install builds fakegradle and installs its distribution for the
// wrappers of the tests' projects into a fresh Gradle user home, which it
// returns: run the wrapper with GRADLE_USER_HOME set to it.
func Install(t testing.TB) string {
	t.Helper()
	testtool.Need(t, "javac", "jar", "apksigner", "zipalign", "jarsigner")
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("fakegradletest: cannot tell where its source is")
	}
	bin := filepath.Join(t.TempDir(), "fakegradle")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(filepath.Dir(file), "..")).CombinedOutput(); err != nil {
		t.Fatalf("build fakegradle: %v\n%s", err, out)
	}
	home := filepath.Join(t.TempDir(), "gradle-user-home")
	if out, err := exec.Command(bin, "install", "--gradle-user-home", home).CombinedOutput(); err != nil {
		t.Fatalf("fakegradle install: %v\n%s", err, out)
	}
	return home
}
