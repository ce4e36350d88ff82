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

	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

// Install copies the regular files of dir (a package.json, its committed
// package-lock.json and the oracle's scripts) into a temporary directory,
// runs `npm ci` there and returns it. Without node or npm the test fails,
// naming what to install.
func Install(t testing.TB, dir, oracle string) string {
	t.Helper()
	testtool.Need(t, "node", "npm")
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
