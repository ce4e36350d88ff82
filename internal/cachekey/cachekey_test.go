package cachekey_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/cli/pack"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/internal/cachekey"
)

// TestBuildCaches: the caches a profile gets, and what their keys depend
// on. A key that ignored the project would let project B restore project
// A's cache; one that ignored the lockfile would restore a stale one.
func TestBuildCaches(t *testing.T) {
	root := t.TempDir()
	write := func(rel, content string) { t.Helper(); writeFile(t, root, rel, content) }
	write("package-lock.json", `{"lockfileVersion":3}`)
	write("android/build.gradle", "// top")
	write("android/app/build.gradle", "// app")
	write("android/gradle/wrapper/gradle-wrapper.properties", "distributionUrl=x")
	write("android/app/build/generated.gradle", "// build output: not part of the key")

	spec := func(project, platform string, cache *api.BuildCache) api.BuildSpec {
		return api.BuildSpec{ProjectName: project, Platform: platform, Profile: api.BuildProfile{Cache: cache},
			Project: api.Project{PackageManager: "npm", Lockfile: "package-lock.json"}}
	}
	caches := func(s api.BuildSpec) []api.CacheEntry {
		t.Helper()
		c, err := cachekey.Entries(s, cachekey.Dir(root))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	names := func(c []api.CacheEntry) []string {
		var n []string
		for _, e := range c {
			n = append(n, e.Name)
		}
		return n
	}
	key := func(c []api.CacheEntry, name string) string {
		t.Helper()
		return cacheNamed(t, c, name).Key
	}

	a := caches(spec("a", api.PlatformAndroid, nil))
	if got := names(a); !slices.Equal(got, []string{"npm", "node_modules", "gradle"}) {
		t.Fatalf("android caches %v, want npm, node_modules, gradle", got)
	}
	hex64 := regexp.MustCompile(`^[0-9a-f]{64}$`)
	for _, e := range a {
		if !hex64.MatchString(e.Key) {
			t.Errorf("%s: key %q is not 64 hex digits", e.Name, e.Key)
		}
	}
	if p := a[0].Paths; !slices.Equal(p, []string{"$FREEAGENT_CACHE_DIR/npm"}) {
		t.Errorf("npm paths %v", p)
	}
	ios := caches(spec("a", api.PlatformIOS, nil))
	if got := names(ios); !slices.Equal(got, []string{"npm", "node_modules", "pods"}) {
		t.Fatalf("ios caches %v, want npm, node_modules, pods", got)
	}
	if key(ios, "npm") == key(a, "npm") {
		t.Error("the npm key ignores the platform")
	}
	// A managed app (no ios/ yet): only the CocoaPods cache, never a path
	// under the ios/ that prebuild makes; a bare one keeps its Pods too.
	if p := cacheNamed(t, ios, "pods").Paths; !slices.Equal(p, []string{"$FREEAGENT_CACHE_DIR/cocoapods"}) {
		t.Errorf("managed app's pods paths %v", p)
	}
	write("ios/Podfile.lock", "PODS: []")
	bare := caches(spec("a", api.PlatformIOS, nil))
	if p := cacheNamed(t, bare, "pods").Paths; !slices.Equal(p, []string{"ios/Pods", "$FREEAGENT_CACHE_DIR/cocoapods"}) {
		t.Errorf("bare app's pods paths %v", p)
	}
	if key(bare, "pods") == key(ios, "pods") {
		t.Error("Podfile.lock does not change the pods key")
	}

	b := caches(spec("b", api.PlatformAndroid, nil))
	for _, n := range []string{"npm", "gradle"} {
		if key(a, n) == key(b, n) {
			t.Errorf("%s: projects a and b share a key", n)
		}
	}

	gradleBefore := key(a, "gradle")
	write("android/app/build/generated.gradle", "// changed build output")
	if key(caches(spec("a", api.PlatformAndroid, nil)), "gradle") != gradleBefore {
		t.Error("a build output under android/app/build changed the gradle key")
	}
	write("android/app/build.gradle", "// app, changed")
	if key(caches(spec("a", api.PlatformAndroid, nil)), "gradle") == gradleBefore {
		t.Error("a changed app/build.gradle left the gradle key as it was")
	}
	write("package-lock.json", `{"lockfileVersion":3,"packages":{}}`)
	if key(caches(spec("a", api.PlatformAndroid, nil)), "npm") == key(a, "npm") {
		t.Error("a changed lockfile left the npm key as it was")
	}

	if key(caches(spec("a", api.PlatformAndroid, &api.BuildCache{Key: "v2"})), "npm") == key(caches(spec("a", api.PlatformAndroid, nil)), "npm") {
		t.Error("cache.key does not change the key")
	}
	yes, no := true, false
	if c := caches(spec("a", api.PlatformAndroid, &api.BuildCache{Disabled: &yes, Paths: []string{"x"}})); len(c) != 0 {
		t.Errorf("cache.disabled: caches %+v", c)
	}
	custom := caches(spec("a", api.PlatformAndroid, &api.BuildCache{Paths: []string{"vendor/cache", "~/.cache/tool"}}))
	if got := names(custom); !slices.Equal(got, []string{"npm", "node_modules", "gradle", "custom"}) {
		t.Errorf("cache.paths: caches %v", got)
	}
	only := caches(spec("a", api.PlatformAndroid, &api.BuildCache{CacheDefaultPaths: &no, Paths: []string{"vendor/cache"}}))
	if got := names(only); !slices.Equal(got, []string{"custom"}) || !slices.Equal(only[0].Paths, []string{"vendor/cache"}) {
		t.Errorf("cacheDefaultPaths false: caches %+v", only)
	}
	if key(only, "custom") == key(custom, "custom") {
		t.Error("the custom key ignores its paths")
	}
}

// writeFile writes content at rel under root, making its directories.
func writeFile(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func cacheNamed(t *testing.T, c []api.CacheEntry, name string) api.CacheEntry {
	t.Helper()
	for _, e := range c {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("no %s cache in %+v", name, c)
	return api.CacheEntry{}
}

// TestNodeModulesCache: the node_modules cache exists only where restoring
// the tree can stand in for the install (a single package with a lockfile
// and a linker that makes node_modules), its key follows both the lockfile
// and package.json, and the profile can turn it off alone.
func TestNodeModulesCache(t *testing.T) {
	root := t.TempDir()
	write := func(rel, content string) { t.Helper(); writeFile(t, root, rel, content) }
	write("package.json", `{"name":"app"}`)
	write("package-lock.json", `{"lockfileVersion":3}`)
	write("yarn.lock", "# yarn")
	spec := func(p api.Project, env map[string]string) api.BuildSpec {
		return api.BuildSpec{ProjectName: "app", Platform: api.PlatformAndroid, Project: p, Profile: api.BuildProfile{Env: env}}
	}
	modules := func(s api.BuildSpec) *api.CacheEntry {
		t.Helper()
		c, err := cachekey.Entries(s, cachekey.Dir(root))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range c {
			if e.Name == api.CacheNodeModules {
				return &e
			}
		}
		return nil
	}
	npm := api.Project{PackageManager: "npm", Lockfile: "package-lock.json"}
	before := modules(spec(npm, nil))
	if before == nil || !slices.Equal(before.Paths, []string{"node_modules"}) {
		t.Fatalf("npm project: node_modules cache %+v", before)
	}
	write("package.json", `{"name":"app","dependencies":{"x":"1"}}`)
	if m := modules(spec(npm, nil)); m.Key == before.Key {
		t.Error("a changed package.json left the node_modules key as it was")
	}
	write("package-lock.json", `{"lockfileVersion":3,"packages":{}}`)
	if m := modules(spec(npm, nil)); m.Key == before.Key {
		t.Error("a changed lockfile left the node_modules key as it was")
	}

	for name, p := range map[string]api.Project{
		"no lockfile":   {PackageManager: "npm"},
		"workspace":     {PackageManager: "npm", Lockfile: "package-lock.json", Workspace: true, AppDir: "apps/mobile"},
		"app subfolder": {PackageManager: "npm", Lockfile: "package-lock.json", AppDir: "mobile"},
		"berry pnp":     {PackageManager: "yarn", Lockfile: "yarn.lock", YarnBerry: true},
	} {
		if m := modules(spec(p, nil)); m != nil {
			t.Errorf("%s: node_modules cache %+v, want none", name, m)
		}
	}
	if m := modules(spec(npm, map[string]string{cachekey.NodeModulesCacheEnv: "0"})); m != nil {
		t.Errorf("%s=0: node_modules cache %+v", cachekey.NodeModulesCacheEnv, m)
	}
	if m := modules(spec(api.Project{PackageManager: "yarn", Lockfile: "yarn.lock"}, nil)); m == nil || !slices.Equal(m.Paths, []string{"node_modules"}) {
		t.Errorf("yarn classic: node_modules cache %+v", m)
	}
	berry := api.Project{PackageManager: "yarn", Lockfile: "yarn.lock", YarnBerry: true}
	write(".yarnrc.yml", "enableTelemetry: false\n  nodeLinker: node-modules\n") // indented: not the top-level key
	if m := modules(spec(berry, nil)); m != nil {
		t.Errorf("berry, nested nodeLinker: node_modules cache %+v", m)
	}
	write(".yarnrc.yml", "enableTelemetry: false\nnodeLinker: \"node-modules\" # for Metro\n")
	if m := modules(spec(berry, nil)); m == nil || !slices.Equal(m.Paths, []string{"node_modules", ".yarn/install-state.gz"}) {
		t.Errorf("berry with the node-modules linker: node_modules cache %+v", m)
	}
}

// TestIndexAgreesWithDir: the controller's keys, computed from the archive
// expo-build packs, are the ones expo-build computed from the disk, so an
// honest spec's keys stand and placement finds the caches they name.
func TestIndexAgreesWithDir(t *testing.T) {
	root := t.TempDir()
	write := func(rel, content string) { t.Helper(); writeFile(t, root, rel, content) }
	write("package.json", `{"name":"app"}`)
	write("yarn.lock", "# yarn")
	write(".yarnrc.yml", "nodeLinker: node-modules\n")
	write("android/build.gradle", "// top")
	write("android/app/build.gradle.kts", "// app")
	write("android/gradle/wrapper/gradle-wrapper.properties", "distributionUrl=x")
	write("android/.gradle/x.gradle", "// hidden: not hashed")
	write("ios/Podfile.lock", "PODS: []")
	write("apps/mobile/package.json", `{"name":"mobile"}`)
	write("apps/mobile/android/build.gradle", "// monorepo app")
	write("apps/mobile/ios/Podfile", "platform :ios")

	plan, err := pack.Scan(context.Background(), root, pack.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if _, err := plan.Write(context.Background(), &archive, nil); err != nil {
		t.Fatal(err)
	}

	yarn := api.Project{PackageManager: "yarn", Lockfile: "yarn.lock", YarnBerry: true}
	mono := api.Project{PackageManager: "yarn", Lockfile: "yarn.lock", Workspace: true, AppDir: "apps/mobile"}
	for _, s := range []api.BuildSpec{
		{ProjectName: "app", Platform: api.PlatformAndroid, Project: yarn},
		{ProjectName: "app", Platform: api.PlatformIOS, Project: yarn},
		{ProjectName: "app", Platform: api.PlatformAndroid, Project: mono},
		{ProjectName: "app", Platform: api.PlatformIOS, Project: mono, Profile: api.BuildProfile{Cache: &api.BuildCache{Paths: []string{"vendor"}}}},
	} {
		disk, err := cachekey.Entries(s, cachekey.Dir(root))
		if err != nil {
			t.Fatal(err)
		}
		packed := controllertest.CacheEntries(t, s, archive.Bytes())
		if len(disk) < 2 || !slices.EqualFunc(disk, packed, func(a, b api.CacheEntry) bool {
			return a.Name == b.Name && a.Key == b.Key && slices.Equal(a.Paths, b.Paths)
		}) {
			t.Errorf("%s %s: from the disk %+v, from the archive %+v", s.Platform, s.Project.AppDir, disk, packed)
		}
	}
}

// TestCheckPath: a cache path stays in the build's tree or a tool's home.
// One that climbs or is absolute would let a build's cache write (at the
// restore of a later build) wherever the VM's user may.
func TestCheckPath(t *testing.T) {
	for _, p := range []string{"vendor/cache", "node_modules", ".", "$FREEAGENT_CACHE_DIR/gradle/caches", "~/.cache/tool", "~/Library/Caches/CocoaPods", "~/.gradle"} {
		if err := cachekey.CheckPath(p); err != nil {
			t.Errorf("%q refused: %v", p, err)
		}
	}
	for _, p := range []string{"", "../x", "vendor/../../x", `vendor\..\x`, "$FREEAGENT_CACHE_DIR/../x", "/etc", "/Users/admin/.ssh", "~", "~/.zshrc", "~/Library/LaunchAgents", "~/.cache/../.ssh", "~root/x", "$HOME/x"} {
		err := cachekey.CheckPath(p)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", p)) || !strings.Contains(err.Error(), "never has a \"..\" element") {
			t.Errorf("%q: %v, want a refusal naming the path and the rule", p, err)
		}
	}
	if _, err := cachekey.Entries(api.BuildSpec{Platform: api.PlatformAndroid, Profile: api.BuildProfile{Cache: &api.BuildCache{Paths: []string{"../../.ssh"}}}}, cachekey.Dir(t.TempDir())); err == nil {
		t.Error("Entries took a cache.paths entry that climbs")
	}
}
