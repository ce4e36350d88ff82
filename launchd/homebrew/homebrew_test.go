package homebrew

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// launchdPATH is the PATH launchd gives an app opened from Finder or a
// LaunchAgent without EnvironmentVariables.
const launchdPATH = "/usr/bin:/bin:/usr/sbin:/sbin"

func TestPrefixes(t *testing.T) {
	t.Setenv(PrefixEnv, "")
	if got := Prefixes(); !slices.Equal(got, []string{"/opt/homebrew", "/usr/local"}) {
		t.Fatalf("defaults: %q", got)
	}
	t.Setenv(PrefixEnv, "/opt/homebrew/")
	if got := Prefixes(); !slices.Equal(got, []string{"/opt/homebrew", "/usr/local"}) {
		t.Fatalf("the default prefix from the environment is not repeated: %q", got)
	}
	t.Setenv(PrefixEnv, "/Users/me/brew")
	if got := Prefixes(); !slices.Equal(got, []string{"/Users/me/brew", "/opt/homebrew", "/usr/local"}) {
		t.Fatalf("a custom prefix comes first: %q", got)
	}
}

// TestLookPathWithLaunchdsPATH: with launchd's PATH, a program in
// Homebrew's bin is still found; PATH wins when it has one.
func TestLookPathWithLaunchdsPATH(t *testing.T) {
	prefix := t.TempDir()
	bin := filepath.Join(prefix, "bin")
	os.MkdirAll(bin, 0o755)
	t.Setenv("PATH", launchdPATH)
	t.Setenv(PrefixEnv, prefix)

	if _, err := LookPath("freeagent-test-tart"); !errors.Is(err, exec.ErrNotFound) {
		t.Fatalf("nothing installed: %v", err)
	}
	// Not executable: not a program.
	os.WriteFile(filepath.Join(bin, "freeagent-test-tart"), []byte("#!/bin/sh\n"), 0o644)
	if _, err := LookPath("freeagent-test-tart"); !errors.Is(err, exec.ErrNotFound) {
		t.Fatalf("a non-executable file: %v", err)
	}
	// Homebrew links bin/tart into its Cellar.
	cellar := filepath.Join(prefix, "Cellar", "tart", "2.32.0", "bin", "freeagent-test-tart")
	os.MkdirAll(filepath.Dir(cellar), 0o755)
	os.WriteFile(cellar, []byte("#!/bin/sh\n"), 0o755)
	os.Remove(filepath.Join(bin, "freeagent-test-tart"))
	if err := os.Symlink("../Cellar/tart/2.32.0/bin/freeagent-test-tart", filepath.Join(bin, "freeagent-test-tart")); err != nil {
		t.Fatal(err)
	}
	if got, err := LookPath("freeagent-test-tart"); err != nil || got != filepath.Join(bin, "freeagent-test-tart") {
		t.Fatalf("in the Homebrew prefix: %q %v", got, err)
	}

	// On PATH: PATH's copy wins, as in a shell.
	onPath := t.TempDir()
	os.WriteFile(filepath.Join(onPath, "freeagent-test-tart"), []byte("#!/bin/sh\n"), 0o755)
	t.Setenv("PATH", onPath+string(os.PathListSeparator)+launchdPATH)
	if got, err := LookPath("freeagent-test-tart"); err != nil || got != filepath.Join(onPath, "freeagent-test-tart") {
		t.Fatalf("on PATH: %q %v", got, err)
	}

	// A path is checked, not searched for.
	if _, err := LookPath(filepath.Join(t.TempDir(), "freeagent-test-tart")); err == nil {
		t.Fatal("a missing explicit path was found")
	}
}
