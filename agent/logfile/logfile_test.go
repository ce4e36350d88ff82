package logfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logs", "agent.log")
	f, err := Open(path, 100, 2)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Repeat("x", 39) + "\n" // 40 bytes
	for i := 0; i < 10; i++ {
		if _, err := f.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	for _, name := range []string{path, path + ".1", path + ".2"} {
		st, err := os.Stat(name)
		if err != nil || st.Size() > 100 || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", name, st, err)
		}
	}
	if _, err := os.Stat(path + ".3"); !os.IsNotExist(err) {
		t.Fatal("kept more old files than asked")
	}
	// Reopening appends.
	f, _ = Open(path, 100, 2)
	f.Write([]byte("y\n"))
	f.Close()
	b, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(b), "y\n") || len(b) < 3 {
		t.Fatalf("append after reopen: %q", b)
	}
}
