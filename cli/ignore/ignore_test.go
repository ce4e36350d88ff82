package ignore

import (
	"strings"
	"testing"
)

type probe struct {
	path  string
	isDir bool
	want  bool
}

func TestGitignoreSemantics(t *testing.T) {
	cases := []struct {
		name   string
		lines  string
		probes []probe
	}{
		{"bare name matches at any depth", "foo\n", []probe{
			{"foo", false, true}, {"foo", true, true}, {"a/foo", false, true}, {"a/b/foo", true, true},
			{"foobar", false, false}, {"a/foo/bar", false, true}, // inside an ignored directory
		}},
		{"directory-only suffix", "build/\n", []probe{
			{"build", true, true}, {"build", false, false}, {"a/build", true, true},
			{"a/build/x.o", false, true}, {"a/build", false, false},
		}},
		{"leading slash anchors", "/dist\n", []probe{
			{"dist", true, true}, {"dist/x.js", false, true}, {"a/dist", true, false}, {"a/dist/x", false, false},
		}},
		{"middle slash anchors", "doc/frotz\n", []probe{
			{"doc/frotz", true, true}, {"a/doc/frotz", true, false}, {"doc/frotz/x", false, true},
		}},
		{"star does not cross slashes", "*.log\ndocs/*.md\n", []probe{
			{"x.log", false, true}, {"a/b/x.log", false, true}, {"docs/a.md", false, true},
			{"docs/sub/a.md", false, false}, {"x.logs", false, false},
		}},
		{"question mark and classes", "file?.txt\n[abc].js\n[!x]y\n", []probe{
			{"file1.txt", false, true}, {"file12.txt", false, false}, {"b.js", false, true}, {"d.js", false, false},
			{"zy", false, true}, {"xy", false, false},
		}},
		{"leading double star", "**/logs\n**/cache/x\n", []probe{
			{"logs", true, true}, {"a/b/logs", true, true}, {"cache/x", false, true}, {"q/cache/x", false, true}, {"q/cache/y", false, false},
		}},
		{"trailing double star matches inside only", "abc/**\n", []probe{
			{"abc", true, false}, {"abc/x", false, true}, {"abc/x/y", false, true}, {"q/abc/x", false, false},
		}},
		{"middle double star matches zero or more dirs", "a/**/b\n", []probe{
			{"a/b", false, true}, {"a/x/b", false, true}, {"a/x/y/b", true, true}, {"a/x/c", false, false}, {"z/a/b", false, false},
		}},
		{"negation re-includes; last match wins", "*.env\n!keep.env\n", []probe{
			{"a.env", false, true}, {"keep.env", false, false}, {"sub/keep.env", false, false},
		}},
		{"negation order matters", "!keep.env\n*.env\n", []probe{
			{"keep.env", false, true},
		}},
		{"cannot re-include inside an excluded directory", "secret/\n!secret/ok.txt\n", []probe{
			{"secret/ok.txt", false, true}, {"secret", true, true},
		}},
		{"re-include a directory excluded by a broader pattern", "/*\n!/src/\n!/app.json\n", []probe{
			{"src", true, false}, {"src/a.ts", false, false}, {"app.json", false, false}, {"other.txt", false, true}, {"lib", true, true},
		}},
		{"comments, blanks, escapes, trailing spaces", "# comment\n\n\\#hash\n\\!bang\nspaced   \nkeep\\ \n", []probe{
			{"# comment", false, false}, {"#hash", false, true}, {"!bang", false, true},
			{"spaced", false, true}, {"keep ", false, true}, {"keep", false, false},
		}},
		{"escaped star is literal", "\\*.txt\n", []probe{
			{"*.txt", false, true}, {"a.txt", false, false},
		}},
		{"CRLF line endings", "foo\r\nbar/\r\n", []probe{
			{"foo", false, true}, {"bar", true, true},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pats, warn := Parse("", []byte(c.lines), ".gitignore")
			if len(warn) > 0 {
				t.Fatalf("warnings: %v", warn)
			}
			m := New(pats...)
			for _, p := range c.probes {
				if got := m.IgnoredPath(p.path, p.isDir); got != p.want {
					t.Errorf("%q (dir=%v): ignored=%v, want %v", p.path, p.isDir, got, p.want)
				}
			}
		})
	}
}

func TestNestedFileIsScopedAndOverridesParent(t *testing.T) {
	root, _ := Parse("", []byte("*.gen\n"), ".gitignore")
	nested, _ := Parse("pkg", []byte("!keep.gen\n/local\n"), "pkg/.gitignore")
	m := New(root...)
	m.Add(nested...)
	for _, p := range []probe{
		{"x.gen", false, true},
		{"pkg/x.gen", false, true},
		{"pkg/keep.gen", false, false}, // deeper file wins
		{"keep.gen", false, true},      // nested rules don't apply outside pkg/
		{"pkg/local", true, true},      // anchored to pkg/
		{"local", true, false},
		{"pkg/sub/local", true, false},
	} {
		if got := m.IgnoredPath(p.path, p.isDir); got != p.want {
			t.Errorf("%q: ignored=%v, want %v", p.path, got, p.want)
		}
	}
}

func TestBadPatternIsReported(t *testing.T) {
	pats, warn := Parse("", []byte("ok\n[unclosed\n"), ".easignore")
	if len(pats) != 1 || len(warn) != 1 || !strings.Contains(warn[0], ".easignore:2") {
		t.Fatalf("pats %d, warnings %v", len(pats), warn)
	}
}

func TestDecidingPattern(t *testing.T) {
	pats, _ := Parse("", []byte("node_modules/\n"), "defaults")
	ig, p := New(pats...).Ignored("node_modules", true)
	if !ig || p == nil || p.Source != "defaults:1" || p.Negated() {
		t.Fatalf("ignored=%v pattern=%+v", ig, p)
	}
}
