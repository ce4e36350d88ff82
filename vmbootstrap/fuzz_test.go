package vmbootstrap

import (
	"archive/tar"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzExtract feeds arbitrary bytes (seeded with valid and hostile tar.gz,
// tar and zip archives) to Extract and asserts its invariants: it never
// panics, never writes outside the destination, and when it succeeds no
// symlink in the tree resolves outside it. `go test` runs the seeds:
//
//	go test -run XXX -fuzz FuzzExtract -fuzztime 30s ./vmbootstrap/
func FuzzExtract(f *testing.F) {
	seeds := [][]byte{
		tarGz(f, tarEntry{name: "app/package.json", body: "{}"}, tarEntry{name: "app/bin/run.sh", body: "#!/bin/sh\n", mode: 0o755}),
		tarGz(f, tarEntry{name: "../evil", body: "x"}),
		tarGz(f, tarEntry{name: "/abs/evil", body: "x"}),
		tarGz(f, tarEntry{name: "l", typ: tar.TypeSymlink, linkname: "../../.."}, tarEntry{name: "l/evil", body: "x"}),
		tarGz(f, tarEntry{name: "d/up", typ: tar.TypeSymlink, linkname: ".."}, tarEntry{name: "d/up/up2", typ: tar.TypeSymlink, linkname: ".."}, tarEntry{name: "d/up/up2/evil", body: "x"}),
		tarGz(f, tarEntry{name: "x/", typ: tar.TypeDir}, tarEntry{name: "a/b/s", typ: tar.TypeSymlink, linkname: "../../x"}, tarEntry{name: "esc", typ: tar.TypeSymlink, linkname: "a/b/s/../../.."}),
		tarGz(f, tarEntry{name: "f", body: "data"}, tarEntry{name: "h", typ: tar.TypeLink, linkname: "f"}, tarEntry{name: "h2", typ: tar.TypeLink, linkname: "../f"}),
		tarGz(f, tarEntry{name: "s", typ: tar.TypeSymlink, linkname: "."}, tarEntry{name: "s/s/s/f", body: "loop"}),
		tarGz(f, tarEntry{name: "fifo", typ: tar.TypeFifo}),
		zipArchive(f, zipEntry{name: "package.json", body: "{}"}, zipEntry{name: `..\evil`, body: "x"}),
		zipArchive(f, zipEntry{name: "l", body: "../x", mode: fs.ModeSymlink | 0o777}, zipEntry{name: "l/y", body: "x"}),
		func() []byte { // plain tar
			var b strings.Builder
			writeTar(f, &b, []tarEntry{{name: "plain.txt", body: "tar"}, {name: "dir/../../up", body: "x"}})
			return []byte(b.String())
		}(),
	}
	for _, s := range seeds {
		f.Add(s)
	}
	lim := ExtractLimits{MaxBytes: 1 << 20, MaxFileBytes: 256 << 10, MaxFiles: 200}
	f.Fuzz(func(t *testing.T, archive []byte) {
		s := newSandbox(t)
		_, err := extractBytes(t, archive, s.dest, lim)
		if stray := s.outside(t); len(stray) > 0 {
			t.Fatalf("written outside the destination: %v (error: %v)", stray, err)
		}
		if err != nil {
			return
		}
		realDest, err := filepath.EvalSymlinks(s.dest) // /var → /private/var on macOS
		if err != nil {
			t.Fatal(err)
		}
		filepath.WalkDir(s.dest, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.Type()&fs.ModeSymlink == 0 {
				return nil
			}
			target, _ := os.Readlink(p)
			if resolved, err := filepath.EvalSymlinks(p); err == nil {
				if resolved != realDest && !strings.HasPrefix(resolved, realDest+string(filepath.Separator)) {
					t.Fatalf("symlink %s → %q resolves outside: %s", p, target, resolved)
				}
			} else if rel, _ := filepath.Rel(s.dest, p); strings.HasPrefix(target, "/") || strings.HasPrefix(path.Join(path.Dir(filepath.ToSlash(rel)), target), "../") {
				t.Fatalf("dangling symlink %s → %q points outside", p, target)
			}
			return nil
		})
	})
}

// FuzzRedactor writes text holding a secret's forms, split at two
// points, and asserts that no form of it leaves the redactor:
//
//	go test -run XXX -fuzz FuzzRedactor -fuzztime 30s ./vmbootstrap/
func FuzzRedactor(f *testing.F) {
	f.Add("hunter2-password", "log: ", uint16(3), uint16(40))
	f.Add(`p"a\ss/<wörd>`, "x", uint16(0), uint16(9))
	f.Add("aaaaaaaa", "aaaa", uint16(5), uint16(6))
	f.Fuzz(func(t *testing.T, secret, filler string, split1, split2 uint16) {
		if len(secret) < 8 || strings.ContainsAny(secret, "\n[]") || strings.Contains(filler, "\n") {
			t.Skip() // too short to mask; a line of its own; could be spelled by the mark
		}
		forms := secretForms(secret)
		text := filler + strings.Join(forms, filler) + filler
		var r redactor
		r.add(secret)
		a := min(int(split1), len(text))
		b := max(a, min(int(split2), len(text)))
		out := string(r.write([]byte(text[:a]))) + string(r.write([]byte(text[a:b]))) + string(r.write([]byte(text[b:]))) + string(r.flush())
		for _, form := range forms {
			if strings.Contains(out, form) {
				t.Fatalf("form %q of %q in %q", form, secret, out)
			}
		}
	})
}
