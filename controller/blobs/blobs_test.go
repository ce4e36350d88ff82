package blobs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newStore(t *testing.T) (*Store, string) {
	t.Helper()
	root := t.TempDir()
	key, err := LoadOrCreateKey(filepath.Join(root, "certs.key"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(filepath.Join(root, "files"), key)
	if err != nil {
		t.Fatal(err)
	}
	return s, root
}

func TestCleanName(t *testing.T) {
	for in, want := range map[string]string{
		"app.apk":                "app.apk",
		"../../etc/passwd":       "passwd",
		`..\..\windows\a.ipa`:    "a.ipa",
		"dir/sub/App.ipa":        "App.ipa",
		"..":                     "",
		".":                      "",
		"":                       "",
		"a/..":                   "",
		"bad\x00name":            "",
		"line\nbreak":            "",
		strings.Repeat("x", 256): "",
	} {
		if got := CleanName(in); got != want {
			t.Errorf("CleanName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPendingCommitAbortAndLimit(t *testing.T) {
	s, root := newStore(t)
	p, err := s.Create(context.Background(), "b1", Artifact("a1", "app.apk"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Fill(strings.NewReader("hello"), 100); err != nil {
		t.Fatal(err)
	}
	final := filepath.Join(root, "files", "builds", "b1", AttemptsDir, "a1", ArtifactPrefix+"app.apk")
	if _, err := os.Stat(final); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("file visible before commit")
	}
	if p.SHA256() != "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" || p.Size() != 5 {
		t.Fatalf("hash/size: %s %d", p.SHA256(), p.Size())
	}
	if err := p.Verify("deadbeef"); !errors.Is(err, ErrChecksum) {
		t.Fatalf("verify with a wrong checksum: %v", err)
	}
	if err := p.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.Abort() // no-op after commit
	if b, err := os.ReadFile(final); err != nil || string(b) != "hello" {
		t.Fatalf("committed file: %q %v", b, err)
	}

	big, _ := s.Create(context.Background(), "b1", Artifact("a1", "big.bin"))
	if err := big.Fill(bytes.NewReader(make([]byte, 101)), 100); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	big.Abort()
	entries, _ := os.ReadDir(filepath.Join(root, "files", "builds", "b1", AttemptsDir, "a1"))
	if len(entries) != 1 {
		t.Fatalf("aborted upload left files: %v", entries)
	}
	if _, err := s.Create(context.Background(), "../x", Artifact("a1", "a")); err == nil {
		t.Fatal("a build id with a path was accepted")
	}
	if _, err := s.Create(context.Background(), "b1", Artifact("a1", "../x")); err == nil {
		t.Fatal("an unclean name was accepted")
	}
	if _, err := s.Create(context.Background(), "b1", Artifact("../a1", "x")); err == nil {
		t.Fatal("an attempt id with a path was accepted")
	}
	// Artifacts stored before they belonged to attempts keep their key.
	legacy, _ := s.Create(context.Background(), "b1", Artifact("", "old.apk"))
	legacy.Write([]byte("old"))
	if err := legacy.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "files", "builds", "b1", ArtifactPrefix+"old.apk")); err != nil || string(b) != "old" {
		t.Fatalf("legacy artifact: %q %v", b, err)
	}
}

func TestSealBindsBuildAndKey(t *testing.T) {
	s, root := newStore(t)
	for _, f := range []File{Certs, Credentials} {
		p, err := s.PrepareSeal(context.Background(), "b1", f, []byte("secret of "+f.String()))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Commit(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Unseal(context.Background(), "b1", f); err != nil || string(got) != "secret of "+f.String() {
			t.Fatalf("unseal %s: %q %v", f, got, err)
		}
	}
	raw, _ := os.ReadFile(filepath.Join(root, "files", "builds", "b1", CredentialsFile))
	if bytes.Contains(raw, []byte("secret of")) {
		t.Fatal("the sealed file holds the plaintext")
	}
	// Renamed to the other sealed kind it does not open.
	b1 := filepath.Join(root, "files", "builds", "b1")
	os.Rename(filepath.Join(b1, CredentialsFile), filepath.Join(b1, CertsFile))
	if _, err := s.Unseal(context.Background(), "b1", Certs); err == nil {
		t.Fatal("sealed credentials opened as certificates")
	}
	// Moved to another build's directory it does not open.
	os.MkdirAll(filepath.Join(root, "files", "builds", "b2"), 0o700)
	os.Rename(filepath.Join(b1, CertsFile), filepath.Join(root, "files", "builds", "b2", CertsFile))
	if _, err := s.Unseal(context.Background(), "b2", Certs); err == nil {
		t.Fatal("sealed file opened under another build id")
	}
	if err := s.RemoveSecrets(context.Background(), "b2"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Unseal(context.Background(), "b2", Certs); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after RemoveSecrets: %v", err)
	}
	// The key persists across restarts; a different key cannot open.
	key1, _ := LoadOrCreateKey(filepath.Join(root, "certs.key"))
	key2, _ := LoadOrCreateKey(filepath.Join(root, "certs.key"))
	if !bytes.Equal(key1, key2) {
		t.Fatal("key changed between loads")
	}
	if st, _ := os.Stat(filepath.Join(root, "certs.key")); st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", st.Mode().Perm())
	}
	if _, err := ParseKey("abc"); err == nil {
		t.Fatal("short key accepted")
	}
}
