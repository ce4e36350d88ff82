package blobs

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestDirCreateMakesDirectories: Dir.Create makes the directories of a key
// two directories deep in a fresh store, a sibling in directories that now
// exist, and a key whose directory is a file, which must fail rather than
// write anywhere.
func TestDirCreateMakesDirectories(t *testing.T) {
	ctx := context.Background()
	d, err := NewDir(filepath.Join(t.TempDir(), "files"))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"builds/b1/attempts/a1/artifact-app.apk", "builds/b1/attempts/a1/artifact-app.aab", "builds/b1/source.tar.gz"} {
		w, err := d.Create(ctx, key)
		if err != nil {
			t.Fatalf("create %s: %v", key, err)
		}
		if _, err := io.WriteString(w, key); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(ctx); err != nil {
			t.Fatalf("commit %s: %v", key, err)
		}
		b, err := os.ReadFile(filepath.Join(d.root, filepath.FromSlash(key)))
		if err != nil || string(b) != key {
			t.Fatalf("read %s back: %q, %v", key, b, err)
		}
		st, err := os.Stat(filepath.Dir(filepath.Join(d.root, filepath.FromSlash(key))))
		if err != nil || st.Mode().Perm() != 0o700 {
			t.Fatalf("directory of %s: %v, %v; want mode 0700", key, st.Mode(), err)
		}
	}
	if w, err := d.Create(ctx, "builds/b1/source.tar.gz/artifact-x"); err == nil {
		w.Abort()
		t.Fatal("created a file under a file")
	}
}
