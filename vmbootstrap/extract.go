package vmbootstrap

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// ExtractLimits bound what a source archive may expand to.
type ExtractLimits struct {
	MaxBytes     int64 // total uncompressed bytes of regular files
	MaxFileBytes int64 // one regular file
	MaxFiles     int   // entries of any kind
}

// DefaultExtractLimits: 10 GiB, 4 GiB per file, 500 000 entries.
func DefaultExtractLimits() ExtractLimits {
	return ExtractLimits{MaxBytes: 10 << 30, MaxFileBytes: 4 << 30, MaxFiles: 500_000}
}

// ErrBadArchive wraps every reason a source archive is refused: not a
// tar.gz/tar/zip, corrupt, unsafe (absolute paths, escapes, links out of
// the tree, devices) or beyond a limit. Retrying cannot help.
var ErrBadArchive = errors.New("the source archive is invalid or unsafe")

// ExtractStats describes an extraction.
type ExtractStats struct {
	Format   string // "tar.gz", "tar" or "zip"
	Entries  int
	Files    int
	Bytes    int64
	Symlinks int
}

// ExtractFile extracts the archive at archivePath into dest (created if
// missing); see Extract.
func ExtractFile(ctx context.Context, archivePath, dest string, lim ExtractLimits) (ExtractStats, error) {
	f, err := os.Open(archivePath)
	if err != nil {
		return ExtractStats{}, fmt.Errorf("open source archive: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ExtractStats{}, fmt.Errorf("open source archive: %w", err)
	}
	return Extract(ctx, f, st.Size(), dest, lim)
}

// Extract safely expands a tar.gz, tar or zip archive (recognised by its
// first bytes) into dest. Nothing is ever written outside dest: every file
// operation goes through an os.Root, entries with absolute names or names
// escaping with "..", symlinks whose target resolves outside the tree,
// hard links to anything but a regular file inside it, and device, FIFO and
// socket entries make the whole archive refused (ErrBadArchive), as do the
// limits. A single top-level directory is kept as it is. Modes are reduced
// to 0664/0775 less the umask (no setuid, no world-writable files).
func Extract(ctx context.Context, r io.ReaderAt, size int64, dest string, lim ExtractLimits) (ExtractStats, error) {
	var head [512]byte
	n, err := r.ReadAt(head[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return ExtractStats{}, fmt.Errorf("read source archive: %w", err)
	}
	if err := os.MkdirAll(dest, 0o775); err != nil {
		return ExtractStats{}, fmt.Errorf("create %s: %w", dest, err)
	}
	root, err := os.OpenRoot(dest)
	if err != nil {
		return ExtractStats{}, fmt.Errorf("open %s: %w", dest, err)
	}
	defer root.Close()
	x := &extractor{ctx: ctx, root: root, lim: lim}
	sr := io.NewSectionReader(r, 0, size)
	switch h := head[:n]; {
	case bytes.HasPrefix(h, []byte{0x1f, 0x8b}):
		x.stats.Format = "tar.gz"
		gz, err := gzip.NewReader(sr)
		if err != nil {
			return x.stats, fmt.Errorf("%w: gzip: %w", ErrBadArchive, err)
		}
		defer gz.Close()
		err = x.tar(tar.NewReader(gz))
		if err != nil {
			return x.stats, err
		}
	case bytes.HasPrefix(h, []byte("PK\x03\x04")) || bytes.HasPrefix(h, []byte("PK\x05\x06")):
		x.stats.Format = "zip"
		zr, err := zip.NewReader(r, size)
		if err != nil {
			return x.stats, fmt.Errorf("%w: zip: %w", ErrBadArchive, err)
		}
		if err := x.zip(zr); err != nil {
			return x.stats, err
		}
	case len(h) >= 262 && string(h[257:262]) == "ustar":
		x.stats.Format = "tar"
		if err := x.tar(tar.NewReader(sr)); err != nil {
			return x.stats, err
		}
	default:
		return x.stats, fmt.Errorf("%w: it is neither a tar.gz nor a zip file", ErrBadArchive)
	}
	if err := x.verifyLinks(); err != nil {
		return x.stats, err
	}
	return x.stats, nil
}

type extractor struct {
	ctx   context.Context
	root  *os.Root
	lim   ExtractLimits
	stats ExtractStats
	links []string // symlinks created, checked once everything is in place
}

func (x *extractor) tar(tr *tar.Reader) error {
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return x.wrap("", fmt.Errorf("read tar: %w", err))
		}
		var kind entryKind
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // old archives still use TypeRegA
			kind = kindFile
		case tar.TypeDir:
			kind = kindDir
		case tar.TypeSymlink:
			kind = kindSymlink
		case tar.TypeLink:
			kind = kindHardlink
		case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
			return fmt.Errorf("%w: %q is a device or FIFO entry", ErrBadArchive, h.Name)
		case tar.TypeXGlobalHeader:
			continue
		default:
			return fmt.Errorf("%w: %q has an unsupported tar entry type %q", ErrBadArchive, h.Name, h.Typeflag)
		}
		if err := x.entry(h.Name, kind, h.FileInfo().Mode(), h.Size, h.Linkname, tr); err != nil {
			return err
		}
	}
}

func (x *extractor) zip(zr *zip.Reader) error {
	if len(zr.File) > x.lim.MaxFiles {
		return fmt.Errorf("%w: %d entries, more than the limit of %d", ErrBadArchive, len(zr.File), x.lim.MaxFiles)
	}
	for _, f := range zr.File {
		// Zip names use "/", but some Windows tools write "\".
		name := strings.ReplaceAll(f.Name, `\`, "/")
		mode := f.Mode()
		var kind entryKind
		switch {
		case mode&fs.ModeSymlink != 0:
			kind = kindSymlink
		case mode.IsDir() || strings.HasSuffix(name, "/"):
			kind = kindDir
		case mode&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket|fs.ModeIrregular) != 0:
			return fmt.Errorf("%w: %q is a device, FIFO or socket entry", ErrBadArchive, f.Name)
		default:
			kind = kindFile
		}
		if err := x.zipEntry(f, name, kind, mode); err != nil {
			return err
		}
	}
	return nil
}

func (x *extractor) zipEntry(f *zip.File, name string, kind entryKind, mode fs.FileMode) error {
	if kind == kindDir {
		return x.entry(name, kind, mode, 0, "", nil)
	}
	if kind == kindFile && f.UncompressedSize64 > uint64(x.lim.MaxFileBytes) {
		return fmt.Errorf("%w: %q is %d bytes, more than the per-file limit of %d", ErrBadArchive, name, f.UncompressedSize64, x.lim.MaxFileBytes)
	}
	rc, err := f.Open()
	if err != nil {
		return fmt.Errorf("%w: open %q: %w", ErrBadArchive, name, err)
	}
	defer rc.Close()
	var target string
	if kind == kindSymlink {
		b, err := io.ReadAll(io.LimitReader(rc, 4097))
		if err != nil {
			return fmt.Errorf("%w: read symlink %q: %w", ErrBadArchive, name, err)
		}
		if len(b) > 4096 {
			return fmt.Errorf("%w: symlink %q has an overlong target", ErrBadArchive, name)
		}
		target = string(b)
	}
	return x.entry(name, kind, mode, int64(f.UncompressedSize64), target, rc)
}

type entryKind int

const (
	kindFile entryKind = iota
	kindDir
	kindSymlink
	kindHardlink
)

// cleanName turns an archive entry name into a clean path relative to the
// root, or refuses it. "" is the root itself.
func cleanName(name string) (string, error) {
	switch {
	case name == "":
		return "", fmt.Errorf("%w: an entry has an empty name", ErrBadArchive)
	case strings.ContainsRune(name, 0):
		return "", fmt.Errorf("%w: entry %q has a NUL byte in its name", ErrBadArchive, name)
	case strings.HasPrefix(name, "/"):
		return "", fmt.Errorf("%w: entry %q has an absolute path", ErrBadArchive, name)
	case len(name) >= 2 && name[1] == ':' && (name[0]|0x20 >= 'a' && name[0]|0x20 <= 'z'):
		return "", fmt.Errorf("%w: entry %q has an absolute (drive letter) path", ErrBadArchive, name)
	}
	c := path.Clean(name)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%w: entry %q escapes the destination with ..", ErrBadArchive, name)
	}
	if c == "." {
		return "", nil
	}
	return c, nil
}

func (x *extractor) entry(name string, kind entryKind, mode fs.FileMode, size int64, linkname string, body io.Reader) error {
	if err := x.ctx.Err(); err != nil {
		return fmt.Errorf("extract source: %w", context.Cause(x.ctx))
	}
	x.stats.Entries++
	if x.stats.Entries > x.lim.MaxFiles {
		return fmt.Errorf("%w: more than the limit of %d entries", ErrBadArchive, x.lim.MaxFiles)
	}
	rel, err := cleanName(name)
	if err != nil {
		return err
	}
	if rel == "" {
		if kind == kindDir {
			return nil
		}
		return fmt.Errorf("%w: entry %q is not a directory but names the destination itself", ErrBadArchive, name)
	}
	if kind != kindDir {
		if dir := path.Dir(rel); dir != "." {
			if err := x.root.MkdirAll(dir, 0o775); err != nil {
				return x.wrap(name, err)
			}
		}
		if err := x.clear(rel, name); err != nil {
			return err
		}
	}
	switch kind {
	case kindDir:
		return x.wrap(name, x.root.MkdirAll(rel, 0o775))
	case kindFile:
		return x.file(rel, name, mode, size, body)
	case kindSymlink:
		return x.symlink(rel, name, linkname)
	default:
		return x.hardlink(rel, name, linkname)
	}
}

// clear removes a file or link an earlier entry left at rel (archives may
// carry updated copies of an entry); a directory there is a conflict.
func (x *extractor) clear(rel, name string) error {
	fi, err := x.root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return x.wrap(name, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("%w: entry %q would replace a directory", ErrBadArchive, name)
	}
	return x.wrap(name, x.root.Remove(rel))
}

func (x *extractor) file(rel, name string, mode fs.FileMode, size int64, body io.Reader) error {
	if size > x.lim.MaxFileBytes {
		return fmt.Errorf("%w: %q is %d bytes, more than the per-file limit of %d", ErrBadArchive, name, size, x.lim.MaxFileBytes)
	}
	// Group-writable as far as the umask allows: with a build user the
	// umask is 007 and the build user writes the tree through the group;
	// otherwise the usual 022 makes these 0755/0644.
	perm := fs.FileMode(0o664)
	if mode&0o111 != 0 {
		perm = 0o775
	}
	f, err := x.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return x.wrap(name, err)
	}
	allowed := min(x.lim.MaxFileBytes, x.lim.MaxBytes-x.stats.Bytes)
	n, err := io.Copy(f, io.LimitReader(ctxReader{x.ctx, body}, allowed+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	x.stats.Bytes += n
	if err != nil {
		if x.ctx.Err() != nil {
			return fmt.Errorf("extract source: %w", context.Cause(x.ctx))
		}
		return x.wrap(name, err)
	}
	if n > allowed {
		if allowed < x.lim.MaxFileBytes {
			return fmt.Errorf("%w: the files expand to more than the limit of %d bytes", ErrBadArchive, x.lim.MaxBytes)
		}
		return fmt.Errorf("%w: %q is more than the per-file limit of %d bytes", ErrBadArchive, name, x.lim.MaxFileBytes)
	}
	x.stats.Files++
	return nil
}

func (x *extractor) symlink(rel, name, target string) error {
	switch {
	case target == "" || strings.ContainsRune(target, 0):
		return fmt.Errorf("%w: symlink %q has an empty or invalid target", ErrBadArchive, name)
	case strings.HasPrefix(target, "/"):
		return fmt.Errorf("%w: symlink %q points to the absolute path %q", ErrBadArchive, name, target)
	}
	// The lexical check; verifyLinks repeats it on the finished tree,
	// following the links the way the kernel does.
	if t := path.Join(path.Dir(rel), target); t == ".." || strings.HasPrefix(t, "../") {
		return fmt.Errorf("%w: symlink %q points outside the tree (%q)", ErrBadArchive, name, target)
	}
	if err := x.root.Symlink(target, rel); err != nil {
		return x.wrap(name, err)
	}
	// Its parent may itself be reached through links: check where it
	// really leads now (and again at the end, when all links exist).
	if err := resolveInside(x.root, rel); err != nil {
		return fmt.Errorf("%w: symlink %q: %w", ErrBadArchive, name, err)
	}
	x.links = append(x.links, rel)
	x.stats.Symlinks++
	return nil
}

func (x *extractor) hardlink(rel, name, linkname string) error {
	target, err := cleanName(linkname)
	if err != nil || target == "" {
		return fmt.Errorf("%w: hard link %q points outside the tree (%q)", ErrBadArchive, name, linkname)
	}
	fi, err := x.root.Lstat(target)
	if err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: hard link %q must point to a regular file earlier in the archive, not %q", ErrBadArchive, name, linkname)
	}
	if err := x.root.Link(target, rel); err != nil {
		return x.wrap(name, err)
	}
	return nil
}

// verifyLinks resolves every symlink the archive created, component by
// component as the kernel would (a link may lead through other links), and
// refuses the archive if any resolution leaves the tree.
func (x *extractor) verifyLinks() error {
	for _, l := range x.links {
		if err := resolveInside(x.root, l); err != nil {
			return fmt.Errorf("%w: symlink %q: %w", ErrBadArchive, l, err)
		}
	}
	return nil
}

func resolveInside(root *os.Root, name string) error {
	pending := strings.Split(name, "/")
	var cur []string // resolved, link-free components
	hops := 0
	exists := true
	for len(pending) > 0 {
		p := pending[0]
		pending = pending[1:]
		switch p {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return errors.New("it resolves outside the tree")
			}
			cur = cur[:len(cur)-1]
			continue
		}
		next := append(cur[:len(cur):len(cur)], p)
		if !exists {
			cur = next
			continue
		}
		fi, err := root.Lstat(strings.Join(next, "/"))
		if err != nil {
			// Dangling from here on: the rest is resolved lexically.
			exists = false
			cur = next
			continue
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return errors.New("too many levels of symbolic links")
		}
		target, err := root.Readlink(strings.Join(next, "/"))
		if err != nil {
			return fmt.Errorf("read link: %w", err)
		}
		if strings.HasPrefix(target, "/") {
			return fmt.Errorf("it leads through a link to the absolute path %q", target)
		}
		pending = append(strings.Split(target, "/"), pending...)
	}
	return nil
}

// wrap marks an extraction failure as the archive's fault, unless it is the
// machine's (disk full, I/O error, read-only file system).
func (x *extractor) wrap(name string, err error) error {
	if err == nil {
		return nil
	}
	if isDiskError(err) {
		return fmt.Errorf("extract %q: %w", name, err)
	}
	return fmt.Errorf("%w: extract %q: %w", ErrBadArchive, name, err)
}

func isDiskError(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EROFS)
}

// ctxReader stops a long copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
