// Package toolchain finds the build tools a machine has and their
// versions: what a worker advertises (its VM template's, probed when
// scripts/build-vm-template.sh builds it, or its own host's with the local
// driver), and where freeagent-vm finds the version a build's eas.json
// pins. Both ask the same code, so a worker never advertises a version the
// VM would not find.
package toolchain

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The tools a worker reports, by their eas.json keys.
const (
	Node      = "node"
	Yarn      = "yarn"
	Pnpm      = "pnpm"
	Bun       = "bun"
	Cocoapods = "cocoapods"
	Bundler   = "bundler"
	Fastlane  = "fastlane"
	NDK       = "ndk"
)

// Names are the tools Probe looks for, in a stable order.
var Names = []string{Node, Yarn, Pnpm, Bun, Cocoapods, Bundler, Fastlane, NDK}

// MaxVersions bounds the versions of one tool a worker reports.
const MaxVersions = 32

// NodeDirPatterns are where a machine keeps its Node.js versions besides
// the node on PATH, as globs of bin directories: nvm's (NVM_DIR, else
// ~/.nvm) and Homebrew's versioned kegs (brew install node@22 node@24:
// keg-only, so off PATH unless linked) and its unversioned node, under
// HOMEBREW_PREFIX when the environment has it (brew shellenv sets it), else
// under both of Homebrew's default prefixes. scripts/build-vm-template.sh
// installs Homebrew kegs; an image may bring nvm's.
func NodeDirPatterns(env []string) []string {
	nvm := EnvValue(env, "NVM_DIR")
	if nvm == "" {
		if home := EnvValue(env, "HOME"); home != "" {
			nvm = filepath.Join(home, ".nvm")
		}
	}
	var out []string
	if nvm != "" {
		out = append(out, filepath.Join(nvm, "versions", "node", "v*", "bin"))
	}
	prefixes := []string{"/opt/homebrew", "/usr/local"} // Apple silicon's, Intel's
	if brew := EnvValue(env, "HOMEBREW_PREFIX"); brew != "" {
		prefixes = []string{brew} // set by `brew shellenv`
	}
	for _, prefix := range prefixes {
		out = append(out, filepath.Join(prefix, "opt", "node@*", "bin"), filepath.Join(prefix, "opt", "node", "bin"))
	}
	return out
}

// NodeDirs lists the existing bin directories of NodeDirPatterns that hold
// a node, each once (Homebrew's opt/node is often a link to a node@N).
func NodeDirs(env []string) []string {
	var dirs, seen []string
	for _, pat := range NodeDirPatterns(env) {
		matches, _ := filepath.Glob(pat)
		for _, dir := range matches {
			real, err := filepath.EvalSymlinks(filepath.Join(dir, "node"))
			if err != nil || slices.Contains(seen, real) {
				continue
			}
			seen = append(seen, real)
			dirs = append(dirs, dir)
		}
	}
	return dirs
}

// NodeInstall is one installed Node.js: its version and its bin directory.
type NodeInstall struct {
	Version, Dir string
}

// Nodes lists the machine's Node.js versions: the node on env's PATH
// first, then those of NodeDirs, one entry per distinct binary.
func Nodes(ctx context.Context, env []string) []NodeInstall {
	var out []NodeInstall
	var seen []string
	add := func(bin string) {
		real, err := filepath.EvalSymlinks(bin)
		if err != nil || slices.Contains(seen, real) {
			return
		}
		seen = append(seen, real)
		if v, err := Version(ctx, bin, "--version"); err == nil {
			out = append(out, NodeInstall{Version: v, Dir: filepath.Dir(bin)})
		}
	}
	if bin, err := LookPath("node", env); err == nil {
		add(bin)
	}
	for _, dir := range NodeDirs(env) {
		add(filepath.Join(dir, "node"))
	}
	return out
}

// NDKs maps each Android NDK version under the SDK (ANDROID_HOME, else
// ANDROID_SDK_ROOT) to its directory: sdkmanager installs them as
// ndk/<version>.
func NDKs(env []string) map[string]string {
	sdk := EnvValue(env, "ANDROID_HOME")
	if sdk == "" {
		sdk = EnvValue(env, "ANDROID_SDK_ROOT")
	}
	out := map[string]string{}
	if sdk == "" {
		return out
	}
	entries, _ := os.ReadDir(filepath.Join(sdk, "ndk"))
	for _, e := range entries {
		if versionRe.MatchString(e.Name()) && e.IsDir() {
			out[e.Name()] = filepath.Join(sdk, "ndk", e.Name())
		}
	}
	return out
}

// versionRe finds a dotted version in a tool's output ("Bundler version
// 2.5.11", "fastlane 2.226.0", "1.16.2").
var versionRe = regexp.MustCompile(`^v?[0-9]+(\.[0-9]+)+$`)

// Version runs bin with args and returns the first dotted version its
// output names, without a "v".
func Version(ctx context.Context, bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).Output()
	if err != nil {
		return "", fmt.Errorf("run %s %s: %w", bin, strings.Join(args, " "), err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Split(bufio.ScanWords)
	for sc.Scan() {
		if w := sc.Text(); versionRe.MatchString(w) {
			return strings.TrimPrefix(w, "v"), nil
		}
	}
	return "", fmt.Errorf("%s %s printed no version", bin, strings.Join(args, " "))
}

// versionArgs is how each tool on PATH says its version (Node.js and the
// NDK are found by Nodes and NDKs).
var versionArgs = map[string][]string{
	Yarn: {"yarn", "--version"}, Pnpm: {"pnpm", "--version"}, Bun: {"bun", "--version"},
	Cocoapods: {"pod", "--version"}, Bundler: {"bundle", "--version"}, Fastlane: {"fastlane", "--version"},
}

// Probe reports the versions of each tool of Names the machine has in
// env, sorted, newest first; a tool it lacks is absent.
func Probe(ctx context.Context, env []string) map[string][]string {
	out := map[string][]string{}
	add := func(name, v string) {
		if !slices.Contains(out[name], v) && len(out[name]) < MaxVersions {
			out[name] = append(out[name], v)
		}
	}
	for _, n := range Nodes(ctx, env) {
		add(Node, n.Version)
	}
	for v := range NDKs(env) {
		add(NDK, v)
	}
	for name, argv := range versionArgs {
		bin, err := LookPath(argv[0], env)
		if err != nil {
			continue
		}
		if v, err := Version(ctx, bin, argv[1:]...); err == nil {
			add(name, v)
		}
	}
	for name := range out {
		slices.SortFunc(out[name], func(a, b string) int { return CmpVersions(b, a) })
	}
	return out
}

// CmpVersions orders dotted versions numerically ("22.9.0" < "22.10.0").
func CmpVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, errX := strconv.Atoi(as[i])
		y, errY := strconv.Atoi(bs[i])
		if errX != nil || errY != nil {
			if c := strings.Compare(as[i], bs[i]); c != 0 {
				return c
			}
			continue
		}
		if x != y {
			return x - y
		}
	}
	return len(as) - len(bs)
}

// LookPath finds an executable named name in env's PATH (absolute
// directories only).
func LookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(EnvValue(env, "PATH")) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q: %w in the build's PATH", name, exec.ErrNotFound)
}

// EnvValue is the value of name in env (the last entry wins), or "".
func EnvValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if s, ok := strings.CutPrefix(kv, name+"="); ok {
			v = s
		}
	}
	return v
}
