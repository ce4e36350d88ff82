package vmbootstrap

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/freeagent-build/freeagent/internal/braces"
)

// maxBraceExpansions bounds what one pattern may expand to.
const maxBraceExpansions = 64

// globFiles returns the regular files under dir matching any of patterns
// (relative to dir, forward slashes), sorted and without duplicates, the
// way EAS finds artifacts (fast-glob): "*", "?" and "[…]" within a path
// element, "**" for any number of directories, "{a,b}" alternatives.
// Symlinks are neither followed nor returned, hidden files only match a
// pattern that names them, and nothing outside dir is ever matched.
func globFiles(dir string, patterns []string) ([]string, error) {
	return globPaths(dir, patterns, false)
}

// globPaths is globFiles that, withDirs, also returns the directories
// that match (and then not what they hold): an iOS .app is a directory.
func globPaths(dir string, patterns []string, withDirs bool) ([]string, error) {
	var split [][]string
	for _, p := range patterns {
		// An unclosed "{" would be literal; in an artifact path it is a typo.
		if strings.Count(p, "{") != strings.Count(p, "}") {
			return nil, fmt.Errorf("artifact pattern %q: unbalanced { }", p)
		}
		expanded, err := braces.Expand(p, maxBraceExpansions)
		if err != nil {
			return nil, fmt.Errorf("artifact pattern %q: %w", p, err)
		}
		for _, e := range expanded {
			e = path.Clean(strings.TrimPrefix(filepath.ToSlash(e), "./"))
			if e == "." || e == ".." || strings.HasPrefix(e, "../") || path.IsAbs(e) {
				return nil, fmt.Errorf("artifact pattern %q leaves the project", p)
			}
			parts := strings.Split(e, "/")
			for _, part := range parts {
				if _, err := path.Match(part, ""); err != nil {
					return nil, fmt.Errorf("artifact pattern %q: %w", p, err)
				}
			}
			split = append(split, parts)
		}
	}
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		isDir := d.IsDir()
		if p == dir || !d.Type().IsRegular() && !(withDirs && isDir) {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		elems := strings.Split(filepath.ToSlash(rel), "/")
		for _, pat := range split {
			if matchElems(pat, elems) {
				out = append(out, p)
				if isDir {
					return fs.SkipDir
				}
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("look for artifacts: %w", err)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// matchElems matches path elements against pattern elements.
func matchElems(pat, elems []string) bool {
	if len(pat) == 0 {
		return len(elems) == 0
	}
	if pat[0] == "**" {
		for i := 0; i <= len(elems); i++ {
			if i > 0 && strings.HasPrefix(elems[i-1], ".") {
				return false // "**" does not enter hidden directories
			}
			if matchElems(pat[1:], elems[i:]) {
				return true
			}
		}
		return false
	}
	if len(elems) == 0 {
		return false
	}
	if strings.HasPrefix(elems[0], ".") && !strings.HasPrefix(pat[0], ".") {
		return false
	}
	ok, _ := path.Match(pat[0], elems[0])
	return ok && matchElems(pat[1:], elems[1:])
}
