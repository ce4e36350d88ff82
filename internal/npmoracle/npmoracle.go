// Package npmoracle installs the pinned npm packages a differential test
// compares this module's Go with (@expo/eas-json, @expo/package-manager,
// @expo/config-plugins, @expo/plist): the MIT packages are oracles in
// tests, never runtime dependencies.
package npmoracle

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Install copies the regular files of dir (a package.json, its committed
// package-lock.json and the oracle's scripts) into a temporary directory,
// runs `npm ci` there and returns it. With skipVar=1 in the environment
// the test is skipped; without node or npm it fails, naming what to
// install, since CI has both.
func Install(t testing.TB, dir, skipVar, oracle string) string {
	t.Helper()
	if os.Getenv(skipVar) == "1" {
		t.Skipf("%s=1: not comparing with %s", skipVar, oracle)
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to run the %s oracle (apt-get install nodejs npm), or set %s=1: %v", tool, oracle, skipVar, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = out
	if log, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci of the %s oracle (it needs the npm registry): %v\n%s", oracle, err, log)
	}
	return out
}
