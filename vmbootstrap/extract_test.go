package vmbootstrap

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sandbox is a directory holding the destination a few levels down, so an
// entry escaping with "..", "../.." or "../../.." lands inside the sandbox
// where the test can see it.
type sandbox struct {
	top, dest string
}

func newSandbox(t testing.TB) sandbox {
	top := t.TempDir()
	dest := filepath.Join(top, "a", "b", "c", "dest")
	if err := os.MkdirAll(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	return sandbox{top: top, dest: dest}
}

// outside lists everything in the sandbox that is not the destination,
// its contents or its parents.
func (s sandbox) outside(t testing.TB) []string {
	t.Helper()
	var stray []string
	filepath.WalkDir(s.top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if p == s.top || p == s.dest || strings.HasPrefix(p, s.dest+string(filepath.Separator)) {
			return nil
		}
		if rel, _ := filepath.Rel(s.top, p); d.IsDir() && (rel == "a" || rel == filepath.Join("a", "b") || rel == filepath.Join("a", "b", "c")) {
			return nil
		}
		stray = append(stray, p)
		return nil
	})
	return stray
}

func extractBytes(t testing.TB, archive []byte, dest string, lim ExtractLimits) (ExtractStats, error) {
	return Extract(context.Background(), bytes.NewReader(archive), int64(len(archive)), dest, lim)
}

func TestExtractValidArchives(t *testing.T) {
	t.Parallel()
	lim := DefaultExtractLimits()
	tgz := tarGz(t,
		tarEntry{name: "app/", typ: tar.TypeDir},
		tarEntry{name: "app/package.json", body: `{"name":"app"}`},
		tarEntry{name: "app/app.json", body: `{}`},
		tarEntry{name: "app/scripts/build.sh", body: "#!/bin/sh\necho hi\n", mode: 0o4777},
		tarEntry{name: "app/src/index.js", body: "console.log(1)\n"},
		tarEntry{name: "app/src/link.js", typ: tar.TypeSymlink, linkname: "index.js"},
		tarEntry{name: "app/assets", typ: tar.TypeSymlink, linkname: "src"},
		tarEntry{name: "app/hard.js", typ: tar.TypeLink, linkname: "app/src/index.js"},
		tarEntry{name: "./app/dup.txt", body: "old"},
		tarEntry{name: "app/dup.txt", body: "new"},
	)
	s := newSandbox(t)
	st, err := extractBytes(t, tgz, s.dest, lim)
	if err != nil {
		t.Fatal(err)
	}
	if st.Format != "tar.gz" || st.Files != 6 || st.Symlinks != 2 {
		t.Fatalf("stats %+v", st)
	}
	check := func(rel, want string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(s.dest, rel))
		if err != nil || string(b) != want {
			t.Fatalf("%s: %q %v", rel, b, err)
		}
	}
	check("app/src/link.js", "console.log(1)\n")
	check("app/assets/index.js", "console.log(1)\n")
	check("app/hard.js", "console.log(1)\n")
	check("app/dup.txt", "new")
	fi, err := os.Stat(filepath.Join(s.dest, "app/scripts/build.sh"))
	if err != nil || fi.Mode().Perm() != 0o755 || fi.Mode()&os.ModeSetuid != 0 {
		t.Fatalf("build.sh mode %v %v (want 0755, no setuid)", fi.Mode(), err)
	}
	// The single top-level directory is kept; the project root is found in it.
	root, err := FindProjectRoot(s.dest)
	if err != nil || root != filepath.Join(s.dest, "app") {
		t.Fatalf("project root %q %v", root, err)
	}

	zs := newSandbox(t)
	z := zipArchive(t,
		zipEntry{name: "package.json", body: "{}"},
		zipEntry{name: `src\main.js`, body: "main"},
		zipEntry{name: "bin/", mode: fs.ModeDir | 0o755},
		zipEntry{name: "bin/run", body: "#!/bin/sh\n", mode: 0o755},
		zipEntry{name: "main-link", body: "src/main.js", mode: fs.ModeSymlink | 0o777},
	)
	st, err = extractBytes(t, z, zs.dest, lim)
	if err != nil || st.Format != "zip" {
		t.Fatalf("zip: %+v %v", st, err)
	}
	if b, err := os.ReadFile(filepath.Join(zs.dest, "main-link")); err != nil || string(b) != "main" {
		t.Fatalf("zip symlink: %q %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(zs.dest, "bin/run")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("zip exec bit: %v %v", fi, err)
	}
}

// TestExtractRefusesUnsafeArchives: every unsafe archive is refused with
// ErrBadArchive and nothing lands outside the destination.
func TestExtractRefusesUnsafeArchives(t *testing.T) {
	t.Parallel()
	absTarget := filepath.Join(t.TempDir(), "absolute-evil")
	small := ExtractLimits{MaxBytes: 1000, MaxFileBytes: 600, MaxFiles: 10}
	cases := []struct {
		name    string
		archive []byte
		lim     ExtractLimits
		want    string
	}{
		{"path escape", tarGz(t, tarEntry{name: "ok.txt", body: "x"}, tarEntry{name: "../../evil.txt", body: "pwned"}), small, "escapes"},
		{"path escape after clean", tarGz(t, tarEntry{name: "a/../../../evil.txt", body: "pwned"}), small, "escapes"},
		{"absolute path", tarGz(t, tarEntry{name: absTarget, body: "pwned"}), small, "absolute"},
		{"symlink out", tarGz(t, tarEntry{name: "link", typ: tar.TypeSymlink, linkname: "../../../outside"}), small, "outside"},
		{"absolute symlink", tarGz(t, tarEntry{name: "link", typ: tar.TypeSymlink, linkname: "/etc"}), small, "absolute"},
		{"write through symlink", tarGz(t,
			tarEntry{name: "d/", typ: tar.TypeDir},
			tarEntry{name: "d/up", typ: tar.TypeSymlink, linkname: ".."},
			tarEntry{name: "d/up/up2", typ: tar.TypeSymlink, linkname: ".."},
			tarEntry{name: "d/up/up2/evil.txt", body: "pwned"}), small, "outside"},
		{"chained symlinks out", tarGz(t,
			tarEntry{name: "x/", typ: tar.TypeDir},
			tarEntry{name: "a/b/", typ: tar.TypeDir},
			tarEntry{name: "a/b/s", typ: tar.TypeSymlink, linkname: "../../x"},
			tarEntry{name: "esc", typ: tar.TypeSymlink, linkname: "a/b/s/../../.."}), small, "outside the tree"},
		{"hardlink out", tarGz(t, tarEntry{name: "h", typ: tar.TypeLink, linkname: "../../../../etc/passwd"}), small, "outside"},
		{"hardlink absolute", tarGz(t, tarEntry{name: "h", typ: tar.TypeLink, linkname: "/etc/passwd"}), small, "outside"},
		{"hardlink to a symlink", tarGz(t,
			tarEntry{name: "l", typ: tar.TypeSymlink, linkname: "x"},
			tarEntry{name: "h", typ: tar.TypeLink, linkname: "l"}), small, "regular file"},
		{"device", tarGz(t, tarEntry{name: "dev", typ: tar.TypeChar}), small, "device"},
		{"fifo", tarGz(t, tarEntry{name: "fifo", typ: tar.TypeFifo}), small, "FIFO"},
		{"too many files", tarGz(t, func() []tarEntry {
			var e []tarEntry
			for i := range 11 {
				e = append(e, tarEntry{name: "f" + string(rune('a'+i)), body: "x"})
			}
			return e
		}()...), small, "entries"},
		{"too big in total", tarGz(t, tarEntry{name: "a", body: strings.Repeat("a", 500)}, tarEntry{name: "b", body: strings.Repeat("b", 501)}), small, "limit of 1000 bytes"},
		{"file too big", tarGz(t, tarEntry{name: "a", body: strings.Repeat("a", 601)}), small, "per-file limit"},
		{"zip escape", zipArchive(t, zipEntry{name: `..\..\evil.txt`, body: "pwned"}), small, "escapes"},
		{"zip symlink out", zipArchive(t, zipEntry{name: "l", body: "../../../../x", mode: fs.ModeSymlink | 0o777}), small, "outside"},
		{"zip too big", zipArchive(t, zipEntry{name: "z", body: strings.Repeat("z", 5000)}), small, "per-file limit"},
		{"zip fifo", zipArchive(t, zipEntry{name: "p", mode: fs.ModeNamedPipe | 0o644}), small, "FIFO"},
		{"not an archive", []byte("hello, this is plain text"), small, "neither"},
		{"corrupt gzip", append([]byte{0x1f, 0x8b}, bytes.Repeat([]byte{7}, 40)...), small, "gzip"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSandbox(t)
			_, err := extractBytes(t, c.archive, s.dest, c.lim)
			if !errors.Is(err, ErrBadArchive) {
				t.Fatalf("want ErrBadArchive, got %v", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
			if stray := s.outside(t); len(stray) > 0 {
				t.Fatalf("written outside the destination: %v", stray)
			}
			if _, err := os.Lstat(absTarget); err == nil {
				t.Fatalf("%s was written", absTarget)
			}
		})
	}
}

func TestFindProjectRoot(t *testing.T) {
	t.Parallel()
	mk := func(files ...string) string {
		dir := t.TempDir()
		for _, f := range files {
			p := filepath.Join(dir, f)
			os.MkdirAll(filepath.Dir(p), 0o755)
			body := "{}"
			if strings.HasSuffix(f, "custom/package.json") {
				body = `{"scripts":{"freeagent:build":"true"}}`
			}
			os.WriteFile(p, []byte(body), 0o644)
		}
		return dir
	}
	cases := []struct {
		files []string
		want  string
	}{
		{[]string{"package.json", "app.json"}, "."},
		{[]string{"package.json", "apps/mobile/package.json", "apps/mobile/app.config.ts", "apps/web/package.json"}, "apps/mobile"},
		{[]string{"wrap/package.json", "wrap/node_modules/x/package.json", "wrap/node_modules/x/app.json"}, "wrap"},
		{[]string{"a/package.json", "b/package.json", "b/app.json"}, "b"},
		{[]string{"package.json", "deep/custom/package.json", "other/package.json", "other/app.json"}, "other"},
		{[]string{"custom/package.json", "z/package.json", "z/app.json"}, "custom"},
		{[]string{".hidden/package.json", "x/y/package.json"}, "x/y"},
	}
	for _, c := range cases {
		dir := mk(c.files...)
		got, err := FindProjectRoot(dir)
		if err != nil || got != filepath.Join(dir, c.want) {
			t.Errorf("%v: got %q %v, want %s", c.files, got, err, c.want)
		}
	}
	if _, err := FindProjectRoot(mk("README.md")); !errors.Is(err, ErrNoProject) {
		t.Errorf("no package.json: %v", err)
	}
}
