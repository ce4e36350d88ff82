package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/freeagent-build/freeagent/controller/api"
)

// maxGradleFiles bounds the Gradle files hashed into the gradle cache's
// key: a project with more is hashed on the first ones, in path order.
const maxGradleFiles = 500

// buildCaches decides the dependency caches of a build as EAS does: the
// package manager's store, CocoaPods (iOS) or Gradle (Android), and the
// profile's cache.paths; none when cache.disabled is set, only the custom
// paths when cacheDefaultPaths is false. workspaceRoot is the packed root,
// appRoot the app's directory in it.
func buildCaches(spec api.BuildSpec, workspaceRoot, appRoot string) ([]api.CacheEntry, error) {
	c := spec.Profile.Cache
	if c == nil {
		c = &api.BuildCache{}
	}
	if c.Disabled != nil && *c.Disabled {
		return nil, nil
	}
	pm := spec.Project.PackageManager
	lock, err := fileHash(workspaceRoot, spec.Project.Lockfile)
	if err != nil {
		return nil, err
	}
	var out []api.CacheEntry
	add := func(name, content string, paths ...string) {
		out = append(out, api.CacheEntry{Name: name, Key: cacheKey(spec, name, content, c.Key, paths), Paths: paths})
	}
	if c.CacheDefaultPaths == nil || *c.CacheDefaultPaths {
		switch pm {
		case api.PackageManagerNPM, api.PackageManagerYarn, api.PackageManagerPNPM, api.PackageManagerBun:
			add(pm, lock, api.CacheDirVar+"/"+pm)
		}
		if paths := nodeModulesPaths(spec, workspaceRoot); paths != nil {
			// The install's inputs: the lockfile and package.json, so the
			// frozen install's check of one against the other would pass.
			pkg, err := fileHash(workspaceRoot, "package.json")
			if err != nil {
				return nil, err
			}
			add(api.CacheNodeModules, lock+pkg, paths...)
		}
		switch spec.Platform {
		case api.PlatformIOS:
			// Podfile.lock decides the pods; a managed app has none before
			// prebuild, and its pods follow from its JavaScript dependencies.
			pods, err := fileHash(appRoot, "ios/Podfile.lock")
			if err != nil {
				return nil, err
			}
			paths := []string{api.CacheDirVar + "/cocoapods"}
			if fileExists(filepath.Join(appRoot, "ios")) {
				// A bare project's Pods; a managed app's ios/ is made by
				// prebuild, which a restored ios/Pods would skip.
				paths = append([]string{"ios/Pods"}, paths...)
			}
			if pods == "" {
				pods = lock
			}
			add("pods", pods, paths...)
		case api.PlatformAndroid:
			gradle, err := gradleHash(appRoot)
			if err != nil {
				return nil, err
			}
			add("gradle", gradle+lock, api.CacheDirVar+"/gradle/caches", api.CacheDirVar+"/gradle/wrapper/dists")
		}
	}
	if len(c.Paths) > 0 {
		add("custom", lock, c.Paths...)
	}
	return out, nil
}

// nodeModulesPaths are the paths of the node_modules cache, nil when the
// project gets none: it needs a lockfile (an unfrozen install is no fixed
// input), a single package at the root (a workspace's packages each have
// their own node_modules, and links between them), a linker that makes
// node_modules (not Yarn Berry's default Plug'n'Play), and no profile env
// FREEAGENT_CACHE_NODE_MODULES=0.
func nodeModulesPaths(spec api.BuildSpec, workspaceRoot string) []string {
	p := spec.Project
	if p.Lockfile == "" || p.Workspace || p.AppDir != "" || spec.Profile.Env[NodeModulesCacheEnv] == "0" {
		return nil
	}
	if p.PackageManager == api.PackageManagerYarn && p.YarnBerry {
		if !berryNodeModulesLinker(workspaceRoot) {
			return nil
		}
		// Berry's install state: `yarn run` reads it to find the binaries.
		return []string{"node_modules", ".yarn/install-state.gz"}
	}
	return []string{"node_modules"}
}

// NodeModulesCacheEnv, set to 0 in a profile's env, turns the node_modules
// cache off and keeps the others.
const NodeModulesCacheEnv = "FREEAGENT_CACHE_NODE_MODULES"

// berryNodeModulesLinker reports whether .yarnrc.yml sets nodeLinker to
// node-modules (or pnpm, which makes a node_modules tree of links).
func berryNodeModulesLinker(root string) bool {
	data, err := os.ReadFile(filepath.Join(root, ".yarnrc.yml"))
	if err != nil || len(data) > 1<<20 {
		return false
	}
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) != "nodeLinker" || strings.HasPrefix(k, " ") || strings.HasPrefix(k, "\t") {
			continue
		}
		v, _, _ = strings.Cut(v, "#")
		v = strings.Trim(strings.TrimSpace(v), `"'`)
		return v == "node-modules" || v == "pnpm"
	}
	return false
}

// cacheKey is the hex SHA-256 over everything that decides a cache's
// content and whose it is: the project comes first, so two projects never
// share a key.
func cacheKey(spec api.BuildSpec, name, content, userKey string, paths []string) string {
	h := sha256.New()
	for _, s := range append([]string{spec.BuildProject(), spec.Platform, name, spec.Project.PackageManager, content, userKey}, paths...) {
		fmt.Fprintf(h, "%d:%s\n", len(s), s) // length-prefixed: no two lists encode alike
	}
	return hex.EncodeToString(h.Sum(nil))
}

// fileHash is the hex SHA-256 of root/rel, "" when rel is "" or missing.
func fileHash(root, rel string) (string, error) {
	if rel == "" {
		return "", nil
	}
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(rel)))
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("hash %s for the dependency cache's key: %w", rel, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s for the dependency cache's key: %w", rel, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// gradleHash hashes what decides the Gradle caches: every *.gradle and
// *.gradle.kts under android/ (build outputs and node_modules aside) and
// the wrapper's properties, each with its path. "" without android/.
func gradleHash(appRoot string) (string, error) {
	dir := filepath.Join(appRoot, "android")
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir && os.IsNotExist(err) {
				return fs.SkipAll
			}
			return err
		}
		if d.IsDir() && p != dir && (d.Name() == "build" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
			return fs.SkipDir
		}
		name := d.Name()
		if d.Type().IsRegular() && (strings.HasSuffix(name, ".gradle") || strings.HasSuffix(name, ".gradle.kts") || name == "gradle-wrapper.properties") {
			rel, _ := filepath.Rel(appRoot, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash the Gradle files for the dependency cache's key: %w", err)
	}
	slices.Sort(files)
	if len(files) > maxGradleFiles {
		files = files[:maxGradleFiles]
	}
	h := sha256.New()
	for _, f := range files {
		sum, err := fileHash(appRoot, f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %s\n", sum, path.Clean(f))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
