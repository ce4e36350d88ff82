package vmbootstrap

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// nodeDirPatterns are where a VM template keeps its Node.js versions, as
// globs of bin directories: nvm's (NVM_DIR, else ~/.nvm) and Homebrew's
// versioned kegs (brew install node@22 node@24: keg-only, so off PATH
// unless linked) and its unversioned node, under HOMEBREW_PREFIX when the
// environment has it (brew shellenv sets it), else under both of Homebrew's
// default prefixes. scripts/build-vm-template.sh
// installs Homebrew kegs; an image may bring nvm's.
func nodeDirPatterns(env []string) []string {
	nvm := envValue(env, "NVM_DIR")
	if nvm == "" {
		if home := envValue(env, "HOME"); home != "" {
			nvm = filepath.Join(home, ".nvm")
		}
	}
	var out []string
	if nvm != "" {
		out = append(out, filepath.Join(nvm, "versions", "node", "v*", "bin"))
	}
	prefixes := []string{"/opt/homebrew", "/usr/local"} // Apple silicon's, Intel's
	if brew := envValue(env, "HOMEBREW_PREFIX"); brew != "" {
		prefixes = []string{brew} // set by `brew shellenv`
	}
	for _, prefix := range prefixes {
		out = append(out, filepath.Join(prefix, "opt", "node@*", "bin"), filepath.Join(prefix, "opt", "node", "bin"))
	}
	return out
}

// nodeDirs lists the existing bin directories of nodeDirPatterns that hold
// a node, each once (Homebrew's opt/node is often a link to a node@N).
func nodeDirs(env []string) []string {
	var dirs, seen []string
	for _, pat := range nodeDirPatterns(env) {
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

// nodeVersion runs `node --version` and returns it without the "v".
func nodeVersion(ctx context.Context, bin string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("run %s --version: %w", bin, err)
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), nil
}

// nodeMatches: eas.json's node names a version exactly ("20.11.1") or by
// its leading components ("20", "20.11"), as nvm resolves it.
func nodeMatches(want, have string) bool {
	return have == want || strings.HasPrefix(have, want+".")
}

// cmpVersions orders dotted versions numerically ("22.9.0" < "22.10.0").
func cmpVersions(a, b string) int {
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

// envValue is the value of name in env (the last entry wins, as mergeEnv
// leaves one), or "".
func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if s, ok := strings.CutPrefix(kv, name+"="); ok {
			v = s
		}
	}
	return v
}
