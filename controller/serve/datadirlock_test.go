package serve

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The lock says who holds it; a file left by a controller that is gone
// (no flock on it any more) does not block the next start.
func TestDataDirLock(t *testing.T) {
	dir := t.TempDir()
	// What a killed controller leaves: the file, without its flock.
	os.WriteFile(filepath.Join(dir, dataDirLockFile), []byte("999999\nhttp://127.0.0.1:1\n"), 0o600)
	l, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("a stale lock file blocks the start: %v", err)
	}
	_, err = lockDataDir(dir)
	if !errors.Is(err, ErrDataDirInUse) || !strings.Contains(err.Error(), fmt.Sprintf("(pid %d)", os.Getpid())) || !strings.Contains(err.Error(), "is starting") {
		t.Fatalf("second lock while starting: %v", err)
	}
	if err := l.Note("http://127.0.0.1:8080"); err != nil {
		t.Fatal(err)
	}
	_, err = lockDataDir(dir)
	if !errors.Is(err, ErrDataDirInUse) || !strings.Contains(err.Error(), "listens on http://127.0.0.1:8080") || !strings.Contains(err.Error(), "--data-dir") {
		t.Fatalf("second lock while serving: %v", err)
	}
	l.Release()
	l2, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l2.Release()
}
