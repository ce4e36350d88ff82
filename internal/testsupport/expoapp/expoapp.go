// Package expoapp gives tests the real Expo app of testdata/expo-default
// (Expo's default template, SDK 55) with its node_modules installed from
// the npm registry.
//
// The install (686 packages, about a minute) happens once per machine and
// lockfile: under os.UserCacheDir()/freeagent-expo, keyed by the SHA-256
// of package.json and package-lock.json, behind a file lock so that
// parallel test binaries wait for one install instead of racing. npm's own
// cache sits next to it, so a build's `npm ci` of the same lockfile needs
// no download either (NPMCache).
package expoapp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

// Dir is the fixture's directory, testdata/expo-default at the module's
// root.
func Dir(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("expoapp: cannot tell where its source is")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata", "expo-default")
}

// Copy copies the fixture (without node_modules) into a fresh directory
// named expo-default under t.TempDir() and returns it.
func Copy(t testing.TB) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "expo-default")
	if err := os.CopyFS(dst, os.DirFS(Dir(t))); err != nil {
		t.Fatalf("copy the Expo fixture: %v", err)
	}
	return dst
}

// cacheRoot is the machine's cache of installs, made on first use.
func cacheRoot(t testing.TB) string {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("expoapp: no cache directory for node_modules: %v", err)
	}
	root := filepath.Join(base, "freeagent-expo")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatalf("expoapp: %v", err)
	}
	return root
}

// NPMCache is the npm cache the fixture was installed through: a build
// that runs `npm ci` with npm_config_cache set to it reads every package
// from disk.
func NPMCache(t testing.TB) string {
	t.Helper()
	return filepath.Join(cacheRoot(t), "npm")
}

// NodeModules installs the fixture's node_modules unless this machine
// has them for this lockfile already, and returns their directory. Treat
// it as read-only: every test of every binary shares it.
func NodeModules(t testing.TB) string {
	t.Helper()
	testtool.Need(t, "npm")
	h := sha256.New()
	for _, name := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(Dir(t), name))
		if err != nil {
			t.Fatalf("expoapp: %v", err)
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	key := hex.EncodeToString(h.Sum(nil))[:16]
	root := cacheRoot(t)
	done := filepath.Join(root, "modules", key)
	modules := filepath.Join(done, "node_modules")
	if _, err := os.Stat(modules); err == nil {
		return modules
	}

	lock, err := os.OpenFile(filepath.Join(root, "install.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("expoapp: %v", err)
	}
	defer lock.Close()
	// Blocks while another test binary installs; closing releases it.
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("expoapp: lock %s: %v", lock.Name(), err)
	}
	if _, err := os.Stat(modules); err == nil {
		return modules // the binary we waited for installed them
	}

	stage, err := os.MkdirTemp(root, "install-")
	if err != nil {
		t.Fatalf("expoapp: %v", err)
	}
	defer os.RemoveAll(stage)
	for _, name := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(Dir(t), name))
		if err == nil {
			err = os.WriteFile(filepath.Join(stage, name), b, 0o644)
		}
		if err != nil {
			t.Fatalf("expoapp: %v", err)
		}
	}
	t.Logf("expoapp: installing the Expo fixture's node_modules into %s (once per machine and lockfile)", done)
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--prefer-offline", "--cache", NPMCache(t))
	cmd.Dir = stage
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("expoapp: npm ci of the Expo fixture: %v\n%s", err, out)
	}
	if err := os.MkdirAll(done, 0o755); err != nil {
		t.Fatalf("expoapp: %v", err)
	}
	// The rename publishes the tree whole: the first Stat above never
	// sees a half-installed one.
	if err := os.Rename(filepath.Join(stage, "node_modules"), modules); err != nil {
		t.Fatalf("expoapp: %v", err)
	}
	return modules
}

// Project copies the fixture with its node_modules, hard-linked from the
// machine's install (a copy where links are refused): Metro and the
// Expo CLI resolve every package inside the project, as after an install.
// Hard links share the cache's files, so a test must not edit files in
// node_modules.
func Project(t testing.TB) string {
	t.Helper()
	modules := NodeModules(t)
	dir := Copy(t)
	dst := filepath.Join(dir, "node_modules")
	if out, err := exec.Command("cp", "-al", modules, dst).CombinedOutput(); err != nil {
		os.RemoveAll(dst)
		if out, err := exec.Command("cp", "-a", modules, dst).CombinedOutput(); err != nil {
			t.Fatalf("expoapp: copy node_modules: %v\n%s", err, out)
		}
		t.Logf("expoapp: node_modules copied, not linked: %s", out)
	}
	return dir
}

// Prebuild runs the real `expo prebuild --platform PLATFORM --no-install`
// in a Project, as the farm's pipeline does, writing its native project.
func Prebuild(t testing.TB, dir, platform string) {
	t.Helper()
	cmd := exec.Command("npx", "expo", "prebuild", "--platform", platform, "--no-install")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "CI=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("expo prebuild: %v\n%s", err, out)
	}
}

// VariantConfig is the app.config.ts of Expo's "app variants" guide: the
// profile's env (APP_VARIANT) names and identifies the app, over app.json.
const VariantConfig = `import type { ConfigContext, ExpoConfig } from 'expo/config';

const variant = process.env.APP_VARIANT;
const suffix = variant === 'development' ? '.dev' : variant === 'preview' ? '.preview' : '';

export default ({ config }: ConfigContext): ExpoConfig => ({
  ...config,
  name: variant ? ` + "`${config.name} (${variant})`" + ` : config.name!,
  slug: config.slug!,
  android: { ...config.android, package: 'dev.freeagent.expodefault' + suffix },
  ios: { ...config.ios, bundleIdentifier: 'dev.freeagent.expodefault' + suffix },
});
`
