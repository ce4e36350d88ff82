// Package cachekey defines a build's dependency caches (api.CacheEntry):
// which caches a profile gets, at which paths, and their keys, hashed from
// the files that decide each cache's content (the lockfile, package.json,
// the Gradle files, Podfile.lock).
//
// expo-build computes them from the project on disk (Dir); the controller
// computes them again from the source archive it received (Index) and
// keeps only its own, so a cache key always names the files the build
// really has, whatever its spec declared. Qualify then binds a key to the
// build's cache domain (project, environment, trust), and CheckPath is the
// rule every cache path follows.
package cachekey

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/freeagent-build/freeagent/api"
)

// maxGradleFiles bounds the Gradle files hashed into the gradle cache's
// key: a project with more is hashed on the first ones, in path order.
const maxGradleFiles = 500

// maxYarnrc bounds the .yarnrc.yml read for its nodeLinker.
const maxYarnrc = 1 << 20

// Tree is a project's files as the keys read them, by slash-separated
// paths relative to the workspace root (the archive's root). Only regular
// files count: a link is not followed, as the archive holds it as a link.
type Tree interface {
	// Sum is the hex SHA-256 of the regular file rel, "" when there is none.
	Sum(rel string) (string, error)
	// IsDir reports whether the directory rel exists.
	IsDir(rel string) bool
	// Files lists the regular files under dir whose name keep admits,
	// leaving out the directories below dir whose name skip admits.
	Files(dir string, skip, keep func(name string) bool) ([]string, error)
	// Read returns the regular file rel, nil when it is missing or larger
	// than limit.
	Read(rel string, limit int64) ([]byte, error)
}

// Entries decides the dependency caches of a build as EAS does: the
// package manager's store, CocoaPods (iOS) or Gradle (Android), and the
// profile's cache.paths; none when cache.disabled is set, only the custom
// paths when cacheDefaultPaths is false. tree is the packed workspace. A
// cache.paths entry CheckPath refuses is an error.
func Entries(spec api.BuildSpec, tree Tree) ([]api.CacheEntry, error) {
	c := spec.Profile.Cache
	if c == nil {
		c = &api.BuildCache{}
	}
	if c.Disabled != nil && *c.Disabled {
		return nil, nil
	}
	app := func(rel string) string { return path.Join(spec.Project.AppDir, rel) }
	pm := spec.Project.PackageManager
	lock, err := fileHash(tree, spec.Project.Lockfile)
	if err != nil {
		return nil, err
	}
	var out []api.CacheEntry
	add := func(name, content string, paths ...string) {
		out = append(out, api.CacheEntry{Name: name, Key: key(spec, name, content, c.Key, paths), Paths: paths})
	}
	if c.CacheDefaultPaths == nil || *c.CacheDefaultPaths {
		switch pm {
		case api.PackageManagerNPM, api.PackageManagerYarn, api.PackageManagerPNPM, api.PackageManagerBun:
			add(pm, lock, api.CacheDirVar+"/"+pm)
		}
		if paths := nodeModulesPaths(spec, tree); paths != nil {
			// The install's inputs: the lockfile and package.json, so the
			// frozen install's check of one against the other would pass.
			pkg, err := fileHash(tree, "package.json")
			if err != nil {
				return nil, err
			}
			add(api.CacheNodeModules, lock+pkg, paths...)
		}
		switch spec.Platform {
		case api.PlatformIOS:
			// Podfile.lock decides the pods; a managed app has none before
			// prebuild, and its pods follow from its JavaScript dependencies.
			pods, err := fileHash(tree, app("ios/Podfile.lock"))
			if err != nil {
				return nil, err
			}
			paths := []string{api.CacheDirVar + "/cocoapods"}
			// A spec from an older CLI has no workflow: the archive's
			// ios/ decides, as the VM decides.
			if spec.Workflow == api.WorkflowGeneric || spec.Workflow == "" && tree.IsDir(app("ios")) {
				// A bare project's Pods; a managed app's ios/ is made by
				// prebuild, which a restored ios/Pods would skip.
				paths = append([]string{"ios/Pods"}, paths...)
			}
			if pods == "" {
				pods = lock
			}
			add("pods", pods, paths...)
		case api.PlatformAndroid:
			gradle, err := gradleHash(tree, spec.Project.AppDir)
			if err != nil {
				return nil, err
			}
			add("gradle", gradle+lock, api.CacheDirVar+"/gradle/caches", api.CacheDirVar+"/gradle/wrapper/dists")
		}
	}
	if len(c.Paths) > 0 {
		for _, p := range c.Paths {
			if err := CheckPath(p); err != nil {
				return nil, fmt.Errorf("eas.json cache.paths: %w", err)
			}
		}
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
func nodeModulesPaths(spec api.BuildSpec, tree Tree) []string {
	p := spec.Project
	if p.Lockfile == "" || p.Workspace || p.AppDir != "" || spec.Profile.Env[NodeModulesCacheEnv] == "0" {
		return nil
	}
	if p.PackageManager == api.PackageManagerYarn && p.YarnBerry {
		if !berryNodeModulesLinker(tree) {
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
func berryNodeModulesLinker(tree Tree) bool {
	data, err := tree.Read(".yarnrc.yml", maxYarnrc)
	if err != nil || data == nil {
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

// key is the hex SHA-256 over everything that decides a cache's content
// and whose it is: the project comes first, so two projects never share a
// key.
func key(spec api.BuildSpec, name, content, userKey string, paths []string) string {
	h := sha256.New()
	for _, s := range append([]string{spec.BuildProject(), spec.Platform, name, spec.Project.PackageManager, content, userKey}, paths...) {
		fmt.Fprintf(h, "%d:%s\n", len(s), s) // length-prefixed: no two lists encode alike
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Qualify binds a cache key to a cache domain (the controller's word on
// whose builds may share the cache: see docs/security.md): the hex
// SHA-256 of the domain, a newline and the key. The controller hands the
// worker and the VM qualified keys, and the worker reports the keys it
// holds as they were handed to it, so placement compares like with like.
func Qualify(domain, key string) string {
	sum := sha256.Sum256([]byte(domain + "\n" + key))
	return hex.EncodeToString(sum[:])
}

// fileHash is the hex SHA-256 of rel, "" when rel is "" or missing.
func fileHash(tree Tree, rel string) (string, error) {
	if rel == "" {
		return "", nil
	}
	sum, err := tree.Sum(rel)
	if err != nil {
		return "", fmt.Errorf("hash %s for the dependency cache's key: %w", rel, err)
	}
	return sum, nil
}

// gradleSkip: directories under android/ that hold no Gradle files of the
// project (build outputs, node_modules, hidden ones).
func gradleSkip(name string) bool {
	return name == "build" || name == "node_modules" || strings.HasPrefix(name, ".")
}

// gradleFile: the files that decide the Gradle caches.
func gradleFile(name string) bool {
	return strings.HasSuffix(name, ".gradle") || strings.HasSuffix(name, ".gradle.kts") || name == "gradle-wrapper.properties"
}

// gradleHash hashes what decides the Gradle caches: every *.gradle and
// *.gradle.kts under android/ (build outputs and node_modules aside) and
// the wrapper's properties, each with its path relative to the app. ""
// without android/.
func gradleHash(tree Tree, appDir string) (string, error) {
	files, err := tree.Files(path.Join(appDir, "android"), gradleSkip, gradleFile)
	if err != nil {
		return "", fmt.Errorf("hash the Gradle files for the dependency cache's key: %w", err)
	}
	rel := make([]string, len(files))
	for i, f := range files {
		rel[i] = strings.TrimPrefix(f, appDir+"/")
	}
	slices.Sort(rel)
	if len(rel) > maxGradleFiles {
		rel = rel[:maxGradleFiles]
	}
	h := sha256.New()
	for _, f := range rel {
		sum, err := fileHash(tree, path.Join(appDir, f))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %s\n", sum, path.Clean(f))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Dir is the project on disk at root, the workspace root.
type Dir string

func (d Dir) path(rel string) string { return filepath.Join(string(d), filepath.FromSlash(rel)) }

// Sum implements Tree.
func (d Dir) Sum(rel string) (string, error) {
	f, err := d.open(rel)
	if f == nil || err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// open opens the regular file rel; nil without error when there is none.
func (d Dir) open(rel string) (*os.File, error) {
	st, err := os.Lstat(d.path(rel))
	if errors.Is(err, fs.ErrNotExist) || err == nil && !st.Mode().IsRegular() {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return os.Open(d.path(rel))
}

// IsDir implements Tree.
func (d Dir) IsDir(rel string) bool {
	st, err := os.Lstat(d.path(rel))
	return err == nil && st.IsDir()
}

// Files implements Tree.
func (d Dir) Files(dir string, skip, keep func(string) bool) ([]string, error) {
	top := d.path(dir)
	var files []string
	err := filepath.WalkDir(top, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if p == top && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if e.IsDir() && p != top && skip(e.Name()) {
			return fs.SkipDir
		}
		if e.Type().IsRegular() && keep(e.Name()) {
			rel, _ := filepath.Rel(string(d), p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files, err
}

// Read implements Tree.
func (d Dir) Read(rel string, limit int64) ([]byte, error) {
	f, err := d.open(rel)
	if f == nil || err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil || int64(len(data)) > limit {
		return nil, err
	}
	return data, nil
}

// toolHomes are the directories under the build user's home ("~/…") a
// cache path may name: the tools' own caches. Anything else there (shell
// profiles, ~/.ssh, launch agents) runs or decides code outside any
// tool's cache, and is no cache's business.
var toolHomes = []string{".cache", ".gradle", ".npm", ".yarn", ".bun", ".pnpm-store", ".cocoapods", "Library/Caches"}

// PathRule says in a sentence which cache paths are accepted.
const PathRule = "a cache path is relative to the app's directory, under " + api.CacheDirVar +
	"/, or under a tool's cache in the build user's home (~/.cache, ~/.gradle, ~/.npm, ~/.yarn, ~/.bun, ~/.pnpm-store, ~/.cocoapods, ~/Library/Caches), and never has a \"..\" element"

// CheckPath refuses a cache path that could reach outside the build's own
// tree and the tools' homes: an absolute path, one with a ".." element, or
// one in the home outside toolHomes. The error names p and PathRule.
func CheckPath(p string) error {
	bad := func(why string) error { return fmt.Errorf("cache path %q %s: %s", p, why, PathRule) }
	if p == "" || strings.ContainsRune(p, 0) {
		return bad("is empty or holds a NUL")
	}
	if slices.Contains(strings.Split(strings.ReplaceAll(p, `\`, "/"), "/"), "..") {
		return bad(`climbs with ".."`)
	}
	switch {
	case p == api.CacheDirVar || strings.HasPrefix(p, api.CacheDirVar+"/"):
		return nil
	case p == "~" || strings.HasPrefix(p, "~/"):
		rest := path.Clean(strings.TrimPrefix(p, "~/"))
		for _, h := range toolHomes {
			if rest == h || strings.HasPrefix(rest, h+"/") {
				return nil
			}
		}
		return bad("is in the home but in no tool's cache")
	case strings.HasPrefix(p, "/") || filepath.IsAbs(p) || strings.HasPrefix(p, "~") || strings.HasPrefix(p, "$"):
		return bad("is absolute")
	}
	return nil
}
