package vmbootstrap

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/boundedfile"
	"github.com/freeagent-build/freeagent/internal/bytesize"
	"github.com/freeagent-build/freeagent/internal/cachekey"
	"github.com/freeagent-build/freeagent/internal/toolchain"
	"github.com/freeagent-build/freeagent/internal/vmshare"
)

// cacheLimits bound what a shared cache archive may expand to: the host
// validated it, this is the VM's own guard.
var cacheLimits = ExtractLimits{MaxBytes: 200 << 30, MaxFileBytes: 20 << 30, MaxFiles: 10_000_000}

// depCache is one dependency cache of the build.
type depCache struct {
	api.CacheEntry
	paths    []string            // resolved, absolute in this VM
	bases    []string            // the directory each path must stay in: the cache directory, the home or the app
	restored string              // the key of the archive restored, "" on a miss
	shared   *vmshare.CacheMount // the archive the worker shared, nil on a miss
	archive  string              // its path
	deferred bool                // a store left for the install, if it runs
	// The node_modules cache only: the stamp of this VM's tools; whether
	// the install ran, so the tree is new and worth saving.
	stamp     *modulesStamp
	installed bool
}

// modulesStamp says what a node_modules tree was installed with; a tree
// is restored only into a VM whose stamp is the same. A native addon
// built for another Node.js ABI, OS or CPU, or a tree laid out by another
// version of the manager, would break the build in ways no install
// would.
type modulesStamp struct {
	Key            string `json:"key"`
	Node           string `json:"node"`
	PackageManager string `json:"package_manager"` // "npm 10.9.2"
	OS             string `json:"os"`
	Arch           string `json:"arch"`
}

// stampFile is the stamp's entry in a node_modules cache archive, beside
// the trees 0/, 1/, ….
const stampFile = "stamp.json"

// depCaches restores a build's dependency caches before its install and,
// after its success, saves those it did not find under their exact key.
type depCaches struct {
	root    string // $FREEAGENT_CACHE_DIR
	work    string // scratch space for extraction
	app     string // the app's directory
	entries []*depCache
	log     io.Writer
	user    *buildUser // nil: files stay this process's
	// clear (the spec's ClearCache): restore nothing, save every cache.
	clear bool
	// prebuilt is the native directory expo prebuild makes ("android" or
	// "ios" in a managed app; "" in a bare one).
	prebuilt string
}

// newDepCaches resolves spec's caches for an app in appRoot: a path under
// $FREEAGENT_CACHE_DIR goes under root, "~/…" under home, a relative one
// under appRoot. A cache with a path cachekey.CheckPath refuses (the
// controller refused it already: this is the VM's own guard) is left out
// with a warning.
func newDepCaches(spec api.BuildSpec, root, work, appRoot, home string, log io.Writer, user *buildUser) *depCaches {
	d := &depCaches{root: root, work: work, app: appRoot, log: log, user: user, clear: spec.ClearCache}
	if spec.Workflow == api.WorkflowManaged {
		d.prebuilt = spec.Platform
	}
	seen := map[string]bool{}
next:
	for _, e := range spec.Caches {
		if e.Name == "" || seen[e.Name] || strings.ContainsAny(e.Name, `/\`) || e.Name == "." || e.Name == ".." {
			continue
		}
		seen[e.Name] = true
		c := &depCache{CacheEntry: e}
		for _, p := range e.Paths {
			if err := cachekey.CheckPath(p); err != nil {
				fmt.Fprintf(log, "▸ warning: cache %s: not restored or saved: %v\n", e.Name, err)
				continue next
			}
			base, rel := appRoot, p
			switch {
			case p == api.CacheDirVar || strings.HasPrefix(p, api.CacheDirVar+"/"):
				base, rel = root, strings.TrimPrefix(p, api.CacheDirVar)
			case strings.HasPrefix(p, "~/"):
				base, rel = home, p[1:]
			}
			c.paths, c.bases = append(c.paths, filepath.Join(base, rel)), append(c.bases, base)
		}
		d.entries = append(d.entries, c)
	}
	return d
}

// confined refuses to restore c's path i when an existing directory on
// the way to it is a link out of its base: a source can hold a link
// (vendor → /Users/admin) that a restore would write through.
func (c *depCache) confined(i int) error {
	base, err := resolveExisting(c.bases[i])
	if err != nil {
		return err
	}
	real, err := resolveExisting(filepath.Dir(c.paths[i]))
	if err != nil {
		return err
	}
	if !inside(real, base) {
		return fmt.Errorf("%s leads through a link to %s, outside %s", c.Paths[i], real, c.bases[i])
	}
	return nil
}

// resolveExisting is p with the links of its longest existing part
// resolved: where creating p would put it.
func resolveExisting(p string) (string, error) {
	rest := ""
	for {
		if _, err := os.Lstat(p); err == nil {
			break
		}
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		rest, p = filepath.Join(filepath.Base(p), rest), parent
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", p, err)
	}
	return filepath.Join(real, rest), nil
}

// env points each tool with a cache at its directory under root,
// so that restoring a cache is extracting it there.
func (d *depCaches) env() []string {
	var env []string
	for _, c := range d.entries {
		dir := func(sub string) string { return filepath.Join(d.root, sub) }
		switch c.Name {
		case api.PackageManagerNPM:
			env = append(env, "npm_config_cache="+dir("npm"))
		case api.PackageManagerYarn:
			env = append(env, "YARN_CACHE_FOLDER="+dir("yarn"), "YARN_ENABLE_GLOBAL_CACHE=false")
		case api.PackageManagerPNPM:
			env = append(env, "npm_config_store_dir="+dir("pnpm"))
		case api.PackageManagerBun:
			env = append(env, "BUN_INSTALL_CACHE_DIR="+dir("bun"))
		case "pods":
			env = append(env, "CP_HOME_DIR="+dir("cocoapods"))
		case "gradle":
			env = append(env, "GRADLE_USER_HOME="+dir("gradle"))
		}
	}
	return env
}

// restoredEnv adds to env, after a restore, what makes the tools use the
// restored cache rather than ask the registry: with the lockfile's
// integrity hashes npm and pnpm may take a cached tarball without
// revalidating its metadata (a tarball missing from the cache is still
// downloaded). A value the project set itself is left alone.
func (d *depCaches) restoredEnv(env []string) []string {
	for _, c := range d.entries {
		if c.restored == "" || (c.Name != api.PackageManagerNPM && c.Name != api.PackageManagerPNPM) {
			continue
		}
		if toolchain.EnvValue(env, "npm_config_prefer_offline") == "" {
			env = mergeEnv(env, "npm_config_prefer_offline=true")
		}
	}
	return env
}

// restore extracts the archive shared for each cache into its paths. A
// cache whose archive is unusable is a miss with a warning: the build goes
// on cold. It reports how many caches were restored. The node_modules
// cache waits for the install (restoreModules), and so does the package
// manager's store when node_modules may stand in for the install: a
// restored tree needs no store.
func (d *depCaches) restore(ctx context.Context, share string, mounts []vmshare.CacheMount) int {
	if err := os.MkdirAll(d.root, 0o770); err != nil {
		fmt.Fprintf(d.log, "▸ warning: cannot create the cache directory, building without caches: %v\n", err)
		return 0
	}
	if d.user != nil {
		if err := d.user.share(d.root, 0o770); err != nil {
			fmt.Fprintf(d.log, "▸ warning: %v\n", err)
		}
	}
	if d.clear {
		fmt.Fprintf(d.log, "▸ caches: none restored (--clear-cache); a successful build saves them afresh\n")
		return 0
	}
	for _, c := range d.entries {
		for i := range mounts {
			if mounts[i].Name == c.Name && mounts[i].File == filepath.Base(mounts[i].File) {
				c.shared, c.archive = &mounts[i], filepath.Join(share, mounts[i].File)
			}
		}
	}
	modules := d.modules()
	maybeNoInstall := modules != nil && modules.shared != nil && modules.shared.Key == modules.Key
	restored := 0
	for _, c := range d.entries {
		switch {
		case c.shared == nil:
			fmt.Fprintf(d.log, "▸ cache %s: miss\n", c.Name)
		case c == modules:
			fmt.Fprintf(d.log, "▸ cache %s: found (key %s): checked at the install\n", c.Name, short(c.shared.Key))
		case maybeNoInstall && isStore(c.Name):
			c.deferred = true
			fmt.Fprintf(d.log, "▸ cache %s: found (key %s): restored if the install runs\n", c.Name, short(c.shared.Key))
		default:
			if d.restoreOne(ctx, c) {
				restored++
			}
		}
		if ctx.Err() != nil {
			return restored
		}
	}
	return restored
}

// restoreDeferred restores the caches restore left for the install, which
// runs after all. It reports how many were restored.
func (d *depCaches) restoreDeferred(ctx context.Context) int {
	if d == nil {
		return 0
	}
	restored := 0
	for _, c := range d.entries {
		if c.deferred && ctx.Err() == nil {
			c.deferred = false
			if d.restoreOne(ctx, c) {
				restored++
			}
		}
	}
	return restored
}

// restoreOne extracts the archive shared for c, reporting whether it did.
func (d *depCaches) restoreOne(ctx context.Context, c *depCache) bool {
	start := time.Now()
	n, err := d.extract(ctx, c, c.archive)
	if err != nil {
		if ctx.Err() == nil {
			fmt.Fprintf(d.log, "▸ warning: cache %s: the archive is unusable, building without it: %v\n", c.Name, err)
		}
		return false
	}
	c.restored = c.shared.Key
	how := ""
	if c.shared.Key != c.Key {
		how = ", an older key: it is saved again after the build"
	}
	fmt.Fprintf(d.log, "▸ cache %s: restored (key %s, %s in %s%s)\n", c.Name, short(c.shared.Key), bytesize.SI(n), time.Since(start).Round(time.Millisecond), how)
	return true
}

// isStore: the cache named name is a package manager's store.
func isStore(name string) bool {
	switch name {
	case api.PackageManagerNPM, api.PackageManagerYarn, api.PackageManagerPNPM, api.PackageManagerBun:
		return true
	}
	return false
}

// extract expands the archive of c into a scratch directory, then moves
// each of its trees (0/, 1/, … in the order of c's paths) to its path; a
// path the project already has is left as it is.
func (d *depCaches) extract(ctx context.Context, c *depCache, archive string) (int64, error) {
	stage := filepath.Join(d.work, "cache-restore", c.Name)
	defer os.RemoveAll(stage)
	stats, err := ExtractFile(ctx, archive, stage, cacheLimits)
	if err != nil {
		return 0, err
	}
	for i, dst := range c.paths {
		src := filepath.Join(stage, strconv.Itoa(i))
		if _, err := os.Lstat(src); err != nil {
			continue
		}
		if _, err := os.Lstat(dst); err == nil {
			fmt.Fprintf(d.log, "▸ cache %s: %s exists: left as the project has it\n", c.Name, dst)
			continue
		}
		if native := d.madeByPrebuild(dst); native != "" {
			// expo prebuild would find part of a native project there
			// and not write the whole of it.
			fmt.Fprintf(d.log, "▸ cache %s: %s/ is made by expo prebuild: %s is not restored\n", c.Name, native, dst)
			continue
		}
		if err := c.confined(i); err != nil {
			return 0, err
		}
		if err := d.moveInto(src, dst); err != nil {
			return 0, err
		}
	}
	return stats.Bytes, nil
}

// moveInto moves an extracted tree src to its place dst, writable by the
// build user's tools (Metro writes node_modules/.cache).
func (d *depCaches) moveInto(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o770); err != nil {
		return err
	}
	if err := os.Rename(src, dst); err != nil {
		return err
	}
	if d.user != nil {
		return d.shareWritable(dst)
	}
	return nil
}

// modules is the node_modules cache, nil when the build has none.
func (d *depCaches) modules() *depCache {
	if d == nil {
		return nil
	}
	for _, c := range d.entries {
		if c.Name == api.CacheNodeModules {
			return c
		}
	}
	return nil
}

// modulesStage is the node_modules archive being extracted into a staging
// folder while the build asks its tools for their versions (npm alone takes
// a few hundred milliseconds to say its own).
type modulesStage struct {
	dir   string
	done  chan struct{}
	stats ExtractStats
	err   error
}

// stageModules starts extracting the node_modules archive the worker
// shared under this cache's exact key; nil when there is none (the miss is
// in the log). restoreModules or discard ends it.
func (d *depCaches) stageModules(ctx context.Context) *modulesStage {
	c := d.modules()
	if c == nil || c.shared == nil {
		return nil
	}
	if c.shared.Key != c.Key {
		fmt.Fprintf(d.log, "\n▸ cache node_modules: only an older key (%s) is here: installing\n", short(c.shared.Key))
		return nil
	}
	st := &modulesStage{dir: filepath.Join(d.work, "cache-restore", c.Name), done: make(chan struct{})}
	go func() {
		defer close(st.done)
		st.stats, st.err = ExtractFile(ctx, c.archive, st.dir, cacheLimits)
	}()
	return st
}

// discard waits for the extraction and removes what it left.
func (st *modulesStage) discard() {
	if st != nil {
		<-st.done
		os.RemoveAll(st.dir)
	}
}

// restoreModules restores the node_modules tree staged by stageModules in
// place of the install when its stamp is want and the project has none of
// its paths yet. It returns the key restored, or "" (with the reason in
// the log) when the install must run. want is kept: a tree installed after
// it is saved with it.
func (d *depCaches) restoreModules(st *modulesStage, want modulesStamp) string {
	c := d.modules()
	if c == nil {
		return ""
	}
	c.stamp = &want
	if st == nil {
		return ""
	}
	start := time.Now()
	defer st.discard()
	<-st.done
	stage, stats, err := st.dir, st.stats, st.err
	discard := func(format string, args ...any) string {
		fmt.Fprintf(d.log, "\n▸ warning: cache node_modules: %s: discarded, installing\n", fmt.Sprintf(format, args...))
		return ""
	}
	if err != nil {
		return discard("the archive is unusable: %v", err)
	}
	got, err := readStamp(filepath.Join(stage, stampFile))
	if err != nil {
		return discard("%v", err)
	}
	if got != want {
		return discard("installed with node %s, %s on %s/%s (key %s); this build has node %s, %s on %s/%s (key %s)",
			got.Node, got.PackageManager, got.OS, got.Arch, short(got.Key), want.Node, want.PackageManager, want.OS, want.Arch, short(want.Key))
	}
	if _, err := os.Lstat(filepath.Join(stage, "0")); err != nil {
		return discard("the archive holds no node_modules")
	}
	for i, dst := range c.paths {
		if _, err := os.Lstat(dst); err == nil {
			return discard("the project has %s already", c.Paths[i])
		}
		if err := c.confined(i); err != nil {
			return discard("%v", err)
		}
	}
	for i, dst := range c.paths {
		src := filepath.Join(stage, strconv.Itoa(i))
		if _, err := os.Lstat(src); err != nil {
			continue
		}
		if err := d.moveInto(src, dst); err != nil {
			for _, p := range c.paths[:i+1] {
				os.RemoveAll(p)
			}
			return discard("restore %s: %v", c.Paths[i], err)
		}
	}
	c.restored = c.Key
	fmt.Fprintf(d.log, "\n▸ cache node_modules: restored (key %s, %s, %s after the tools' versions)\n", short(c.Key), bytesize.SI(stats.Bytes), time.Since(start).Round(time.Millisecond))
	return c.Key
}

// installedModules records that the install ran: its tree is saved after
// a successful build.
func (d *depCaches) installedModules() {
	if c := d.modules(); c != nil {
		c.installed = true
	}
}

// readStamp reads a node_modules archive's stamp.
func readStamp(p string) (modulesStamp, error) {
	var s modulesStamp
	data, err := boundedfile.ReadNoFollow(p, 64<<10)
	if errors.Is(err, fs.ErrNotExist) {
		return s, errors.New("the archive has no stamp")
	}
	if err == nil {
		err = json.Unmarshal(data, &s)
	}
	if err != nil {
		return s, fmt.Errorf("the archive's stamp is unreadable: %w", err)
	}
	return s, nil
}

// madeByPrebuild returns "ios" or "android" when p lies under the
// native directory expo prebuild makes in a managed app.
func (d *depCaches) madeByPrebuild(p string) string {
	rel, err := filepath.Rel(d.app, p)
	if err != nil || !filepath.IsLocal(rel) || d.prebuilt == "" {
		return ""
	}
	if first, _, _ := strings.Cut(filepath.ToSlash(rel), "/"); first == d.prebuilt {
		return first
	}
	return ""
}

// shareWritable lets the build user's tools add to a restored cache.
func (d *depCaches) shareWritable(root string) error {
	return filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case e.IsDir():
			return d.user.share(p, 0o770)
		case e.Type().IsRegular():
			info, err := e.Info()
			if err != nil {
				return err
			}
			return d.user.share(p, 0o660|info.Mode().Perm()&0o110)
		}
		return nil
	})
}

// save writes, after a successful build, an archive of each cache whose
// exact key was not restored into vmshare.CacheOutDir in sharedDir and returns them.
// A cache that cannot be saved is a warning: the build succeeded.
func (d *depCaches) save(ctx context.Context, sharedDir string) []vmshare.SavedCache {
	var saved []vmshare.SavedCache
	skipped := d.modules() != nil && d.modules().restored != ""
	for _, c := range d.entries {
		if c.restored == c.Key || ctx.Err() != nil || skipped && isStore(c.Name) {
			continue // no install ran to add to a store
		}
		var stamp []byte
		if c.Name == api.CacheNodeModules {
			if !c.installed || c.stamp == nil {
				continue // no install ran here: nothing new to save
			}
			stamp, _ = json.Marshal(c.stamp)
		}
		start := time.Now()
		file := c.Name + ".tar"
		n, err := writeCacheArchive(filepath.Join(sharedDir, vmshare.CacheOutDir), file, c.paths, stamp)
		switch {
		case errors.Is(err, errNothingToCache):
			fmt.Fprintf(d.log, "▸ cache %s: nothing to save (no %s)\n", c.Name, strings.Join(c.Paths, ", "))
		case err != nil:
			fmt.Fprintf(d.log, "▸ warning: cache %s: not saved: %v\n", c.Name, err)
		default:
			saved = append(saved, vmshare.SavedCache{Name: c.Name, Key: c.Key, File: file})
			fmt.Fprintf(d.log, "▸ cache %s: saved (key %s, %s in %s)\n", c.Name, short(c.Key), bytesize.SI(n), time.Since(start).Round(time.Millisecond))
		}
	}
	return saved
}

var (
	errNothingToCache = errors.New("none of the cache's paths exists")
	errLeavesTree     = errors.New("the tree links outside itself or holds special files, which a restore could not bring back")
)

// writeCacheArchive writes dir/name, atomically, as a tar of each existing
// path i under "i/": directories, regular files and the symbolic links
// that stay inside their tree (the host refuses any other), then stamp as
// stampFile when there is one. It returns the bytes of regular files
// archived.
func writeCacheArchive(dir, name string, paths []string, stamp []byte) (int64, error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, err
	}
	f, err := os.CreateTemp(dir, "."+name+".tmp-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	tw := tar.NewWriter(f)
	var total int64
	any := false
	for i, root := range paths {
		if _, err := os.Stat(root); err != nil {
			continue
		}
		any = true
		n, err := writeTree(tw, root, strconv.Itoa(i), func(p, _ string, info fs.FileInfo, link string) (bool, error) {
			return admitToCache(root, p, info, link, stamp != nil)
		})
		if err != nil {
			return 0, err
		}
		total += n
	}
	if !any {
		return 0, errNothingToCache
	}
	if stamp != nil {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: stampFile, Mode: 0o644, Size: int64(len(stamp)), ModTime: time.Now()}); err != nil {
			return 0, err
		}
		if _, err := tw.Write(stamp); err != nil {
			return 0, err
		}
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return 0, err
	}
	return total, os.Rename(f.Name(), filepath.Join(dir, name))
}

// admitToCache decides on a link or special file p of the tree at root:
// what the host would refuse (links leaving the tree, devices, sockets) is
// left out, or with whole fails the archive: a node_modules tree missing a
// package (npm links a file: dependency to its folder outside
// node_modules) must not stand in for an install.
func admitToCache(root, p string, info fs.FileInfo, link string, whole bool) (bool, error) {
	var why error
	switch {
	case info.Mode()&fs.ModeSymlink == 0:
		why = fmt.Errorf("%w: %s is not a file, directory or link", errLeavesTree, p)
	case filepath.IsAbs(link) || !inside(filepath.Join(filepath.Dir(p), link), root):
		why = fmt.Errorf("%w: %s links to %s", errLeavesTree, p, link)
	default:
		return true, nil
	}
	if whole {
		return false, why
	}
	return false, nil
}

func inside(p, root string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// short is a key as the log shows it.
func short(key string) string {
	if len(key) > 12 {
		return key[:12] + "…"
	}
	return key
}

// versionLine finds a tool's version among its output (npm may warn on
// the same stream).
var versionLine = regexp.MustCompile(`(?m)^v?(\d+\.\d+\.\d+\S*)\s*$`)

// modulesStamp is this VM's stamp for the node_modules cache: the
// versions of node and of the manager the install would run (after
// checkNode and the manager's pinning), as the build runs them.
func (p *pipeline) modulesStamp(ctx context.Context, key string) (modulesStamp, error) {
	version := func(tool string) (string, error) {
		var out strings.Builder
		r := *p.runner
		r.out = &out
		if err := r.run(ctx, p.step(p.tree, tool, "--version")); err != nil {
			return "", fmt.Errorf("%v\n%s", err, out.String())
		}
		m := versionLine.FindStringSubmatch(out.String())
		if m == nil {
			return "", fmt.Errorf("`%s --version` printed no version:\n%s", tool, out.String())
		}
		return m[1], nil
	}
	pm := p.spec.Project.PackageManager
	if pm == "" {
		pm = api.PackageManagerNPM
	}
	node, err := version("node")
	if err != nil {
		return modulesStamp{}, err
	}
	pmVersion, err := version(pm)
	if err != nil {
		return modulesStamp{}, err
	}
	return modulesStamp{Key: key, Node: node, PackageManager: pm + " " + pmVersion, OS: runtime.GOOS, Arch: runtime.GOARCH}, nil
}
