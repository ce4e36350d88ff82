package vmbootstrap

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/agent/cache"
	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/toolchain"
	"github.com/freeagent-build/freeagent/internal/vmshare"
)

// TestCacheRoundTrip: what freeagent-vm saves after a build is what the
// agent accepts, and what the agent shares back restores the same trees
// in the next build's VM: files, directories and links inside their tree;
// links out of it and FIFOs are left out (the agent would refuse the whole
// archive for them). A cache restored under its exact key is not saved
// again; one restored from an older key is.
func TestCacheRoundTrip(t *testing.T) {
	ctx := context.Background()
	key := strings.Repeat("1f", 32)
	spec := api.BuildSpec{Caches: []api.CacheEntry{{Name: "npm", Key: key, Paths: []string{api.CacheDirVar + "/npm", "vendor/cache"}}}}
	write := func(p, body string) { t.Helper(); writeFile(t, p, body) }

	// The first build: a cold install filled the npm cache and the vendor dir.
	vm1 := t.TempDir()
	root1, app1 := filepath.Join(vm1, "cache"), filepath.Join(vm1, "app")
	write(filepath.Join(root1, "npm", "_cacache", "index-v5", "ab", "cd"), "index entry")
	write(filepath.Join(root1, "npm", "_cacache", "content-v2", "sha512", "00", "11"), "package bytes")
	os.Symlink("_cacache/index-v5", filepath.Join(root1, "npm", "index"))
	os.Symlink("/etc/passwd", filepath.Join(root1, "npm", "escape"))
	os.Symlink("../../..", filepath.Join(root1, "npm", "_cacache", "up"))
	if err := syscall.Mkfifo(filepath.Join(root1, "npm", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(app1, "vendor", "cache", "gem.gem"), "vendored")
	var log1 bytes.Buffer
	d1 := newDepCaches(spec, root1, vm1, app1, vm1, &log1, nil)
	if env := d1.env(); len(env) != 1 || env[0] != "npm_config_cache="+filepath.Join(root1, "npm") {
		t.Errorf("env %v", env)
	}
	if n := d1.restore(ctx, filepath.Join(vm1, "no-share"), nil); n != 0 || !strings.Contains(log1.String(), "▸ cache npm: miss") {
		t.Fatalf("restore without a share: %d\n%s", n, log1.String())
	}
	shared := t.TempDir()
	saved := d1.save(ctx, shared)
	if len(saved) != 1 || saved[0] != (vmshare.SavedCache{Name: "npm", Key: key, File: "npm.tar"}) || !strings.Contains(log1.String(), "▸ cache npm: saved (key 1f1f1f1f1f1f…") {
		t.Fatalf("saved %+v\n%s", saved, log1.String())
	}

	// The agent takes it in and shares it with the next build.
	store, err := cache.Open(filepath.Join(t.TempDir(), "caches"), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put("app", "", "npm", key, filepath.Join(shared, vmshare.CacheOutDir, "npm.tar")); err != nil {
		t.Fatalf("the agent refused the VM's archive: %v", err)
	}
	share := filepath.Join(t.TempDir(), "share")
	mounted, err := store.Stage("app", "", spec.Caches, share)
	if err != nil || len(mounted) != 1 {
		t.Fatalf("stage: %+v %v", mounted, err)
	}
	mounts := []vmshare.CacheMount{{Name: "npm", Key: mounted[0].Key, File: mounted[0].File}}

	vm2 := t.TempDir()
	root2, app2 := filepath.Join(vm2, "cache"), filepath.Join(vm2, "app")
	var log2 bytes.Buffer
	d2 := newDepCaches(spec, root2, vm2, app2, vm2, &log2, nil)
	if n := d2.restore(ctx, share, mounts); n != 1 || !strings.Contains(log2.String(), "▸ cache npm: restored (key 1f1f1f1f1f1f…") {
		t.Fatalf("restore: %d\n%s", n, log2.String())
	}
	for p, want := range map[string]string{
		filepath.Join(root2, "npm", "_cacache", "index-v5", "ab", "cd"):             "index entry",
		filepath.Join(root2, "npm", "_cacache", "content-v2", "sha512", "00", "11"): "package bytes",
		filepath.Join(root2, "npm", "index", "ab", "cd"):                            "index entry", // through the link
		filepath.Join(app2, "vendor", "cache", "gem.gem"):                           "vendored",
	} {
		if got, err := os.ReadFile(p); err != nil || string(got) != want {
			t.Errorf("%s: %q %v, want %q", p, got, err, want)
		}
	}
	for _, gone := range []string{"escape", "fifo", "_cacache/up"} {
		if _, err := os.Lstat(filepath.Join(root2, "npm", gone)); err == nil {
			t.Errorf("%s was archived", gone)
		}
	}
	if env := d2.restoredEnv([]string{"PATH=/bin"}); toolchain.EnvValue(env, "npm_config_prefer_offline") != "true" {
		t.Errorf("after a restore the install does not prefer the cache: %v", env)
	}
	if env := d2.restoredEnv([]string{"npm_config_prefer_offline=false"}); toolchain.EnvValue(env, "npm_config_prefer_offline") != "false" {
		t.Errorf("the project's own prefer_offline was replaced: %v", env)
	}
	if env := d1.restoredEnv(nil); len(env) != 0 {
		t.Errorf("a miss changed the environment: %v", env)
	}
	if saved := d2.save(ctx, t.TempDir()); len(saved) != 0 {
		t.Errorf("a cache restored under its own key was saved again: %+v", saved)
	}

	// A new lockfile: the older key's archive is restored, then saved anew.
	spec3 := api.BuildSpec{Caches: []api.CacheEntry{{Name: "npm", Key: strings.Repeat("2e", 32), Paths: spec.Caches[0].Paths}}}
	vm3 := t.TempDir()
	var log3 bytes.Buffer
	d3 := newDepCaches(spec3, filepath.Join(vm3, "cache"), vm3, filepath.Join(vm3, "app"), vm3, &log3, nil)
	if n := d3.restore(ctx, share, mounts); n != 1 || !strings.Contains(log3.String(), "an older key") {
		t.Fatalf("restore from an older key: %d\n%s", n, log3.String())
	}
	if saved := d3.save(ctx, t.TempDir()); len(saved) != 1 || saved[0].Key != spec3.Caches[0].Key {
		t.Errorf("saved %+v, want the new key's archive", saved)
	}

	// --clear-cache: the shared archive is not restored, and the build's
	// own cache is saved afresh under the key it had.
	cleared := spec
	cleared.ClearCache = true
	vm6 := t.TempDir()
	var log6 bytes.Buffer
	d6 := newDepCaches(cleared, filepath.Join(vm6, "cache"), vm6, filepath.Join(vm6, "app"), vm6, &log6, nil)
	if n := d6.restore(ctx, share, mounts); n != 0 || !strings.Contains(log6.String(), "none restored (--clear-cache)") {
		t.Fatalf("restore with --clear-cache: %d\n%s", n, log6.String())
	}
	if _, err := os.Stat(filepath.Join(vm6, "cache", "npm", "_cacache")); err == nil {
		t.Error("--clear-cache restored the cache")
	}
	write(filepath.Join(vm6, "cache", "npm", "fresh"), "fresh install")
	if saved := d6.save(ctx, t.TempDir()); len(saved) != 1 || saved[0].Key != key {
		t.Errorf("--clear-cache: saved %+v, want the cache saved afresh", saved)
	}

	// A cache path under the native directory of a managed app (prebuild
	// makes it) is not restored: prebuild would find part of a project.
	podsSpec := api.BuildSpec{Platform: api.PlatformIOS, Workflow: api.WorkflowManaged,
		Caches: []api.CacheEntry{{Name: "npm", Key: key, Paths: []string{api.CacheDirVar + "/npm", "ios/Pods"}}}}
	vm5 := t.TempDir()
	var log5 bytes.Buffer
	d5 := newDepCaches(podsSpec, filepath.Join(vm5, "cache"), vm5, filepath.Join(vm5, "app"), vm5, &log5, nil)
	if n := d5.restore(ctx, share, mounts); n != 1 || !strings.Contains(log5.String(), "ios/ is made by expo prebuild") {
		t.Fatalf("restore into a managed app: %d\n%s", n, log5.String())
	}
	if _, err := os.Lstat(filepath.Join(vm5, "app", "ios")); err == nil {
		t.Error("restoring created ios/ in a managed app")
	}

	// A corrupt archive is a warning, and the build goes on cold.
	bad := t.TempDir()
	write(filepath.Join(bad, "npm.tar"), strings.Repeat("garbage", 100))
	vm4 := t.TempDir()
	var log4 bytes.Buffer
	d4 := newDepCaches(spec, filepath.Join(vm4, "cache"), vm4, filepath.Join(vm4, "app"), vm4, &log4, nil)
	if n := d4.restore(ctx, bad, mounts); n != 0 || !strings.Contains(log4.String(), "▸ warning: cache npm: the archive is unusable, building without it") {
		t.Fatalf("corrupt archive: %d\n%s", n, log4.String())
	}
	if _, err := os.Stat(filepath.Join(vm4, "cache", "npm")); err == nil {
		t.Error("a corrupt archive left a partial cache behind")
	}
}

// TestNodeModulesCache runs the real managers with both caches a
// single-package project gets, the manager's store and node_modules. A
// cold build installs and saves both, node_modules with its stamp; the
// agent accepts them (npm's and Yarn's .bin links, pnpm's .pnpm layout
// stay inside the tree); the next build with the same keys and tools
// restores the tree, skips the install, leaves the store alone, finds the
// tree whole and writable, and saves nothing. A new package.json (another
// node_modules key) installs from the restored store with the registry
// unreachable, which fails without it. Another stamp, a corrupt archive
// or a tree the project already has make the install run too.
func TestNodeModulesCache(t *testing.T) {
	path, berry := managers(t)
	t.Setenv("PATH", path)
	ctx := context.Background()
	// No registry: every request goes to a closed port.
	const dead = "http://127.0.0.1:9"
	offline := []string{"HTTPS_PROXY=" + dead, "HTTP_PROXY=" + dead, "https_proxy=" + dead, "http_proxy=" + dead,
		"npm_config_https_proxy=" + dead, "npm_config_proxy=" + dead, "npm_config_fetch_retries=0", "npm_config_network_concurrency=1",
		"YARN_ENABLE_NETWORK=0"} // Yarn Berry: no network
	for _, c := range []struct {
		name, pm, lockfile, install string
		berry                       bool
	}{
		{"npm", "npm", "package-lock.json", "npm ci", false},
		{"pnpm", "pnpm", "pnpm-lock.yaml", "pnpm install", false},
		{"yarn", "yarn", "yarn.lock", "yarn install", false},
		{"yarn-berry", "yarn", "yarn.lock", "yarn install", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			hostCache := t.TempDir()
			env := append(os.Environ(), "CI=1", "npm_config_cache="+filepath.Join(hostCache, "npm"),
				"npm_config_store_dir="+filepath.Join(hostCache, "pnpm"), "YARN_CACHE_FOLDER="+filepath.Join(hostCache, "yarn"),
				"YARN_GLOBAL_FOLDER="+filepath.Join(hostCache, "berry")) // Berry's mirror, else shared with other runs
			src := t.TempDir()
			files := map[string]string{
				"package.json": `{"name":"app","version":"1.0.0","private":true,"dependencies":{"is-number":"7.0.0","semver":"7.6.3"}}`,
				".yarnrc":      "registry \"https://registry.npmjs.org\"\n",
			}
			modulesPaths := []string{"node_modules"}
			if c.berry {
				delete(files, ".yarnrc")
				files[".yarnrc.yml"] = "yarnPath: " + berry + "\nnodeLinker: node-modules\nnpmRegistryServer: \"https://registry.npmjs.org\"\nenableTelemetry: false\n"
				modulesPaths = append(modulesPaths, ".yarn/install-state.gz")
			}
			for name, body := range files {
				writeFile(t, filepath.Join(src, name), body)
			}
			managerRun{t: t, root: src, env: append(env, "YARN_ENABLE_IMMUTABLE_INSTALLS=false")}.mustRun(Command{Argv: []string{c.pm, "install"}})
			for _, p := range modulesPaths {
				os.RemoveAll(filepath.Join(src, p))
			}
			key, storeKey := strings.Repeat("3a", 32), strings.Repeat("5c", 32)
			spec := func(modulesKey string) api.BuildSpec {
				return api.BuildSpec{
					Project: api.Project{PackageManager: c.pm, Lockfile: c.lockfile, YarnBerry: c.berry},
					Caches: []api.CacheEntry{{Name: c.pm, Key: storeKey, Paths: []string{api.CacheDirVar + "/" + c.pm}},
						{Name: api.CacheNodeModules, Key: modulesKey, Paths: modulesPaths}},
				}
			}
			// build installs (or restores) in a fresh copy of src, as a VM
			// does, with the tools pointed at the VM's own cache directory.
			build := func(spec api.BuildSpec, share string, mounts []vmshare.CacheMount, extraEnv ...string) (string, *depCaches, string, error) {
				t.Helper()
				vm := t.TempDir()
				app := filepath.Join(vm, "app")
				if err := os.CopyFS(app, os.DirFS(src)); err != nil {
					t.Fatal(err)
				}
				var log bytes.Buffer
				d := newDepCaches(spec, filepath.Join(vm, "cache"), vm, app, vm, &log, nil)
				runEnv := mergeEnv(mergeEnv(env, d.env()...), append(extraEnv, "YARN_GLOBAL_FOLDER="+filepath.Join(vm, "berry"))...)
				p := &pipeline{tree: app, root: app, workDir: vm, spec: spec, caches: d, phase: func(string, int, string) {},
					runner: &stepRunner{env: runEnv, out: &log, grace: time.Second, drain: time.Second}}
				if d.restore(ctx, share, mounts) > 0 {
					p.runner.env = d.restoredEnv(p.runner.env)
				}
				err := p.install(ctx)
				return app, d, log.String(), err
			}
			mustBuild := func(spec api.BuildSpec, share string, mounts []vmshare.CacheMount, extraEnv ...string) (string, *depCaches, string) {
				t.Helper()
				app, d, log, err := build(spec, share, mounts, extraEnv...)
				if err != nil {
					t.Fatalf("install: %v\n%s", err, log)
				}
				return app, d, log
			}

			// Without a cache, the registry is needed: the proof below can fail.
			if _, _, log, err := build(spec(key), t.TempDir(), nil, offline...); err == nil {
				t.Fatalf("%s installed with no cache and no registry:\n%s", c.install, log)
			}

			_, d1, log1 := mustBuild(spec(key), t.TempDir(), nil)
			if !strings.Contains(log1, "▸ "+c.install) {
				t.Fatalf("the cold build did not install:\n%s", log1)
			}
			out := t.TempDir()
			saved := d1.save(ctx, out)
			if len(saved) != 2 || saved[0].Name != c.pm || saved[1].Name != api.CacheNodeModules {
				t.Fatalf("saved %+v\n%s", saved, log1)
			}
			store, err := cache.Open(filepath.Join(t.TempDir(), "caches"), 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			for _, sv := range saved {
				if err := store.Put("app", "", sv.Name, sv.Key, filepath.Join(out, vmshare.CacheOutDir, sv.File)); err != nil {
					t.Fatalf("the agent refused the %s archive: %v", sv.Name, err)
				}
			}
			share := filepath.Join(t.TempDir(), "share")
			mounted, err := store.Stage("app", "", spec(key).Caches, share)
			if err != nil || len(mounted) != 2 {
				t.Fatalf("stage: %+v %v", mounted, err)
			}
			var mounts []vmshare.CacheMount
			for _, m := range mounted {
				mounts = append(mounts, vmshare.CacheMount{Name: m.Name, Key: m.Key, File: m.File})
			}

			app2, d2, log2 := mustBuild(spec(key), share, mounts)
			if !strings.Contains(log2, "▸ node_modules restored from cache 3a3a3a3a3a3a…, "+c.install+" skipped") || strings.Contains(log2, "▸ "+c.install) {
				t.Fatalf("the warm build did not skip the install:\n%s", log2)
			}
			if !strings.Contains(log2, "▸ cache "+c.pm+": found (key 5c5c5c5c5c5c…): restored if the install runs") || strings.Contains(log2, "cache "+c.pm+": restored") {
				t.Errorf("the store was restored for an install that did not run:\n%s", log2)
			}
			run := managerRun{t: t, root: app2, env: env}
			if got := run.mustRun(Command{Argv: []string{"node", "-e", "process.stdout.write(require('semver').valid('1.2.3') + require('is-number')(7))"}}); got != "1.2.3true" {
				t.Errorf("the restored tree resolves %q", got)
			}
			if got := run.mustRun(Command{Argv: []string{filepath.Join(app2, "node_modules", ".bin", "semver"), "1.2.3"}}); strings.TrimSpace(got) != "1.2.3" {
				t.Errorf("node_modules/.bin/semver printed %q", got)
			}
			if err := os.MkdirAll(filepath.Join(app2, "node_modules", ".cache", "metro"), 0o755); err != nil {
				t.Errorf("the restored node_modules is not writable: %v", err)
			}
			if saved := d2.save(ctx, t.TempDir()); len(saved) != 0 {
				t.Errorf("a restored tree (or an unused store) was saved again: %+v", saved)
			}

			// A changed package.json: no node_modules under its key, so the
			// store is restored and the install takes everything from it.
			_, _, log3 := mustBuild(spec(strings.Repeat("4b", 32)), share, mounts, offline...)
			if !strings.Contains(log3, "▸ cache "+c.pm+": restored (key 5c5c") || !strings.Contains(log3, "▸ "+c.install) {
				t.Errorf("a new node_modules key with the store restored:\n%s", log3)
			}
			bad := t.TempDir()
			writeFile(t, filepath.Join(bad, api.CacheNodeModules+".tar"), strings.Repeat("garbage", 100))
			if _, _, log := mustBuild(spec(key), bad, mounts[1:]); !strings.Contains(log, "the archive is unusable") || !strings.Contains(log, "▸ "+c.install) {
				t.Errorf("a corrupt archive:\n%s", log)
			}
			vm := t.TempDir()
			var log bytes.Buffer
			d := newDepCaches(spec(key), filepath.Join(vm, "cache"), vm, filepath.Join(vm, "app"), vm, &log, nil)
			d.restore(ctx, share, mounts)
			other := modulesStamp{Key: key, Node: "18.0.0", PackageManager: c.pm + " 1.0.0", OS: runtime.GOOS, Arch: runtime.GOARCH}
			if got := d.restoreModules(d.stageModules(ctx), other); got != "" || !strings.Contains(log.String(), "installed with node ") || !strings.Contains(log.String(), "this build has node 18.0.0") {
				t.Errorf("another stamp restored %q:\n%s", got, log.String())
			}
			if _, err := os.Lstat(filepath.Join(vm, "app", "node_modules")); err == nil {
				t.Error("a discarded archive left node_modules behind")
			}
			os.MkdirAll(filepath.Join(vm, "app", "node_modules"), 0o755)
			log.Reset()
			if got := d.restoreModules(d.stageModules(ctx), *d1.modules().stamp); got != "" || !strings.Contains(log.String(), "the project has node_modules already") {
				t.Errorf("restored over the project's own node_modules:\n%s", log.String())
			}
		})
	}
}

// TestNodeModulesLinkingOut: npm links a file: dependency to its folder
// outside node_modules; such a tree is never saved (a restore would lack
// the package), while the npm cache's archive just leaves such links out.
func TestNodeModulesLinkingOut(t *testing.T) {
	app := t.TempDir()
	writeFile(t, filepath.Join(app, "tools", "cli", "package.json"), `{"name":"cli"}`)
	writeFile(t, filepath.Join(app, "node_modules", "is-number", "index.js"), "module.exports = 1")
	if err := os.Symlink("../tools/cli", filepath.Join(app, "node_modules", "cli")); err != nil {
		t.Fatal(err)
	}
	paths := []string{filepath.Join(app, "node_modules")}
	if _, err := writeCacheArchive(t.TempDir(), "node_modules.tar", paths, []byte("{}")); !errors.Is(err, errLeavesTree) {
		t.Errorf("node_modules linking outside itself: %v, want errLeavesTree", err)
	}
	if _, err := writeCacheArchive(t.TempDir(), "npm.tar", paths, nil); err != nil {
		t.Errorf("a store cache with an outside link: %v", err)
	}
}

// writeFile writes p, making its directory.
func writeFile(t *testing.T, p, body string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCachePathsStayInTheBuild: the VM's own guard on cache paths (the
// controller refuses them first). A cache with a path that climbs, is
// absolute or is in the home outside the tools' caches is neither restored
// nor saved; a path that leads through a link in the source out of the
// app is not restored through it.
func TestCachePathsStayInTheBuild(t *testing.T) {
	ctx := context.Background()
	key := strings.Repeat("3d", 32)
	vm := t.TempDir()
	root, app, home := filepath.Join(vm, "cache"), filepath.Join(vm, "app"), filepath.Join(vm, "home")
	outside := t.TempDir()
	var log bytes.Buffer
	spec := api.BuildSpec{Caches: []api.CacheEntry{
		{Name: "climbs", Key: key, Paths: []string{"vendor/../../../etc"}},
		{Name: "absolute", Key: key, Paths: []string{"node_modules", outside}},
		{Name: "home", Key: key, Paths: []string{"~/.zshrc"}},
		{Name: "custom", Key: key, Paths: []string{"linked/cache"}},
	}}
	d := newDepCaches(spec, root, vm, app, home, &log, nil)
	if len(d.entries) != 1 || d.entries[0].Name != "custom" {
		t.Fatalf("caches kept: %+v\n%s", d.entries, log.String())
	}
	for _, name := range []string{"climbs", "absolute", "home"} {
		if !strings.Contains(log.String(), "▸ warning: cache "+name+": not restored or saved: cache path") {
			t.Errorf("no warning for the %s cache:\n%s", name, log.String())
		}
	}

	// The source links linked → outside; the archive would write outside/cache.
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(app, "linked")); err != nil {
		t.Fatal(err)
	}
	share := t.TempDir()
	archiveDir := t.TempDir()
	writeFile(t, filepath.Join(archiveDir, "src", "planted"), "planted")
	if _, err := writeCacheArchive(share, "custom.tar", []string{filepath.Join(archiveDir, "src")}, nil); err != nil {
		t.Fatal(err)
	}
	if n := d.restore(ctx, share, []vmshare.CacheMount{{Name: "custom", Key: key, File: "custom.tar"}}); n != 0 || !strings.Contains(log.String(), "leads through a link") {
		t.Fatalf("restore through a link: %d\n%s", n, log.String())
	}
	if _, err := os.Lstat(filepath.Join(outside, "cache")); err == nil {
		t.Error("the restore wrote outside the app through a link")
	}
}
