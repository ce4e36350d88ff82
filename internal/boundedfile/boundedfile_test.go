//go:build unix

package boundedfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo") // nobody ever opens it for writing
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sparse := filepath.Join(dir, "sparse") // 64 GiB, no blocks
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// A file that grows past its size at open: the bounded read still stops.
	exact := filepath.Join(dir, "exact")
	if err := os.WriteFile(exact, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name     string
		read     func(string, int64) ([]byte, error)
		path     string
		limit    int64
		want     string
		tooLarge bool
		notReg   bool
	}{
		{name: "regular", read: Read, path: secret, limit: 6, want: "s3cret"},
		{name: "regular, no follow", read: ReadNoFollow, path: secret, limit: 100, want: "s3cret"},
		{name: "link followed", read: Read, path: link, limit: 100, want: "s3cret"},
		{name: "link refused", read: ReadNoFollow, path: link, limit: 100, notReg: true},
		{name: "fifo", read: Read, path: fifo, limit: 100, notReg: true},
		{name: "fifo, no follow", read: ReadNoFollow, path: fifo, limit: 100, notReg: true},
		{name: "directory", read: ReadNoFollow, path: dir, limit: 100, notReg: true},
		{name: "sparse 64 GiB", read: ReadNoFollow, path: sparse, limit: 1 << 20, tooLarge: true},
		{name: "one byte over", read: Read, path: exact, limit: 9, tooLarge: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := tc.read(tc.path, tc.limit)
			var tl *TooLargeError
			switch {
			case tc.tooLarge:
				if !errors.As(err, &tl) || tl.Limit != tc.limit {
					t.Fatalf("err = %v, want a TooLargeError for %d bytes", err, tc.limit)
				}
			case tc.notReg:
				if !errors.Is(err, ErrNotRegular) {
					t.Fatalf("err = %v, want ErrNotRegular", err)
				}
				if strings.Contains(string(data), "s3cret") {
					t.Fatal("the link's target was read")
				}
			default:
				if err != nil || string(data) != tc.want {
					t.Fatalf("got %q, %v; want %q", data, err, tc.want)
				}
			}
		})
	}
	if _, err := ReadNoFollow(filepath.Join(dir, "missing"), 10); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v, want os.ErrNotExist", err)
	}
}
