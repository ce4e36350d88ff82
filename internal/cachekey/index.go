package cachekey

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"path"
	"slices"
	"strings"
)

// maxIndexed bounds the files an Index records: more, and it answers
// ErrTooManyFiles rather than keys computed on part of the tree.
const maxIndexed = 20_000

// ErrTooManyFiles: the archive holds more files a key could read than an
// Index records.
var ErrTooManyFiles = errors.New("the source holds too many lockfiles and Gradle files to compute its cache keys")

// Index is the Tree of a tar archive read once, as the controller streams
// a submitted source: it hashes the entries a key may read (lockfiles,
// package.json, Podfile.lock, the Gradle files, .yarnrc.yml, outside
// node_modules) and notes the ios directories; the rest passes by. Call
// Header for each entry, then write the entry's bytes to the writer it
// returns (nil: the entry is not needed).
type Index struct {
	files    map[string]*indexed
	dirs     map[string]bool
	overflow bool
}

// indexed is one recorded file: its hash, and its bytes for .yarnrc.yml.
type indexed struct {
	h    hash.Hash
	data *bytes.Buffer // nil: not kept
}

func (f *indexed) Write(p []byte) (int, error) {
	f.h.Write(p)
	if f.data != nil && f.data.Len() <= maxYarnrc {
		f.data.Write(p)
	}
	return len(p), nil
}

// NewIndex starts an empty Index.
func NewIndex() *Index {
	return &Index{files: map[string]*indexed{}, dirs: map[string]bool{}}
}

// lockfiles are the names a Project.Lockfile may have.
var lockfiles = []string{"bun.lock", "bun.lockb", "yarn.lock", "npm-shrinkwrap.json", "package-lock.json", "pnpm-lock.yaml"}

// Header records entry h, returning where its bytes go: nil for an entry
// no key reads. A later entry of the same path replaces an earlier one, as
// in the extraction.
func (x *Index) Header(h *tar.Header) io.Writer {
	name := strings.TrimPrefix(h.Name, "./")
	if name == "" || strings.HasPrefix(name, "/") {
		return nil
	}
	name = path.Clean(name)
	els := strings.Split(name, "/")
	if slices.Contains(els, "..") || slices.Contains(els, "node_modules") {
		return nil
	}
	delete(x.files, name)
	for i, el := range els {
		if el == "ios" && (i < len(els)-1 || h.Typeflag == tar.TypeDir) {
			x.dirs[strings.Join(els[:i+1], "/")] = true
		}
	}
	if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeRegA { //nolint:staticcheck // the VM extracts TypeRegA as a file
		return nil
	}
	base := els[len(els)-1]
	keep := slices.Contains(lockfiles, base) || name == "package.json" || name == ".yarnrc.yml" ||
		base == "Podfile.lock" || gradleFile(base) && slices.Contains(els, "android")
	if !keep {
		return nil
	}
	if len(x.files) >= maxIndexed {
		x.overflow = true
		return nil
	}
	f := &indexed{h: sha256.New()}
	if name == ".yarnrc.yml" {
		f.data = &bytes.Buffer{}
	}
	x.files[name] = f
	return f
}

func (x *Index) check() error {
	if x.overflow {
		return ErrTooManyFiles
	}
	return nil
}

// Sum implements Tree.
func (x *Index) Sum(rel string) (string, error) {
	if err := x.check(); err != nil {
		return "", err
	}
	f := x.files[path.Clean(rel)]
	if f == nil {
		return "", nil
	}
	return hex.EncodeToString(f.h.Sum(nil)), nil
}

// IsDir implements Tree for the directories Entries asks after (ios).
func (x *Index) IsDir(rel string) bool { return x.dirs[path.Clean(rel)] }

// Files implements Tree.
func (x *Index) Files(dir string, skip, keep func(string) bool) ([]string, error) {
	if err := x.check(); err != nil {
		return nil, err
	}
	prefix := path.Clean(dir) + "/"
	var out []string
next:
	for name := range x.files {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		els := strings.Split(rest, "/")
		for _, el := range els[:len(els)-1] {
			if skip(el) {
				continue next
			}
		}
		if keep(els[len(els)-1]) {
			out = append(out, name)
		}
	}
	return out, nil
}

// Read implements Tree for the file whose bytes it keeps (.yarnrc.yml).
func (x *Index) Read(rel string, limit int64) ([]byte, error) {
	f := x.files[path.Clean(rel)]
	if f == nil || f.data == nil || int64(f.data.Len()) > limit {
		return nil, nil
	}
	return f.data.Bytes(), nil
}
