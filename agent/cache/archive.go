package cache

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/freeagent-build/freeagent/internal/boundedfile"
)

// ErrBadArchive wraps every reason an archive a build wrote is refused.
var ErrBadArchive = errors.New("the cache archive is invalid or unsafe")

// copyArchive copies the archive src (in the build's shared folder: the VM
// may still write it) to dst, 0444, fsynced, while checking it: a tar of
// at most limit bytes holding only directories, regular files and symbolic
// links, with relative names that stay inside the archive once cleaned, and
// links whose targets resolve inside the tree of their path (the archive's
// first name element: one tree per cache path). The bytes copied are the
// bytes checked, so a VM rewriting src meanwhile gains nothing.
func copyArchive(src, dst string, limit int64) (int64, error) {
	in, err := boundedfile.OpenNoFollow(src, limit)
	if err != nil {
		var tl *boundedfile.TooLargeError
		if errors.As(err, &tl) || errors.Is(err, boundedfile.ErrNotRegular) {
			return 0, fmt.Errorf("%w: %w", ErrBadArchive, err)
		}
		return 0, fmt.Errorf("open the cache archive: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return 0, fmt.Errorf("write the cache archive: %w", err)
	}
	defer out.Close()
	cw := &countingWriter{w: out}
	body := io.TeeReader(io.LimitReader(in, limit+1), cw)
	if err := checkTar(body); err != nil {
		return 0, err
	}
	// The end-of-archive blocks and any padding after them.
	if _, err := io.Copy(io.Discard, body); err != nil {
		return 0, copyErr(err)
	}
	if cw.err != nil {
		return 0, copyErr(cw.err)
	}
	if cw.n > limit {
		return 0, fmt.Errorf("%w: larger than the cap of %d bytes", ErrBadArchive, limit)
	}
	if err := out.Sync(); err != nil {
		return 0, copyErr(err)
	}
	if err := out.Close(); err != nil {
		return 0, copyErr(err)
	}
	return cw.n, nil
}

func copyErr(err error) error {
	return fmt.Errorf("write the cache archive: %w", err)
}

// checkTar reads the whole tar stream r, refusing what copyArchive refuses.
func checkTar(r io.Reader) error {
	tr := tar.NewReader(r)
	entries := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			if entries == 0 {
				return fmt.Errorf("%w: no entries", ErrBadArchive)
			}
			return nil
		}
		if err != nil {
			var we *writeError
			if errors.As(err, &we) {
				return copyErr(we.err)
			}
			return fmt.Errorf("%w: %w", ErrBadArchive, err)
		}
		entries++
		name, err := cleanName(h.Name)
		if err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
		case tar.TypeReg:
			if _, err := io.Copy(io.Discard, tr); err != nil {
				var we *writeError
				if errors.As(err, &we) {
					return copyErr(we.err)
				}
				return fmt.Errorf("%w: %s: %w", ErrBadArchive, h.Name, err)
			}
		case tar.TypeSymlink:
			if err := checkLink(name, h.Linkname); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: %s: entries of type %q (hard links, devices, FIFOs…) are not allowed", ErrBadArchive, h.Name, h.Typeflag)
		}
	}
}

// cleanName is an entry's name, refused when absolute or leaving the
// archive.
func cleanName(name string) (string, error) {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") || strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("%w: entry name %q is absolute or not portable", ErrBadArchive, name)
	}
	for _, el := range strings.Split(strings.TrimSuffix(name, "/"), "/") {
		if el == ".." {
			return "", fmt.Errorf("%w: entry name %q leaves the archive", ErrBadArchive, name)
		}
	}
	c := path.Clean(name)
	if c == "." {
		return "", fmt.Errorf("%w: entry name %q names the archive's root", ErrBadArchive, name)
	}
	return c, nil
}

// checkLink refuses a symbolic link name → target that is absolute or
// resolves outside the tree of name (its first element).
func checkLink(name, target string) error {
	if target == "" || strings.HasPrefix(target, "/") {
		return fmt.Errorf("%w: link %s → %q is absolute", ErrBadArchive, name, target)
	}
	tree, _, _ := strings.Cut(name, "/")
	resolved := path.Join(path.Dir(name), target)
	if resolved != tree && !strings.HasPrefix(resolved, tree+"/") {
		return fmt.Errorf("%w: link %s → %q leaves its tree", ErrBadArchive, name, target)
	}
	return nil
}

// countingWriter counts what it wrote and keeps the first error, which
// tar's reader would otherwise see as a read error.
type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

// writeError marks a failed write of the copy (a full disk) among the
// reader's errors.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil {
		c.err = &writeError{err: err}
		return n, c.err
	}
	return n, nil
}
