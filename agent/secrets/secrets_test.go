package secrets

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// exercise runs the same contract against any Store.
func exercise(t *testing.T, s Store) {
	t.Helper()
	if _, err := s.Get(KeyAPIKey); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get of a missing key: %v", err)
	}
	if err := s.Set(KeyAPIKey, "fak_first"); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(KeyAPIKey, "fak_second"); err != nil { // update in place
		t.Fatal(err)
	}
	if err := s.Set(KeyWorkerID, "w-1"); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get(KeyAPIKey); err != nil || v != "fak_second" {
		t.Fatalf("get: %q %v", v, err)
	}
	if err := s.Delete(KeyAPIKey); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(KeyAPIKey); err != nil {
		t.Fatalf("deleting twice: %v", err)
	}
	if _, err := s.Get(KeyAPIKey); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if v, err := s.Get(KeyWorkerID); err != nil || v != "w-1" {
		t.Fatalf("other key: %q %v", v, err)
	}
}

func TestFileStore(t *testing.T) {
	dir := t.TempDir()
	s := &FileStore{Path: filepath.Join(dir, "sub", "credentials.json")}
	exercise(t, s)
	st, err := os.Stat(s.Path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file mode: %v %v", st.Mode(), err)
	}
	os.Chmod(s.Path, 0o644)
	if _, err := s.Get(KeyWorkerID); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable file must be refused with the fix: %v", err)
	}
}

func TestSecurityStoreNeverPutsSecretsInArgv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("FAKE_KEYCHAIN_DIR", dir)
	tool, _ := filepath.Abs("testdata/security")
	exercise(t, &SecurityStore{Tool: tool})
	argv, err := os.ReadFile(filepath.Join(dir, "argv.log"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(argv), "fak_") {
		t.Fatalf("a secret reached the security tool's command line:\n%s", argv)
	}
	if !strings.Contains(string(argv), "add-generic-password -U -s "+Service+" -a api-key -l Free Agent worker api-key -w") {
		t.Fatalf("unexpected calls:\n%s", argv)
	}
}

func TestSecurityStoreExplainsRefusals(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("FAKE_KEYCHAIN_DIR", dir)
	tool, _ := filepath.Abs("testdata/security")
	s := &SecurityStore{Tool: tool}
	if err := s.Set(KeyAPIKey, "fak_k"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ refuse, want string }{
		{"interaction", "security unlock-keychain"},
		{"auth", "Always Allow"},
		{"cancel", "Access Control"},
	} {
		t.Setenv("FAKE_KEYCHAIN_REFUSE", c.refuse)
		_, err := s.Get(KeyAPIKey)
		if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "could not read") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: get: %v", c.refuse, err)
		}
		if err := s.Set(KeyAPIKey, "fak_k2"); !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "could not store") {
			t.Errorf("%s: set: %v", c.refuse, err)
		}
		if err := s.Delete(KeyAPIKey); !errors.Is(err, ErrDenied) {
			t.Errorf("%s: delete: %v", c.refuse, err)
		}
	}
	// Any other failure is reported as it is, not as a refusal.
	t.Setenv("FAKE_KEYCHAIN_REFUSE", "")
	s.Tool = filepath.Join(dir, "missing-security")
	if _, err := s.Get(KeyAPIKey); err == nil || errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "missing-security") {
		t.Fatalf("missing tool: %v", err)
	}
}
