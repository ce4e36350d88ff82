package project

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/freeagent-build/freeagent/internal/braces"
)

// maxManifestBytes bounds what is read of a package.json or
// pnpm-workspace.yaml: manifests are small, and an ancestor directory is
// not ours to trust.
const maxManifestBytes = 4 << 20

// workspaceRoot finds the workspace root of appDir (absolute, clean) as
// resolve-workspace-root (what @expo/package-manager and EAS Build use)
// does: from appDir up to the file system root, the first directory whose
// pnpm-workspace.yaml `packages`, else whose package.json `workspaces`
// (an array, or an object's `packages` array) includes appDir's path
// relative to it. A directory includes itself as soon as it declares
// workspaces at all. found is false when no directory does: the app dir is
// then its own root.
//
// As there, a manifest that does not parse (bad JSON or YAML) is passed
// over; a file that cannot be read for another reason is an error.
func workspaceRoot(appDir string) (root string, found bool, err error) {
	for dir := appDir; ; {
		rel, err := filepath.Rel(dir, appDir)
		if err != nil {
			return "", false, fmt.Errorf("find the workspace root of %s: %w", appDir, err)
		}
		if rel == "." {
			rel = ""
		}
		rel = filepath.ToSlash(rel)
		for _, read := range []func(string) ([]string, bool, error){pnpmWorkspaceGlobs, packageWorkspaceGlobs} {
			globs, ok, err := read(dir)
			if err != nil {
				return "", false, err
			}
			if !ok {
				continue
			}
			match, err := matchWorkspaceGlobs(globs, rel)
			if err != nil {
				return "", false, err
			}
			if match {
				return dir, true, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return appDir, false, nil
		}
		dir = parent
	}
}

// readManifest reads a small file; a missing file or a directory in its
// place is (nil, nil), as resolve-workspace-root treats ENOENT and EISDIR.
func readManifest(name string) ([]byte, error) {
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, nil
	}
	data, err := io.ReadAll(io.LimitReader(f, maxManifestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > maxManifestBytes {
		return nil, fmt.Errorf("read %s: larger than %d bytes; is it really a manifest?", name, maxManifestBytes)
	}
	return data, nil
}

// pnpmWorkspaceGlobs returns dir/pnpm-workspace.yaml's packages; ok is
// false when the file is absent, does not parse, or has no packages list.
func pnpmWorkspaceGlobs(dir string) ([]string, bool, error) {
	name := filepath.Join(dir, "pnpm-workspace.yaml")
	data, err := readManifest(name)
	if err != nil || data == nil {
		return nil, false, err
	}
	var doc struct {
		Packages any `yaml:"packages"`
	}
	if yaml.Unmarshal(data, &doc) != nil {
		return nil, false, nil
	}
	return globList(name, doc.Packages)
}

// packageWorkspaceGlobs returns dir/package.json's workspaces (npm, Yarn and
// Bun spell them the same way).
func packageWorkspaceGlobs(dir string) ([]string, bool, error) {
	name := filepath.Join(dir, "package.json")
	data, err := readManifest(name)
	if err != nil || data == nil {
		return nil, false, err
	}
	var doc struct {
		Workspaces any `json:"workspaces"`
	}
	if json.Unmarshal(data, &doc) != nil {
		return nil, false, nil
	}
	if obj, ok := doc.Workspaces.(map[string]any); ok {
		return globList(name, obj["packages"])
	}
	return globList(name, doc.Workspaces)
}

// globList accepts a list of strings; any other list is an error (the
// oracle would stringify the entries: no real workspace list has them).
func globList(source string, v any) ([]string, bool, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, false, nil
	}
	globs := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, false, fmt.Errorf("%s: workspace entry %v is not a string; write each workspace as a quoted glob such as \"apps/*\"", source, e)
		}
		globs = append(globs, s)
	}
	return globs, true, nil
}

// matchWorkspaceGlobs reports whether rel (slash-separated, "" for the
// directory itself) is one of the workspaces, with micromatch's rules for
// a list: the last pattern that matches decides (a negated one excludes),
// nothing matches when no positive pattern does, and a list made only of
// negations starts from everything.
func matchWorkspaceGlobs(globs []string, rel string) (bool, error) {
	if rel == "" {
		return true, nil
	}
	segs := strings.Split(rel, "/")
	kept, excluded, negations := false, false, 0
	for _, g := range globs {
		neg, alts, err := compileGlob(g)
		if err != nil {
			return false, err
		}
		if neg {
			negations++
		}
		if !slices.ContainsFunc(alts, func(a []string) bool { return matchSegments(a, segs) }) {
			continue
		}
		excluded = neg
		kept = kept || !neg
	}
	if len(globs) > 0 && negations == len(globs) {
		kept = true
	}
	return kept && !excluded, nil
}

// compileGlob turns one workspace glob into its alternatives (braces
// expanded), each a list of segments. Supported: literal names, "*" and
// "?" within a segment, "**" as a whole segment, {a,b} alternatives, a
// leading "./", and leading "!"s (an odd number negates). Bracket classes,
// extglobs, brace ranges and escapes are refused rather than guessed.
func compileGlob(g string) (neg bool, alts [][]string, err error) {
	if g == "" {
		return false, nil, errors.New("a workspace glob is empty; remove the empty entry from the workspaces list")
	}
	for strings.HasPrefix(g, "!") {
		neg = !neg
		g = g[1:]
	}
	if i := strings.IndexAny(g, `[]\`); i >= 0 {
		return false, nil, fmt.Errorf("workspace glob %q uses %q, which expo-build does not interpret; list the workspaces with *, ** and {a,b} only", g, g[i:i+1])
	}
	for _, ext := range []string{"+(", "@(", "!(", "*(", "?("} {
		if strings.Contains(g, ext) {
			return false, nil, fmt.Errorf("workspace glob %q uses an extended glob %q, which expo-build does not interpret; list the workspaces with *, ** and {a,b} only", g, ext)
		}
	}
	if braceRange.MatchString(g) {
		return false, nil, fmt.Errorf("workspace glob %q uses a brace range, which expo-build does not interpret; list the workspaces with *, ** and {a,b} only", g)
	}
	expanded, err := braces.Expand(g, maxBraceExpansions)
	if err != nil {
		return false, nil, fmt.Errorf("workspace glob: %w", err)
	}
	for _, e := range expanded {
		e = strings.TrimPrefix(e, "./")
		var segs []string
		for s := range strings.SplitSeq(e, "/") {
			if s == "**" && len(segs) > 0 && segs[len(segs)-1] == "**" {
				continue
			}
			segs = append(segs, s)
		}
		alts = append(alts, segs)
	}
	return neg, alts, nil
}

// maxBraceExpansions bounds {a,b}{c,d}… so a hostile manifest cannot
// make the expansion explode.
const maxBraceExpansions = 1024

// braceRange is a {1..3} group, which micromatch expands and expo-build
// does not.
var braceRange = regexp.MustCompile(`\{[^{},]*\.\.[^{},]*\}`)

// matchSegments matches path segments against pattern segments: "**"
// spans any number of segments (at least one when it ends the pattern), a
// segment starting with "." is matched only by a pattern segment that
// starts with "." too (micromatch without its dot option), and a trailing
// "**" after a literal segment also matches that segment alone ("apps/**"
// includes apps, "*/**" does not include a single name), as micromatch does.
func matchSegments(pat, name []string) bool {
	switch {
	case len(pat) == 0:
		return len(name) == 0
	case pat[0] == "**":
		if len(pat) == 1 && len(name) == 0 {
			return false
		}
		for i := 0; i <= len(name); i++ {
			if matchSegments(pat[1:], name[i:]) {
				return true
			}
			if i < len(name) && strings.HasPrefix(name[i], ".") {
				return false
			}
		}
		return false
	case len(name) == 0:
		return false
	}
	if !matchSegment(pat[0], name[0]) {
		return false
	}
	if len(name) == 1 && len(pat) == 2 && pat[1] == "**" && isLiteral(pat[0]) {
		return true
	}
	return matchSegments(pat[1:], name[1:])
}

func isLiteral(seg string) bool { return !strings.ContainsAny(seg, "*?") }

// matchSegment matches one segment with "*" and "?".
func matchSegment(pat, name string) bool {
	if strings.HasPrefix(name, ".") && !strings.HasPrefix(pat, ".") {
		return false
	}
	if name == "" {
		return pat == ""
	}
	// Iterative wildcard match with backtracking on the last "*".
	p, n, star, mark := 0, 0, -1, 0
	for n < len(name) {
		switch {
		case p < len(pat) && (pat[p] == '?' || pat[p] == name[n]):
			p++
			n++
		case p < len(pat) && pat[p] == '*':
			star, mark = p, n
			p++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pat) && pat[p] == '*' {
		p++
	}
	return p == len(pat)
}
