package vmbootstrap

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// tarGzDir packs directory dir (an iOS .app) into the .tar.gz file out,
// its entries under dir's base name, as EAS uploads a directory artifact.
// Symlinks stay links; modes are kept so the executable stays executable.
func tarGzDir(dir, out string) (err error) {
	f, err := os.OpenFile(out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(out)
		}
	}()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	_, err = writeTree(tw, dir, filepath.Base(dir), func(_, rel string, info fs.FileInfo, _ string) (bool, error) {
		if info.Mode()&fs.ModeSymlink != 0 {
			return true, nil
		}
		return false, fmt.Errorf("%s is neither a file, a directory nor a symlink", rel)
	})
	return errors.Join(err, tw.Close(), gz.Close())
}

// writeTree adds the tree at root to tw under the name prefix: its
// directories (named with a trailing "/"), regular files and symbolic
// links, with their modes and without owners. Any other entry (a link,
// with its target, or a special file), at p and rel inside root, goes
// through admit: kept, left out (false) or the end of the walk (an error).
// It returns the bytes of regular files written.
func writeTree(tw *tar.Writer, root, prefix string, admit func(p, rel string, info fs.FileInfo, link string) (bool, error)) (int64, error) {
	var total int64
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		link := ""
		if !d.IsDir() && !d.Type().IsRegular() {
			if d.Type()&fs.ModeSymlink != 0 {
				if link, err = os.Readlink(p); err != nil {
					return err
				}
			}
			if keep, err := admit(p, rel, info, link); !keep || err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(info, filepath.ToSlash(link))
		if err != nil {
			return err
		}
		h.Name = path.Join(prefix, filepath.ToSlash(rel))
		if d.IsDir() {
			h.Name += "/"
		}
		h.Uname, h.Gname, h.Uid, h.Gid = "", "", 0, 0
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		n, err := io.Copy(tw, src)
		total += n
		return err
	})
	return total, err
}
