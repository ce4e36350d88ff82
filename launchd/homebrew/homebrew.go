// Package homebrew finds programs Homebrew installed when PATH does not
// lead to them. An app opened from Finder or started by launchd gets
// launchd's PATH, /usr/bin:/bin:/usr/sbin:/sbin, which lacks Homebrew's
// bin folder, where `brew install` puts tart (and the PostgreSQL formulae
// their opt folders). Shared by the worker's tart lookup and
// controller/pgcluster, so both look in the same places.
package homebrew

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// PrefixEnv is Homebrew's own variable for where it is installed
// (`brew shellenv` exports it). When set it is searched first: it covers a
// Homebrew in a non-default place, and tests point it at a fake one.
const PrefixEnv = "HOMEBREW_PREFIX"

// Homebrew's default prefixes: Apple silicon, then Intel.
const (
	AppleSiliconPrefix = "/opt/homebrew"
	IntelPrefix        = "/usr/local"
)

// Prefixes returns where Homebrew may be installed, most specific first:
// $HOMEBREW_PREFIX when set, then the two default prefixes, without
// repeats.
func Prefixes() []string {
	var out []string
	for _, p := range []string{os.Getenv(PrefixEnv), AppleSiliconPrefix, IntelPrefix} {
		if p = filepath.Clean(p); p != "." && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// LookPath finds the executable name as exec.LookPath does and, when PATH
// has none, in the bin folder of each of Prefixes. A name with a slash is
// only checked, never searched for. The error wraps exec.ErrNotFound and
// lists the folders tried.
func LookPath(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil || strings.ContainsRune(name, filepath.Separator) {
		return p, err
	}
	var tried []string
	for _, prefix := range Prefixes() {
		bin := filepath.Join(prefix, "bin")
		if candidate := filepath.Join(bin, name); isExecutable(candidate) {
			return candidate, nil
		}
		tried = append(tried, bin)
	}
	return "", fmt.Errorf("%s is not on PATH (%s) nor in %s: %w", name, os.Getenv("PATH"), strings.Join(tried, ", "), exec.ErrNotFound)
}

// isExecutable: a regular file (after symlinks: Homebrew links its kegs'
// binaries into bin) with an execute bit.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
