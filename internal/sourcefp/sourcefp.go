// Package sourcefp defines a project source's fingerprint
// (api.BuildSpec.SourceFingerprint): the hex SHA-256 over each archive
// entry's kind, path, mode and size, then a link's target or a file's
// bytes, in archive order. Modification times and the compression do not
// enter it, so an unchanged tree packed again, touched or on another
// machine, has the same one.
//
// expo-build computes it while packing (cli/pack); the controller computes
// it again from the tar.gz it received (Header, per entry), and only the
// controller's is matched when a build is reused.
package sourcefp

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"
)

// Kinds of entries. expo-build packs directories, files and symbolic
// links; the others are hashed so that an archive holding them never
// shares a fingerprint with one that does not.
const (
	Dir = iota
	File
	Symlink
	Hardlink
	// otherBase + the tar type flag: any other entry.
	otherBase = 256
)

// Hash accumulates a fingerprint.
type Hash struct{ h hash.Hash }

// New starts a fingerprint.
func New() *Hash { return &Hash{h: sha256.New()} }

// Entry starts an entry: rel is its slash-separated path (a directory's
// without the trailing slash), mode its permission bits. Every kind but a
// directory or a file carries link (its target); a file's size bytes
// follow through Write. The size precedes the bytes, so entries cannot
// run together.
func (f *Hash) Entry(kind int, rel string, mode, size int64, link string) {
	fmt.Fprintf(f.h, "%d\x00%s\x00%o\x00%d\x00", kind, rel, mode, size)
	if kind != Dir && kind != File {
		fmt.Fprintf(f.h, "%s\x00", link)
	}
}

// Header starts the entry of a tar header as the build VM extracts it
// (vmbootstrap): for the archives expo-build packs, the same Entry pack
// made. The entry's bytes, as the tar reader gives them, follow through
// Write.
func (f *Hash) Header(h *tar.Header) {
	name, kind := h.Name, otherBase+int(h.Typeflag)
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // the VM extracts TypeRegA as a file
		kind = File
	case tar.TypeDir:
		kind, name = Dir, strings.TrimSuffix(name, "/")
	case tar.TypeSymlink:
		kind = Symlink
	case tar.TypeLink:
		kind = Hardlink
	}
	f.Entry(kind, name, h.Mode, h.Size, h.Linkname)
}

// Write adds an entry's bytes.
func (f *Hash) Write(p []byte) (int, error) { return f.h.Write(p) }

// Sum returns the fingerprint: 64 lowercase hex digits.
func (f *Hash) Sum() string { return hex.EncodeToString(f.h.Sum(nil)) }
