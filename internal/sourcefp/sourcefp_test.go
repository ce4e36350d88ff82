package sourcefp

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// The definition is a wire format: fingerprints computed by one release
// of expo-build are matched by another release's controller. This pins it.
func TestDefinition(t *testing.T) {
	want := sha256.Sum256([]byte("0\x00src\x00755\x000\x00" +
		"1\x00src/a.ts\x00644\x003\x00abc" +
		"2\x00link\x00777\x000\x00src/a.ts\x00"))
	f := New()
	f.Entry(Dir, "src", 0o755, 0, "")
	f.Entry(File, "src/a.ts", 0o644, 3, "")
	f.Write([]byte("abc"))
	f.Entry(Symlink, "link", 0o777, 0, "src/a.ts")
	if got := f.Sum(); got != hex.EncodeToString(want[:]) {
		t.Fatalf("fingerprint %s, want %s", got, hex.EncodeToString(want[:]))
	}

	// The same entries read from tar headers, as the controller reads them.
	h := New()
	h.Header(&tar.Header{Typeflag: tar.TypeDir, Name: "src/", Mode: 0o755})
	h.Header(&tar.Header{Typeflag: tar.TypeReg, Name: "src/a.ts", Mode: 0o644, Size: 3})
	h.Write([]byte("abc"))
	h.Header(&tar.Header{Typeflag: tar.TypeSymlink, Name: "link", Mode: 0o777, Linkname: "src/a.ts"})
	if got := h.Sum(); got != f.Sum() {
		t.Fatalf("from tar headers %s, from entries %s", got, f.Sum())
	}
}

// An entry expo-build never packs (a hard link, a FIFO) never hashes like
// one it does: the archive that holds it matches no packed tree.
func TestOtherEntriesDiffer(t *testing.T) {
	sum := func(h *tar.Header) string {
		f := New()
		f.Header(h)
		return f.Sum()
	}
	symlink := sum(&tar.Header{Typeflag: tar.TypeSymlink, Name: "a", Mode: 0o777, Linkname: "b"})
	seen := map[string]byte{symlink: tar.TypeSymlink}
	for _, typ := range []byte{tar.TypeLink, tar.TypeFifo, tar.TypeChar, tar.TypeXGlobalHeader} {
		s := sum(&tar.Header{Typeflag: typ, Name: "a", Mode: 0o777, Linkname: "b"})
		if prev, ok := seen[s]; ok {
			t.Fatalf("type %q hashes like type %q", typ, prev)
		}
		seen[s] = typ
	}
}
