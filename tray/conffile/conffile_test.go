package conffile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadUpdate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", Name)
	if m, err := Read(path); err != nil || len(m) != 0 {
		t.Fatalf("missing file: %v %v", m, err)
	}
	if err := Update(path, map[string]string{"template": "macos", "cpu": "4"}); err != nil {
		t.Fatal(err)
	}
	if err := Update(path, map[string]string{"cpu": "", "max-builds": "2"}); err != nil {
		t.Fatal(err)
	}
	m, err := Read(path)
	if err != nil || len(m) != 2 || m["template"] != "macos" || m["max-builds"] != "2" {
		t.Fatalf("after updates: %v %v", m, err)
	}
	b, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(b), "max-builds = 2\ntemplate = macos\n") {
		t.Fatalf("sorted, one per line: %q", b)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode())
	}
	if err := Update(path, map[string]string{"template": "a\nmax-builds = 9"}); err == nil {
		t.Fatal("a value spanning lines was written")
	}
	os.WriteFile(path, []byte("ok = 1\nbroken line\n"), 0o600)
	if _, err := Read(path); err == nil || !strings.Contains(err.Error(), ":2:") {
		t.Fatalf("malformed line: %v", err)
	}
}
