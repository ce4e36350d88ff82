package blobs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// tempPrefix starts the names of files being written; they are never
// listed, and no key can name one (artifact files start with "artifact-").
const tempPrefix = ".upload-"

// Dir is the file store (file://DIR): each object is a file under its root,
// written to a temporary file in its final directory and renamed into
// place once complete, so a reader never sees half a file.
type Dir struct {
	root string
}

// NewDir returns the file store rooted at root, creating it (0700).
func NewDir(root string) (*Dir, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create file store: %w", err)
	}
	return &Dir{root: root}, nil
}

// CheckKey reports whether key can name an object: a relative
// slash-separated path with no empty, ".", ".." or temporary-file elements,
// no backslashes and no control characters.
func CheckKey(key string) error {
	if key == "" || len(key) > 1024 || strings.ContainsAny(key, "\\\x00") {
		return fmt.Errorf("invalid object key %q", key)
	}
	for _, el := range strings.Split(key, "/") {
		if el == "" || el == "." || el == ".." || strings.HasPrefix(el, tempPrefix) {
			return fmt.Errorf("invalid object key %q", key)
		}
	}
	return nil
}

func (d *Dir) path(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	return filepath.Join(d.root, filepath.FromSlash(key)), nil
}

// Create starts a temporary file next to key's final place.
func (d *Dir) Create(_ context.Context, key string) (Writer, error) {
	final, err := d.path(key)
	if err != nil {
		return nil, err
	}
	// Delete removes a directory it empties; if that races with this
	// create, make the directory again.
	for range 3 {
		if err = os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
			return nil, fmt.Errorf("create directory for %s: %w", key, err)
		}
		var f *os.File
		if f, err = os.CreateTemp(filepath.Dir(final), tempPrefix+"*"); err == nil {
			return &dirWriter{f: f, final: final}, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	return nil, fmt.Errorf("create temporary file: %w", err)
}

type dirWriter struct {
	f        *os.File
	final    string
	done     bool
	prepared bool  // synced by Prepare
	n        int64 // bytes written
	flushed  int64 // bytes whose writeback has been started
}

// writebackEvery is how many written bytes start their writeback early
// (see startWriteback).
const writebackEvery = 8 << 20

func (w *dirWriter) Write(b []byte) (int, error) {
	n, err := w.f.Write(b)
	w.n += int64(n)
	if w.n-w.flushed >= writebackEvery {
		startWriteback(w.f, w.flushed, w.n-w.flushed)
		w.flushed = w.n
	}
	return n, err
}

// Prepare flushes the temporary file to disk.
func (w *dirWriter) Prepare(context.Context) error {
	if w.done {
		return errors.New("file already committed or aborted")
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("store file: %w", err)
	}
	w.prepared = true
	return nil
}

// Commit flushes the file to disk (unless Prepare did) and renames it
// into place.
func (w *dirWriter) Commit(context.Context) error {
	if w.done {
		return errors.New("file already committed or aborted")
	}
	w.done = true
	var err error
	if !w.prepared {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(w.f.Name(), w.final)
	}
	if err != nil {
		os.Remove(w.f.Name())
		os.Remove(filepath.Dir(w.f.Name()))
		return fmt.Errorf("store file: %w", err)
	}
	// The rename is durable only once its directory is: the caller commits
	// a database record of this file next, which must never outlive it.
	if err := syncDir(filepath.Dir(w.final)); err != nil {
		return fmt.Errorf("store file: %w", err)
	}
	return nil
}

// Abort removes the temporary file, and its directory when that leaves it
// empty (Create may have made it).
func (w *dirWriter) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.f.Close()
	os.Remove(w.f.Name())
	os.Remove(filepath.Dir(w.f.Name())) // fails, harmlessly, while the directory holds anything
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Open returns the file itself, so http.ServeContent can sendfile it.
func (d *Dir) Open(_ context.Context, key string) (Object, Info, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, Info{}, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, Info{}, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, Info{}, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, Info{}, fmt.Errorf("open %s: %w", key, fs.ErrNotExist)
	}
	return f, Info{Key: key, Size: st.Size(), ModTime: st.ModTime()}, nil
}

func (d *Dir) Stat(_ context.Context, key string) (Info, error) {
	p, err := d.path(key)
	if err != nil {
		return Info{}, err
	}
	st, err := os.Stat(p)
	if err != nil {
		return Info{}, err
	}
	if !st.Mode().IsRegular() {
		return Info{}, fmt.Errorf("stat %s: %w", key, fs.ErrNotExist)
	}
	return Info{Key: key, Size: st.Size(), ModTime: st.ModTime()}, nil
}

// Delete removes the file, and its directory when that leaves it empty
// (a build's folder goes with its last file).
func (d *Dir) Delete(_ context.Context, key string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if dir := filepath.Dir(p); dir != d.root {
		os.Remove(dir) // fails, harmlessly, while the directory holds anything
	}
	return nil
}

// List walks the directory that holds prefix's last complete element.
func (d *Dir) List(ctx context.Context, prefix string) iter.Seq2[Info, error] {
	return func(yield func(Info, error) bool) {
		base := path.Dir(prefix) // "builds/x/" → "builds/x"; "builds/x" → "builds"; "b" → "."
		if strings.HasSuffix(prefix, "/") {
			base = strings.TrimSuffix(prefix, "/")
		}
		if base != "." && CheckKey(base) != nil {
			yield(Info{}, fmt.Errorf("invalid prefix %q", prefix))
			return
		}
		start := filepath.Join(d.root, filepath.FromSlash(base))
		err := filepath.WalkDir(start, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), tempPrefix) {
				return nil
			}
			rel, err := filepath.Rel(d.root, p)
			if err != nil {
				return err
			}
			key := filepath.ToSlash(rel)
			if !strings.HasPrefix(key, prefix) {
				return nil
			}
			st, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil // deleted while listing
			}
			if err != nil {
				return err
			}
			if !yield(Info{Key: key, Size: st.Size(), ModTime: st.ModTime()}, nil) {
				return fs.SkipAll
			}
			return nil
		})
		if err != nil {
			yield(Info{}, fmt.Errorf("list %s: %w", prefix, err))
		}
	}
}

// SweepStale removes temporary files older than age: writes a crash or a
// killed process left unfinished (a live write touches its file as it goes).
func (d *Dir) SweepStale(ctx context.Context, age time.Duration) (int, error) {
	cutoff := time.Now().Add(-age)
	n := 0
	err := filepath.WalkDir(d.root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), tempPrefix) {
			return nil
		}
		if st, err := e.Info(); err == nil && st.ModTime().Before(cutoff) {
			if err := os.Remove(p); err == nil {
				n++
				os.Remove(filepath.Dir(p)) // fails, harmlessly, while the directory holds anything
			}
		}
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("sweep temporary files: %w", err)
	}
	return n, nil
}

// CreateNew writes a synced temporary file and links it to key, which
// fails when key exists: unlike a rename, a link never replaces.
func (d *Dir) CreateNew(ctx context.Context, key string, data []byte) error {
	final, err := d.path(key)
	if err != nil {
		return err
	}
	w, err := d.Create(ctx, key)
	if err != nil {
		return err
	}
	dw := w.(*dirWriter)
	defer dw.Abort() // removes the temporary file, linked or not
	if _, err := dw.Write(data); err != nil {
		return fmt.Errorf("store file: %w", err)
	}
	if err := dw.Prepare(ctx); err != nil {
		return err
	}
	if err := os.Link(dw.f.Name(), final); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w", key, fs.ErrExist)
		}
		return fmt.Errorf("store file: %w", err)
	}
	return syncDir(filepath.Dir(final))
}
