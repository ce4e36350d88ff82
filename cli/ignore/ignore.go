// Package ignore implements .gitignore pattern matching (the subset of git's
// rules that matters for choosing which files of a project to upload):
// comments, escapes, negation with "!", directory-only patterns ending in
// "/", patterns anchored by a slash at their start or middle, "*", "?",
// bracket classes, and "**" as a leading, trailing or middle path segment.
//
// Patterns are evaluated in order and the last one that matches a path wins.
// As in git, a path inside an excluded directory cannot be re-included: a
// walker must stop descending into a directory once it is excluded (Matcher
// does this for whole paths with IgnoredPath).
package ignore

import (
	"bufio"
	"bytes"
	"fmt"
	"path"
	"strings"
)

// Pattern is one compiled line of an ignore file.
type Pattern struct {
	Source  string // where it came from, e.g. ".gitignore:3", for messages
	Raw     string // the line as written
	base    string // directory (slash-separated, relative to the root) whose file holds the pattern; "" for the root
	negate  bool
	dirOnly bool
	segs    []string // path segments; "**" matches any number of segments
}

// Negated reports whether the pattern re-includes what it matches.
func (p Pattern) Negated() bool { return p.negate }

// Parse compiles the lines of an ignore file that lives in directory base
// (slash-separated, relative to the project root, "" for the root). Lines
// that cannot be compiled (a malformed bracket expression) are skipped and
// described in warnings.
func Parse(base string, data []byte, source string) (pats []Pattern, warnings []string) {
	base = strings.Trim(path.Clean("/"+base), "/")
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		p, ok, err := Compile(sc.Text())
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s:%d: %v (line ignored)", source, n, err))
			continue
		}
		if !ok {
			continue
		}
		p.base, p.Source = base, fmt.Sprintf("%s:%d", source, n)
		pats = append(pats, p)
	}
	return pats, warnings
}

// Compile compiles one line relative to the root. ok is false for blank
// lines and comments.
func Compile(line string) (p Pattern, ok bool, err error) {
	p.Raw = line
	line = strings.TrimSuffix(line, "\r")
	line = trimTrailingSpaces(line)
	if line == "" || line[0] == '#' {
		return p, false, nil
	}
	if line[0] == '!' {
		p.negate = true
		line = line[1:]
	} else if line[0] == '\\' && len(line) > 1 && (line[1] == '#' || line[1] == '!') {
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") {
		p.dirOnly = true
		line = strings.TrimRight(line, "/")
	}
	if line == "" {
		return p, false, nil // "/" or "!" alone match nothing
	}
	anchored := strings.Contains(line, "/")
	line = strings.TrimLeft(line, "/")
	var segs []string
	if !anchored {
		segs = append(segs, "**") // a bare name matches at any depth
	}
	for s := range strings.SplitSeq(line, "/") {
		if s == "" {
			continue // "a//b" is "a/b"
		}
		if s != "**" {
			s = strings.ReplaceAll(s, "[!", "[^") // fnmatch's negated class, in path.Match syntax
			if _, err := path.Match(s, ""); err != nil {
				return p, false, fmt.Errorf("bad pattern %q: %w", p.Raw, err)
			}
		}
		// Consecutive "**" segments are one.
		if s == "**" && len(segs) > 0 && segs[len(segs)-1] == "**" {
			continue
		}
		segs = append(segs, s)
	}
	if len(segs) == 0 {
		return p, false, nil
	}
	p.segs = segs
	return p, true, nil
}

// trimTrailingSpaces removes trailing spaces unless escaped with a backslash.
func trimTrailingSpaces(s string) string {
	for strings.HasSuffix(s, " ") {
		if strings.HasSuffix(s, "\\ ") {
			return s[:len(s)-2] + " "
		}
		s = s[:len(s)-1]
	}
	return s
}

// Match reports whether the pattern matches rel (slash-separated, relative
// to the root), itself a directory when isDir. It does not look at rel's
// parent directories.
func (p Pattern) Match(rel string, isDir bool) bool {
	if p.dirOnly && !isDir {
		return false
	}
	rel = strings.Trim(rel, "/")
	if p.base != "" {
		if !strings.HasPrefix(rel, p.base+"/") {
			return false
		}
		rel = rel[len(p.base)+1:]
	}
	if rel == "" {
		return false
	}
	return matchSegs(p.segs, strings.Split(rel, "/"))
}

func matchSegs(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			if len(pat) == 1 {
				// A trailing "**" matches everything inside, but not the
				// directory itself ("a/**" does not match "a"); a leading
				// one that is the whole pattern cannot happen.
				return len(name) > 0
			}
			for i := 0; i <= len(name); i++ {
				if matchSegs(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// Matcher is an ordered list of patterns; the last that matches wins.
type Matcher struct {
	pats []Pattern
}

// New returns a Matcher with the given patterns.
func New(pats ...Pattern) *Matcher {
	return &Matcher{pats: append([]Pattern(nil), pats...)}
}

// Add appends patterns: they take precedence over those added before. A
// walker adds a directory's own ignore file when it enters the directory,
// after its parents', as git gives deeper files precedence.
func (m *Matcher) Add(pats ...Pattern) { m.pats = append(m.pats, pats...) }

// Ignored reports whether rel itself is excluded, ignoring its parents (the
// walker has already decided those). It also returns the deciding pattern,
// if any.
func (m *Matcher) Ignored(rel string, isDir bool) (bool, *Pattern) {
	for i := len(m.pats) - 1; i >= 0; i-- {
		if m.pats[i].Match(rel, isDir) {
			return !m.pats[i].negate, &m.pats[i]
		}
	}
	return false, nil
}

// IgnoredPath reports whether rel is excluded, itself or through any of its
// parent directories (which cannot be re-included from inside).
func (m *Matcher) IgnoredPath(rel string, isDir bool) bool {
	parts := strings.Split(strings.Trim(rel, "/"), "/")
	for i := 1; i < len(parts); i++ {
		if ig, _ := m.Ignored(strings.Join(parts[:i], "/"), true); ig {
			return true
		}
	}
	ig, _ := m.Ignored(rel, isDir)
	return ig
}
