package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/freeagent-build/freeagent/launchd/homebrew"
)

// ErrNoBinaries is wrapped by the error FindBinDir (and Start) return when no
// PostgreSQL server binaries can be found. Callers test for it with errors.Is
// to add what installs them where they are (pgtest names the tests' script).
var ErrNoBinaries = errors.New("no PostgreSQL server binaries (initdb, postgres) found")

// installHint is appended to ErrNoBinaries so that the very first error a new
// developer sees tells them exactly what to install.
const installHint = "install them: Debian/Ubuntu `sudo apt-get install -y postgresql`, " +
	"macOS `brew install postgresql@16` (or Postgres.app), " +
	"or set DATABASE_URL to an existing server"

// FindBinDir returns the directory holding the PostgreSQL server binaries
// (initdb and postgres). It looks, in order, at:
//
//   - the directories of PATH (so an explicit choice by the user wins),
//   - /usr/lib/postgresql/*/bin (Debian/Ubuntu; the server is not on PATH there),
//   - PREFIX/opt/postgresql@*/bin for each Homebrew prefix
//     (homebrew.Prefixes: $HOMEBREW_PREFIX, /opt/homebrew on Apple
//     silicon, /usr/local on Intel; versioned formulae are keg-only),
//   - /Applications/Postgres.app/Contents/Versions/latest/bin,
//
// taking the highest version where a pattern matches several.
func FindBinDir() (string, error) {
	return findBinDir(candidateDirs(os.Getenv("PATH"), ""))
}

// findBinDir returns the first of dirs that holds both initdb and postgres.
// It takes the candidates as an argument so tests can exercise the search and
// its error without touching the real PATH or file system.
func findBinDir(dirs []string) (string, error) {
	for _, d := range dirs {
		if hasServerBinaries(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w in PATH or the usual install locations; %s", ErrNoBinaries, installHint)
}

// candidateDirs lists the directories FindBinDir searches, in order. root
// prefixes the absolute, well-known locations ("" in production; a temp dir
// in tests).
func candidateDirs(pathEnv, root string) []string {
	var dirs []string
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "." // an empty PATH element means the current directory, as for the shell
		}
		dirs = append(dirs, d)
	}
	patterns := []string{"/usr/lib/postgresql/*/bin"}
	for _, prefix := range homebrew.Prefixes() {
		patterns = append(patterns, filepath.Join(prefix, "opt", "postgresql@*", "bin"))
	}
	for _, pattern := range patterns {
		matches, _ := filepath.Glob(filepath.Join(root, pattern)) // only ErrBadPattern, and the patterns are constant
		sortByVersionDesc(matches)
		dirs = append(dirs, matches...)
	}
	return append(dirs, filepath.Join(root, "/Applications/Postgres.app/Contents/Versions/latest/bin"))
}

// hasServerBinaries reports whether dir holds executable initdb and postgres.
// Both are required: Debian's /usr/bin, for instance, has client wrappers
// (psql, pg_ctlcluster) but not the server.
func hasServerBinaries(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name)) // Stat, not Lstat: /usr/local/bin often holds symlinks
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// sortByVersionDesc orders .../<version>/bin and .../postgresql@<version>/bin
// paths by numeric version, highest first, so that 16 beats 9.6 (which a
// string sort would get wrong).
func sortByVersionDesc(dirs []string) {
	sort.SliceStable(dirs, func(i, j int) bool {
		return versionLess(dirVersion(dirs[j]), dirVersion(dirs[i]))
	})
}

// dirVersion extracts the version numbers from the parent of a bin dir:
// "/usr/lib/postgresql/15/bin" → [15], ".../postgresql@9.6/bin" → [9 6].
// Unparseable versions give nil, which sorts lowest.
func dirVersion(binDir string) []int {
	name := filepath.Base(filepath.Dir(binDir))
	if i := strings.LastIndexByte(name, '@'); i >= 0 {
		name = name[i+1:]
	}
	var v []int
	for _, part := range strings.Split(name, ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			return nil
		}
		v = append(v, n)
	}
	return v
}

func versionLess(a, b []int) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return len(a) < len(b)
}
