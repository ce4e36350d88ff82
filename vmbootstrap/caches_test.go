package vmbootstrap

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/freeagent-build/freeagent/agent/cache"
	"github.com/freeagent-build/freeagent/controller/api"
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
	write := func(p, body string) {
		t.Helper()
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}

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
	if err := store.Put("app", "npm", key, filepath.Join(shared, vmshare.CacheOutDir, "npm.tar")); err != nil {
		t.Fatalf("the agent refused the VM's archive: %v", err)
	}
	share := filepath.Join(t.TempDir(), "share")
	mounted, err := store.Stage("app", spec.Caches, share)
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
	if env := d2.restoredEnv([]string{"PATH=/bin"}); envValue(env, "npm_config_prefer_offline") != "true" {
		t.Errorf("after a restore the install does not prefer the cache: %v", env)
	}
	if env := d2.restoredEnv([]string{"npm_config_prefer_offline=false"}); envValue(env, "npm_config_prefer_offline") != "false" {
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

	// A cache path under a native directory the project does not have
	// (prebuild makes it) is not restored: creating it would skip prebuild.
	podsSpec := api.BuildSpec{Caches: []api.CacheEntry{{Name: "npm", Key: key, Paths: []string{api.CacheDirVar + "/npm", "ios/Pods"}}}}
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
