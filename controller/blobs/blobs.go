// Package blobs stores a build's files on disk: the submitted source, the
// sealed signing certificates and credentials, and the artifacts. Files are streamed (never
// held whole in memory), hashed on the way in, written to a temporary file
// and renamed into place only when complete, so a reader never sees half a
// file and a failed upload leaves nothing behind.
package blobs

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/freeagent-build/freeagent/controller/seal"
)

// ErrTooLarge is returned when a file exceeds its size limit.
var ErrTooLarge = errors.New("file exceeds the size limit")

// ErrChecksum is returned when a file's SHA-256 differs from the one declared.
var ErrChecksum = errors.New("SHA-256 checksum mismatch")

// On-disk names of a build's files. Every artifact's name starts with
// ArtifactPrefix, so no artifact name can ever address the source or the
// sealed files; keeping them in the build's own folder saves a directory
// per build (a mkdir costs a quarter of a millisecond on a busy disk).
const (
	SourceFile      = "source"
	CertsFile       = "certs.sealed"
	CredentialsFile = "credentials.sealed"
	ArtifactPrefix  = "artifact-"
)

// File names one stored file of a build.
type File struct {
	kind fileKind
	name string
}

type fileKind int

const (
	kindSource fileKind = iota + 1
	kindCerts
	kindCredentials
	kindArtifact
)

// Source is the submitted project archive; Certs the sealed iOS
// certificates zip; Credentials the sealed api.BuildCredentials JSON.
var (
	Source      = File{kind: kindSource}
	Certs       = File{kind: kindCerts}
	Credentials = File{kind: kindCredentials}
)

// Artifact is a build artifact; name must be a CleanName.
func Artifact(name string) File { return File{kind: kindArtifact, name: name} }

func (f File) String() string {
	switch f.kind {
	case kindSource:
		return "source"
	case kindCerts:
		return "certificates"
	case kindCredentials:
		return "credentials"
	}
	return "artifact " + f.name
}

// Store keeps build files under Root/builds/<build id>/.
type Store struct {
	root string
	box  seal.Box
}

// Open prepares the directory tree under root. key is the 32-byte AES-256
// key that seals certificates and credentials at rest.
func Open(root string, key []byte) (*Store, error) {
	box, err := seal.New(key)
	if err != nil {
		return nil, fmt.Errorf("certificate key: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(root, "builds"), 0o700); err != nil {
		return nil, fmt.Errorf("create file store: %w", err)
	}
	return &Store{root: root, box: box}, nil
}

// Derive returns a box under a key derived from the certificate key for
// one purpose (project variables, farm credentials): secrets that live in
// the database rather than in a build's files.
func (s *Store) Derive(purpose string) (seal.Box, error) { return s.box.Derive(purpose) }

// LoadOrCreateKey reads a hex 32-byte key from path, creating it (0600) with
// a fresh random key when the file does not exist. The certificate key and
// the install-link signing key are both kept this way.
func LoadOrCreateKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("create key directory: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) { // another process created it first
			return LoadOrCreateKey(path)
		}
		if err != nil {
			return nil, fmt.Errorf("create key file %s: %w", path, err)
		}
		_, err = f.WriteString(hex.EncodeToString(key) + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("write key file %s: %w", path, err)
		}
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read key file %s: %w", path, err)
	}
	key, err := ParseKey(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return key, nil
}

// ParseKey decodes a 64-hex-digit (32-byte) key.
func ParseKey(s string) ([]byte, error) {
	key, err := hex.DecodeString(s)
	if err != nil || len(key) != 32 {
		return nil, errors.New("a key must be 64 hex digits (32 bytes); generate one with `openssl rand -hex 32`")
	}
	return key, nil
}

// CleanName reduces an uploaded file name to a safe plain name: the last
// element of any path, with no control characters. It returns "" for names
// that cannot be used ("", ".", "..").
func CleanName(name string) string {
	name = strings.ReplaceAll(name, "\\", "/")
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	name = strings.TrimSpace(name)
	if name == "" || name == "." || name == ".." || len(name) > 255 || !utf8.ValidString(name) {
		return ""
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return ""
		}
	}
	return name
}

// dir returns the directory of a build; buildID must already be validated
// by the caller (store.ValidID), and is checked again here.
func (s *Store) dir(buildID string) (string, error) {
	if buildID == "" || strings.ContainsAny(buildID, "/\\.") {
		return "", fmt.Errorf("invalid build id %q", buildID)
	}
	return filepath.Join(s.root, "builds", buildID), nil
}

func (s *Store) path(buildID string, f File) (string, error) {
	d, err := s.dir(buildID)
	if err != nil {
		return "", err
	}
	switch f.kind {
	case kindSource:
		return filepath.Join(d, SourceFile), nil
	case kindCerts:
		return filepath.Join(d, CertsFile), nil
	case kindCredentials:
		return filepath.Join(d, CredentialsFile), nil
	case kindArtifact:
		if f.name == "" || CleanName(f.name) != f.name {
			return "", fmt.Errorf("invalid artifact name %q", f.name)
		}
		return filepath.Join(d, ArtifactPrefix+f.name), nil
	}
	return "", errors.New("unknown kind of build file")
}

// Pending is a file being written. Call Commit to move it into place, or
// Abort to discard it; Abort after Commit is a no-op.
type Pending struct {
	f     *os.File
	h     hash.Hash
	n     int64
	final string
	done  bool
}

// Create starts writing a build file.
func (s *Store) Create(buildID string, f File) (*Pending, error) {
	final, err := s.path(buildID, f)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return nil, fmt.Errorf("create build directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(final), ".upload-*")
	if err != nil {
		return nil, fmt.Errorf("create temporary file: %w", err)
	}
	return &Pending{f: tmp, h: sha256.New(), final: final}, nil
}

// Fill copies r into the file, failing with ErrTooLarge beyond limit bytes.
func (p *Pending) Fill(r io.Reader, limit int64) error {
	n, err := io.Copy(io.MultiWriter(p.f, p.h), io.LimitReader(r, limit-p.n+1))
	p.n += n
	if err != nil {
		return err
	}
	if p.n > limit {
		return ErrTooLarge
	}
	return nil
}

// Write appends b (for callers that produce the content themselves).
func (p *Pending) Write(b []byte) (int, error) {
	n, err := p.f.Write(b)
	p.h.Write(b[:n])
	p.n += int64(n)
	return n, err
}

// Size is the number of bytes written so far.
func (p *Pending) Size() int64 { return p.n }

// SHA256 is the hex SHA-256 of the bytes written so far.
func (p *Pending) SHA256() string { return hex.EncodeToString(p.h.Sum(nil)) }

// Verify checks the content against a declared hex SHA-256 ("" skips).
func (p *Pending) Verify(want string) error {
	if want != "" && !strings.EqualFold(want, p.SHA256()) {
		return fmt.Errorf("%w: declared %s, received %s", ErrChecksum, want, p.SHA256())
	}
	return nil
}

// Commit flushes the file to disk and renames it into place.
func (p *Pending) Commit() error {
	if p.done {
		return errors.New("file already committed or aborted")
	}
	p.done = true
	err := p.f.Sync()
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(p.f.Name(), p.final)
	}
	if err != nil {
		os.Remove(p.f.Name())
		return fmt.Errorf("store file: %w", err)
	}
	// The rename is durable only once its directory is: the caller commits
	// a database record of this file next, which must never outlive it.
	if err := syncDir(filepath.Dir(p.final)); err != nil {
		return fmt.Errorf("store file: %w", err)
	}
	return nil
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

// Abort discards the file.
func (p *Pending) Abort() {
	if p.done {
		return
	}
	p.done = true
	p.f.Close()
	os.Remove(p.f.Name())
}

// Open opens a stored file for reading.
func (s *Store) Open(buildID string, f File) (*os.File, error) {
	path, err := s.path(buildID, f)
	if err != nil {
		return nil, err
	}
	return os.Open(path)
}

// sealAAD binds a sealed file to its build and its kind. The certificates
// keep the bare build id they were first sealed with.
func sealAAD(buildID string, f File) ([]byte, error) {
	switch f.kind {
	case kindCerts:
		return []byte(buildID), nil
	case kindCredentials:
		return []byte("credentials\x00" + buildID), nil
	}
	return nil, fmt.Errorf("%s is not a sealed file", f)
}

// PrepareSeal encrypts small data (bounded by the caller's limit) with
// AES-GCM into a pending sealed file (Certs or Credentials), so the caller
// can commit it together with its database record. The build id is
// authenticated data: a sealed file moved to another build's directory, or
// renamed to the other sealed kind, does not open there.
func (s *Store) PrepareSeal(buildID string, f File, plain []byte) (*Pending, error) {
	aad, err := sealAAD(buildID, f)
	if err != nil {
		return nil, err
	}
	p, err := s.Create(buildID, f)
	if err != nil {
		return nil, err
	}
	if _, err := p.Write(s.box.Seal(plain, aad)); err != nil {
		p.Abort()
		return nil, fmt.Errorf("write sealed %s: %w", f, err)
	}
	return p, nil
}

// Unseal reads and decrypts a build's sealed file; a missing file gives an
// error satisfying errors.Is(err, os.ErrNotExist).
func (s *Store) Unseal(buildID string, f File) ([]byte, error) {
	aad, err := sealAAD(buildID, f)
	if err != nil {
		return nil, err
	}
	path, err := s.path(buildID, f)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	plain, err := s.box.Open(b, aad)
	if err != nil {
		return nil, fmt.Errorf("open sealed %s of build %s: %w", f, buildID, err)
	}
	return plain, nil
}

// Remove deletes one stored file; a missing file is not an error.
func (s *Store) Remove(buildID string, f File) error {
	path, err := s.path(buildID, f)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// RemoveSecrets deletes a build's sealed certificates and credentials:
// what must not outlive the build.
func (s *Store) RemoveSecrets(buildID string) error {
	return errors.Join(s.Remove(buildID, Certs), s.Remove(buildID, Credentials))
}

// RemoveBuild deletes everything a build stored.
func (s *Store) RemoveBuild(buildID string) error {
	d, err := s.dir(buildID)
	if err != nil {
		return err
	}
	return os.RemoveAll(d)
}

// CopySource copies build src's source for build dst (a retry). The
// returned Pending must be committed or aborted.
func (s *Store) CopySource(src, dst string) (*Pending, error) {
	in, err := s.Open(src, Source)
	if err != nil {
		return nil, fmt.Errorf("open source of build %s: %w", src, err)
	}
	defer in.Close()
	p, err := s.Create(dst, Source)
	if err != nil {
		return nil, err
	}
	if err := p.Fill(in, 1<<62); err != nil {
		p.Abort()
		return nil, fmt.Errorf("copy source: %w", err)
	}
	return p, nil
}

// CopySealed re-seals src's sealed file f for dst (the build id is bound
// into the ciphertext, so a plain copy would not open). Must be committed
// or aborted.
func (s *Store) CopySealed(src, dst string, f File) (*Pending, error) {
	plain, err := s.Unseal(src, f)
	if err != nil {
		return nil, err
	}
	return s.PrepareSeal(dst, f, plain)
}
