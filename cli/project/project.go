// Package project decides, on the developer's machine and once, how an
// Expo app's source is laid out and installed: which directory is the
// workspace root to upload (the monorepo's root, or the app itself), where
// the app sits inside it, and which package manager installs it, in which
// version, from which lockfile. The VM applies the answer (api.Project)
// and never decides again.
//
// The rules are EAS Build's: the workspace root as @expo/package-manager's
// resolveWorkspaceRoot finds it, and the manager from the lockfiles at that
// root in EAS's order (bun, yarn, npm, pnpm). Where EAS guesses silently,
// Detect refuses with the fix instead: two managers' lockfiles and no
// packageManager field to choose, or a packageManager field that
// contradicts the only lockfile (EAS would install with the lockfile's
// manager, and the build would not be the one the developer runs).
package project

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/freeagent-build/freeagent/api"
)

// Options are the build profile's package-manager settings (eas.json's
// corepack, yarn, pnpm and bun).
type Options struct {
	// Corepack is the profile's corepack; nil when the profile is silent
	// (then a packageManager field in package.json turns it on).
	Corepack *bool
	// Yarn, Pnpm and Bun are the versions the profile pins, "" for none.
	Yarn, Pnpm, Bun string
}

// Layout is what Detect found.
type Layout struct {
	// WorkspaceRoot is the absolute directory to upload (symbolic links
	// resolved): the workspace root, or the app directory itself.
	WorkspaceRoot string
	// Project is the decision the VM applies.
	Project api.Project
}

// lockfile is one lockfile name and the manager it belongs to, in EAS's
// resolution order (a manager with two names lists its preferred first).
type lockfile struct{ name, manager string }

var lockfiles = []lockfile{
	{"bun.lock", api.PackageManagerBun},
	{"bun.lockb", api.PackageManagerBun},
	{"yarn.lock", api.PackageManagerYarn},
	{"npm-shrinkwrap.json", api.PackageManagerNPM}, // npm ci prefers it to package-lock.json
	{"package-lock.json", api.PackageManagerNPM},
	{"pnpm-lock.yaml", api.PackageManagerPNPM},
}

// Detect decides the layout of the app in appDir (its package.json
// directory).
func Detect(appDir string, opts Options) (Layout, error) {
	app, err := filepath.Abs(appDir)
	if err != nil {
		return Layout{}, fmt.Errorf("resolve %s: %w", appDir, err)
	}
	if app, err = filepath.EvalSymlinks(app); err != nil {
		return Layout{}, fmt.Errorf("resolve %s: %w", appDir, err)
	}
	if _, err := os.Stat(filepath.Join(app, "package.json")); err != nil {
		return Layout{}, fmt.Errorf("%s has no package.json (%w); run expo-build in the app's directory or pass it", app, err)
	}
	root, workspace, err := workspaceRoot(app)
	if err != nil {
		return Layout{}, err
	}
	rel, err := filepath.Rel(root, app)
	if err != nil {
		return Layout{}, fmt.Errorf("place %s in %s: %w", app, root, err)
	}
	if rel == "." {
		rel = ""
	}
	p := api.Project{AppDir: filepath.ToSlash(rel), Workspace: workspace}
	if err := decideManager(&p, root, app, opts); err != nil {
		return Layout{}, err
	}
	return Layout{WorkspaceRoot: root, Project: p}, nil
}

// packageManagerField is package.json's packageManager ("yarn@4.1.0+sha512.…").
type packageManagerField struct{ name, version string }

func (f packageManagerField) String() string { return f.name + "@" + f.version }

func readPackageManagerField(root string) (packageManagerField, error) {
	name := filepath.Join(root, "package.json")
	data, err := readManifest(name)
	if err != nil || data == nil {
		return packageManagerField{}, err
	}
	var doc struct {
		PackageManager *string `json:"packageManager"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return packageManagerField{}, fmt.Errorf("%s is not valid JSON: %w", name, err)
	}
	if doc.PackageManager == nil {
		return packageManagerField{}, nil
	}
	spec := *doc.PackageManager
	mgr, version, ok := strings.Cut(spec, "@")
	version, _, _ = strings.Cut(version, "+") // the hash corepack checks
	switch {
	case !ok || version == "":
		return packageManagerField{}, fmt.Errorf(`%s: packageManager %q has no version; write it as "yarn@4.1.0" (name@version)`, name, spec)
	case mgr != api.PackageManagerNPM && mgr != api.PackageManagerYarn && mgr != api.PackageManagerPNPM && mgr != api.PackageManagerBun:
		return packageManagerField{}, fmt.Errorf("%s: packageManager %q names %q; expo-build supports npm, yarn, pnpm and bun", name, spec, mgr)
	}
	return packageManagerField{mgr, version}, nil
}

// decideManager fills p's manager fields from the lockfiles at root, its
// package.json and the profile.
func decideManager(p *api.Project, root, app string, opts Options) error {
	field, err := readPackageManagerField(root)
	if err != nil {
		return err
	}
	var found []lockfile // the first lockfile of each manager present
	var names []string
	for _, l := range lockfiles {
		st, err := os.Stat(filepath.Join(root, l.name))
		if err != nil || st.IsDir() {
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("look for %s: %w", l.name, err)
			}
			continue
		}
		names = append(names, l.name)
		if len(found) == 0 || found[len(found)-1].manager != l.manager {
			found = append(found, l)
		}
	}
	where := root
	if p.AppDir != "" {
		where = root + " (the workspace root of " + p.AppDir + ")"
	}
	switch {
	case len(found) == 0:
		p.PackageManager = api.PackageManagerNPM
		if field.name != "" {
			p.PackageManager = field.name
		}
	case len(found) == 1:
		if field.name != "" && field.name != found[0].manager {
			return fmt.Errorf("package.json in %s says packageManager %s but the only lockfile is %s (%s's): "+
				"install with %s and commit its lockfile, or set packageManager to the %s you use",
				where, field, found[0].name, found[0].manager, field.name, found[0].manager)
		}
		p.PackageManager, p.Lockfile = found[0].manager, found[0].name
	default:
		i := -1
		for j, l := range found {
			if l.manager == field.name {
				i = j
			}
		}
		if i < 0 {
			hint := `set packageManager in package.json (e.g. "yarn@1.22.22")`
			if field.name != "" {
				hint = fmt.Sprintf("packageManager says %s, which has no lockfile here", field)
			}
			return fmt.Errorf("%s holds the lockfiles of several package managers (%s) and expo-build cannot tell which one the project uses: "+
				"delete the stale ones, or %s", where, strings.Join(names, ", "), hint)
		}
		p.PackageManager, p.Lockfile = found[i].manager, found[i].name
	}

	profileVersion := map[string]string{
		api.PackageManagerYarn: opts.Yarn,
		api.PackageManagerPNPM: opts.Pnpm,
		api.PackageManagerBun:  opts.Bun,
	}[p.PackageManager]
	p.PackageManagerVersion = profileVersion
	if field.name == p.PackageManager {
		if profileVersion != "" && profileVersion != field.version {
			return fmt.Errorf("the build profile pins %s %s but package.json's packageManager is %s: "+
				"remove %q from the profile in eas.json, or change packageManager", p.PackageManager, profileVersion, field, p.PackageManager)
		}
		p.PackageManagerVersion = field.version
	}
	p.Corepack = field.name != ""
	if opts.Corepack != nil {
		p.Corepack = *opts.Corepack
	}
	if p.PackageManager == api.PackageManagerYarn {
		berry, err := yarnBerry(root, app, p.PackageManagerVersion, p.Lockfile)
		if err != nil {
			return err
		}
		p.YarnBerry = berry
	}
	return nil
}

// yarnBerry decides between Yarn classic and Yarn 2+ as EAS Build does (a
// .yarnrc.yml in the app or at the root, or a yarn.lock that is not a v1
// lockfile, means Yarn 2+) and, when a version is pinned, by its major
// version too. A pinned version that cannot read the lockfile is an error:
// a frozen install would fail in the VM.
func yarnBerry(root, app, version, lock string) (bool, error) {
	yarnrc := false
	for _, dir := range []string{app, root} {
		if _, err := os.Stat(filepath.Join(dir, ".yarnrc.yml")); err == nil {
			yarnrc = true
		}
	}
	eas := yarnrc
	lockV1, lockBerry := false, false
	if lock != "" {
		head, err := readHead(filepath.Join(root, lock), 100)
		if err != nil {
			return false, err
		}
		lockV1 = strings.Contains(strings.ToLower(head), "yarn lockfile v1")
		lockBerry = !lockV1
		eas = eas || lockBerry
	}
	if version == "" {
		return eas, nil
	}
	major, err := strconv.Atoi(strings.SplitN(strings.TrimLeft(version, "v^~="), ".", 2)[0])
	if err != nil {
		return false, fmt.Errorf("yarn version %q is not a version number; pin it as 1.22.22 or 4.1.0", version)
	}
	switch {
	case major >= 2 && lockV1:
		return false, fmt.Errorf("yarn %s is pinned but %s is a Yarn 1 lockfile, which Yarn %d rewrites (a frozen install fails): "+
			"run `yarn install` with Yarn %d and commit %s, or pin Yarn 1", version, lock, major, major, lock)
	case major < 2 && lockBerry && !yarnrc: // with .yarnrc.yml, its yarnPath may name Yarn 2+
		return false, fmt.Errorf("yarn %s is pinned but %s was written by Yarn 2 or later: pin the Yarn version that wrote it (packageManager in package.json)", version, lock)
	}
	return eas || major >= 2, nil
}

// readHead reads up to the first n bytes of a file.
func readHead(name string, n int) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", name, err)
	}
	defer f.Close()
	buf := make([]byte, n)
	k, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", fmt.Errorf("read %s: %w", name, err)
	}
	return string(buf[:k]), nil
}
