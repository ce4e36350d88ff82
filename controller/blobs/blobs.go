// Package blobs stores a build's files: the submitted source, the sealed
// signing certificates and credentials, and the artifacts. Files are
// streamed (never held whole in memory), hashed on the way in, and made
// visible only when complete and verified, so a reader never sees half a
// file and a failed upload leaves nothing behind. Where the bytes live is a
// Backend: a directory on this machine (Dir, the default) or an
// S3-compatible bucket shared by every replica (package s3blobs).
package blobs

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/freeagent-build/freeagent/api"
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

// AttemptsDir holds the artifacts of a build's attempts, one folder per
// attempt: builds/<id>/attempts/<attempt id>/artifact-<name>.
const AttemptsDir = "attempts"

// File names one stored file of a build.
type File struct {
	kind    fileKind
	name    string
	attempt string // the attempt that made an artifact; "" for artifacts stored before attempts owned theirs
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

// Artifact is an artifact made by one attempt of a build; name must be a
// CleanName. Two attempts may upload the same name: each is kept under its
// own attempt's folder, and the database says which attempt's file the
// build shows. attemptID "" names an artifact stored before artifacts
// belonged to attempts (builds/<id>/artifact-<name>).
func Artifact(attemptID, name string) File {
	return File{kind: kindArtifact, name: name, attempt: attemptID}
}

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

// Store keeps build files in a Backend under builds/<build id>/, sealing
// certificates and credentials and checking every file's SHA-256 before it
// is committed.
type Store struct {
	b   Backend
	box seal.Box
	// firsts recycles Fill's first buffers (*[fillFirst]byte): every
	// submit and every result fills one, and a fresh 64 KiB each was most
	// of the bytes the controller allocated, so most of the garbage
	// collections it ran, under a steady stream of builds.
	firsts sync.Pool
}

// New returns a store keeping its files in b. key is the 32-byte AES-256
// key that seals certificates and credentials at rest.
func New(b Backend, key []byte) (*Store, error) {
	box, err := seal.New(key)
	if err != nil {
		return nil, fmt.Errorf("certificate key: %w", err)
	}
	return &Store{b: b, box: box}, nil
}

// Open returns a store on the file store (Dir) rooted at root.
func Open(root string, key []byte) (*Store, error) {
	d, err := NewDir(root)
	if err != nil {
		return nil, err
	}
	return New(d, key)
}

// Backend is where the store keeps its files.
func (s *Store) Backend() Backend { return s.b }

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

// prefix returns the key prefix of a build's files; buildID must already
// be validated by the caller (store.ValidID), and is checked again here.
func prefix(buildID string) (string, error) {
	if buildID == "" || strings.ContainsAny(buildID, "/\\.") {
		return "", fmt.Errorf("invalid build id %q", buildID)
	}
	return "builds/" + buildID + "/", nil
}

// objectKey is the object key of a build's file.
func objectKey(buildID string, f File) (string, error) {
	p, err := prefix(buildID)
	if err != nil {
		return "", err
	}
	switch f.kind {
	case kindSource:
		return p + SourceFile, nil
	case kindCerts:
		return p + CertsFile, nil
	case kindCredentials:
		return p + CredentialsFile, nil
	case kindArtifact:
		if f.name == "" || CleanName(f.name) != f.name {
			return "", fmt.Errorf("invalid artifact name %q", f.name)
		}
		if f.attempt == "" {
			return p + ArtifactPrefix + f.name, nil
		}
		if strings.ContainsAny(f.attempt, "/\\.") {
			return "", fmt.Errorf("invalid attempt id %q", f.attempt)
		}
		return p + AttemptsDir + "/" + f.attempt + "/" + ArtifactPrefix + f.name, nil
	}
	return "", errors.New("unknown kind of build file")
}

// Pending is a file being written. Call Commit to make it visible, or
// Abort to discard it; Abort after Commit is a no-op.
type Pending struct {
	w      Writer
	h      hash.Hash
	n      int64
	firsts *sync.Pool // the store's (Store.firsts)
}

// Create starts writing a build file.
func (s *Store) Create(ctx context.Context, buildID string, f File) (*Pending, error) {
	key, err := objectKey(buildID, f)
	if err != nil {
		return nil, err
	}
	w, err := s.b.Create(ctx, key)
	if err != nil {
		return nil, err
	}
	return &Pending{w: w, h: sha256.New(), firsts: &s.firsts}, nil
}

// Buffers of Fill: a small first one, enough for most sources and logs,
// and for larger files fillBuffers of fillChunk bytes cycling from the
// receiver to the writer to the hasher and back.
const (
	fillFirst   = 64 << 10
	fillChunk   = 1 << 20
	fillBuffers = 4
)

// Fill copies r into the file, failing with ErrTooLarge beyond limit bytes.
//
// Large files go through a pipeline of three goroutines, each on its own
// chunk: this one receives, a second writes what was received, a third
// hashes what was written. SHA-256 costs about as much CPU as receiving
// and writing together; one after the other they made an upload through
// the controller half as fast as a plain copy of the same bytes, and with
// the hash alone beside the rest it still waited behind every write. The
// chunks are large (fewer system calls) and reused (no allocation per
// chunk). Fill returns once both goroutines are done, with the writer's
// error, else the receiver's.
func (p *Pending) Fill(r io.Reader, limit int64) error {
	lr := io.LimitReader(r, limit-p.n+1)
	buf, _ := p.firsts.Get().(*[fillFirst]byte)
	if buf == nil {
		buf = new([fillFirst]byte)
	}
	defer p.firsts.Put(buf) // Write retains nothing (io.Writer's contract)
	first := buf[:]
	n, err := readChunk(lr, first)
	if err == io.EOF {
		// Small: all of it is here.
		if _, err := p.Write(first[:n]); err != nil {
			return err
		}
		return p.checkLimit(limit)
	}
	if err != nil {
		return err
	}
	if _, err := p.Write(first); err != nil {
		return err
	}
	free := make(chan []byte, fillBuffers)
	for range fillBuffers {
		free <- make([]byte, fillChunk)
	}
	toWrite := make(chan []byte, fillBuffers)
	toHash := make(chan []byte, fillBuffers)
	failed := make(chan struct{}) // closed by the writer when a write fails
	written := make(chan error, 1)
	go func() {
		var err error
		for b := range toWrite {
			if err == nil {
				var n int
				n, err = p.w.Write(b)
				p.n += int64(n)
				if err != nil {
					close(failed)
				}
			}
			if err != nil {
				free <- b[:cap(b)] // drain: the receiver stops at its next chunk
				continue
			}
			toHash <- b
		}
		close(toHash)
		written <- err
	}()
	hashed := make(chan struct{})
	go func() {
		defer close(hashed)
		for b := range toHash {
			p.h.Write(b)
			free <- b[:cap(b)]
		}
	}()
	err = receive(lr, free, toWrite, failed)
	close(toWrite)
	werr := <-written
	<-hashed
	if err = cmp.Or(werr, err); err != nil {
		return err
	}
	return p.checkLimit(limit)
}

// receive reads r in chunks into buffers from free and hands them to the
// writer, until r ends, fails, or the writer failed.
func receive(r io.Reader, free <-chan []byte, toWrite chan<- []byte, failed <-chan struct{}) error {
	for {
		var b []byte
		select {
		case b = <-free:
		case <-failed:
			return nil // the writer's error is the one to report
		}
		n, err := readChunk(r, b)
		if n > 0 {
			toWrite <- b[:n]
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readChunk reads into b until it is full or r fails; io.EOF means r
// ended cleanly (a truncated multipart part says io.ErrUnexpectedEOF,
// which must not pass for the end).
func readChunk(r io.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (p *Pending) checkLimit(limit int64) error {
	if p.n > limit {
		return ErrTooLarge
	}
	return nil
}

// Write appends b (for callers that produce the content themselves).
func (p *Pending) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
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

// Prepare makes the written bytes durable in the store without showing
// them (see Writer.Prepare): call it before the transaction that commits
// and records the file, which then stays short.
func (p *Pending) Prepare(ctx context.Context) error { return p.w.Prepare(ctx) }

// Commit makes the file visible, complete and durable: the caller records
// it in the database next, and that record must never outlive the file.
func (p *Pending) Commit(ctx context.Context) error { return p.w.Commit(ctx) }

// Abort discards the file.
func (p *Pending) Abort() { p.w.Abort() }

// Open opens a stored file for reading, with its size and time.
func (s *Store) Open(ctx context.Context, buildID string, f File) (Object, Info, error) {
	key, err := objectKey(buildID, f)
	if err != nil {
		return nil, Info{}, err
	}
	return s.b.Open(ctx, key)
}

// keyCheck is the object that tells whether this replica's certificate key
// is the one the store's sealed files were made with.
const keyCheck = "keys/certs-key-check.sealed"

// ErrKeyMismatch is returned by CheckSealKey for a key that cannot open
// what the store was sealed with.
var ErrKeyMismatch = errors.New("the certificate key differs from the one this store's files were sealed with")

// CheckSealKey makes sure every controller sharing the store seals with
// the same key: the first start leaves a small sealed marker, and a start
// whose key cannot open it fails with ErrKeyMismatch, instead of builds
// failing later when a replica cannot unseal another's certificates.
func (s *Store) CheckSealKey(ctx context.Context) error {
	aad := []byte("certificate key check")
	obj, _, err := s.b.Open(ctx, keyCheck)
	if errors.Is(err, fs.ErrNotExist) {
		// The first start. Replicas starting together race here: one
		// marker wins, and the others check their key against it.
		err = s.b.CreateNew(ctx, keyCheck, s.box.Seal([]byte("freeagent"), aad))
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		obj, _, err = s.b.Open(ctx, keyCheck)
	}
	if err != nil {
		return fmt.Errorf("read the key check: %w", err)
	}
	defer obj.Close()
	b, err := io.ReadAll(io.LimitReader(obj, 4<<10))
	if err != nil {
		return fmt.Errorf("read the key check: %w", err)
	}
	if _, err := s.box.Open(b, aad); err != nil {
		return ErrKeyMismatch
	}
	return nil
}

// DirectURL returns a short-lived URL the client can GET file f from
// directly (the S3 store), or "" when the file is served by the controller
// (the file store, or direct downloads turned off).
func (s *Store) DirectURL(ctx context.Context, buildID string, f File, ttl time.Duration, contentType, disposition string) (string, error) {
	p, ok := s.b.(Direct)
	if !ok {
		return "", nil
	}
	key, err := objectKey(buildID, f)
	if err != nil {
		return "", err
	}
	return p.PresignGet(ctx, key, ttl, contentType, disposition)
}

// MaxDirectUpload is the largest file a client uploads directly: what one
// server-side copy takes (S3's CopyObject), which moves a checked upload
// into place. Larger files go through the controller.
const MaxDirectUpload = 5 << 30

// UploadRef names a direct upload in progress: its staging key and, for a
// multipart upload, the service's upload id and the plan's part size.
// Controllers keep it in a sealed ticket between the two calls.
type UploadRef struct {
	Key      string
	UploadID string
	PartSize int64
}

// DirectUpload is where a client sends one file, to a staging key of its
// own: one signed PUT URL (with Headers), or for a multipart upload one
// signed URL per part (each with its PartHeaders). FinishDirectUpload
// checks it and PromoteUpload moves it to its build.
type DirectUpload struct {
	UploadRef
	URL         string
	Headers     map[string]string
	PartURLs    []string
	PartHeaders []map[string]string
}

// StartDirectUpload signs the upload of an artifact of size bytes with
// SHA-256 sha256hex by an attempt of a build, valid for ttl; a file sent
// in parts (api.Parts) comes with its parts' hex SHA-256s, partSums, and
// each part's URL takes only those bytes. ok is false when the store takes
// no direct uploads (the file store, direct=false, or a file over
// MaxDirectUpload), or for a file sent in parts declared without partSums
// (a client that predates them): no part URL is signed for undeclared
// bytes, and the client streams through the controller instead.
func (s *Store) StartDirectUpload(ctx context.Context, buildID, attemptID string, size int64, sha256hex string, partSums []string, ttl time.Duration) (DirectUpload, bool, error) {
	p, err := prefix(buildID)
	if err != nil {
		return DirectUpload{}, false, err
	}
	if attemptID == "" || strings.ContainsAny(attemptID, "/\\.") {
		return DirectUpload{}, false, fmt.Errorf("invalid attempt id %q", attemptID)
	}
	return s.startDirect(ctx, "uploads/"+strings.TrimPrefix(p, "builds/")+attemptID+"/", size, sha256hex, partSums, ttl)
}

// SourceUploads holds the staging keys of direct source uploads, made
// before their build has an id.
const SourceUploads = "uploads/sources/"

// StartSourceUpload signs the upload of a build's source archive, before
// the build exists; see StartDirectUpload.
func (s *Store) StartSourceUpload(ctx context.Context, size int64, sha256hex string, partSums []string, ttl time.Duration) (DirectUpload, bool, error) {
	return s.startDirect(ctx, SourceUploads, size, sha256hex, partSums, ttl)
}

// DirectUploads reports whether the store takes direct uploads at all.
func (s *Store) DirectUploads() bool {
	d, ok := s.b.(Direct)
	return ok && d.DirectTransfers()
}

func (s *Store) startDirect(ctx context.Context, dir string, size int64, sha256hex string, partSums []string, ttl time.Duration) (up DirectUpload, ok bool, err error) {
	d, isDirect := s.b.(Direct)
	parts := api.Parts(size)
	if !isDirect || !d.DirectTransfers() || size > MaxDirectUpload || (parts > 0 && len(partSums) == 0) {
		return DirectUpload{}, false, nil
	}
	if len(partSums) != parts {
		return DirectUpload{}, false, fmt.Errorf("a direct upload of %d bytes has %d parts, not the %d part checksums declared", size, parts, len(partSums))
	}
	r := make([]byte, 12)
	rand.Read(r) //nolint:errcheck // crypto/rand does not fail on supported platforms
	up.Key = dir + hex.EncodeToString(r)
	if parts == 0 {
		if up.URL, up.Headers, err = d.PresignPut(ctx, up.Key, ttl, sha256hex); err != nil || up.URL == "" {
			return DirectUpload{}, false, err
		}
		return up, true, nil
	}
	up.PartSize = api.PartSize(size)
	if up.UploadID, up.PartURLs, up.PartHeaders, err = d.StartMultipart(ctx, up.Key, size, up.PartSize, partSums, ttl); err != nil || up.UploadID == "" {
		return DirectUpload{}, false, err
	}
	return up, true, nil
}

// FinishDirectUpload checks the object a client sent to a staging key
// against the size and SHA-256 it declared, completing a multipart upload
// first. The service computes the SHA-256 (it verified a single PUT's, and
// hashes an assembled multipart object); the controller reads the object
// back only when the service keeps no checksum. A mismatch removes the
// object and gives ErrChecksum; nothing at the key gives fs.ErrNotExist.
func (s *Store) FinishDirectUpload(ctx context.Context, ref UploadRef, size int64, sha256hex string) error {
	d, ok := s.b.(Direct)
	if !ok || !strings.HasPrefix(ref.Key, "uploads/") {
		return fmt.Errorf("%q is not a direct upload", ref.Key)
	}
	if ref.UploadID != "" {
		if err := d.CompleteMultipart(ctx, ref.Key, ref.UploadID, size, ref.PartSize); err != nil {
			return err
		}
	}
	info, sum, err := d.Checksum(ctx, ref.Key)
	if err != nil {
		return err
	}
	if sum == "" && info.Size == size {
		obj, _, err := s.b.Open(ctx, ref.Key)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, obj)
		obj.Close()
		if err != nil {
			return fmt.Errorf("read the upload back: %w", err)
		}
		sum = hex.EncodeToString(h.Sum(nil))
	}
	if info.Size != size || !strings.EqualFold(sum, sha256hex) {
		s.b.Delete(ctx, ref.Key) //nolint:errcheck // best effort: the garbage collector removes what remains
		return fmt.Errorf("%w: declared %d bytes with sha256 %s, the store holds %d bytes with sha256 %s", ErrChecksum, size, sha256hex, info.Size, sum)
	}
	return nil
}

// AbortDirectUpload gives up a direct upload: its object, or its parts.
func (s *Store) AbortDirectUpload(ctx context.Context, ref UploadRef) error {
	d, ok := s.b.(Direct)
	if !ok || !strings.HasPrefix(ref.Key, "uploads/") {
		return fmt.Errorf("%q is not a direct upload", ref.Key)
	}
	var err error
	if ref.UploadID != "" {
		err = d.AbortMultipart(ctx, ref.Key, ref.UploadID)
	}
	return errors.Join(err, s.b.Delete(ctx, ref.Key))
}

// Head reads up to len(b) bytes from the start of a staging upload (to
// tell an archive's format); it gives the number read.
func (s *Store) Head(ctx context.Context, key string, b []byte) (int, error) {
	obj, _, err := s.b.Open(ctx, key)
	if err != nil {
		return 0, err
	}
	defer obj.Close()
	n, err := obj.ReadAt(b, 0)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

// PromoteUpload makes a checked direct upload build file f, inside the
// service, and removes the staging object.
func (s *Store) PromoteUpload(ctx context.Context, key, buildID string, f File) error {
	d, ok := s.b.(Direct)
	if !ok || !strings.HasPrefix(key, "uploads/") {
		return fmt.Errorf("%q is not a direct upload", key)
	}
	dst, err := objectKey(buildID, f)
	if err != nil {
		return err
	}
	if err := d.Copy(ctx, key, dst); err != nil {
		return err
	}
	s.b.Delete(ctx, key) //nolint:errcheck // best effort: the garbage collector removes what remains
	return nil
}

// maxSealed bounds what Unseal reads: sealed files are small (the
// certificates zip and the credentials JSON, limited at submit).
const maxSealed = 64 << 20

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
func (s *Store) PrepareSeal(ctx context.Context, buildID string, f File, plain []byte) (*Pending, error) {
	aad, err := sealAAD(buildID, f)
	if err != nil {
		return nil, err
	}
	p, err := s.Create(ctx, buildID, f)
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
func (s *Store) Unseal(ctx context.Context, buildID string, f File) ([]byte, error) {
	aad, err := sealAAD(buildID, f)
	if err != nil {
		return nil, err
	}
	obj, _, err := s.Open(ctx, buildID, f)
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	b, err := io.ReadAll(io.LimitReader(obj, maxSealed+1))
	if err != nil {
		return nil, fmt.Errorf("read sealed %s of build %s: %w", f, buildID, err)
	}
	if len(b) > maxSealed {
		return nil, fmt.Errorf("sealed %s of build %s: %w", f, buildID, ErrTooLarge)
	}
	plain, err := s.box.Open(b, aad)
	if err != nil {
		return nil, fmt.Errorf("open sealed %s of build %s: %w", f, buildID, err)
	}
	return plain, nil
}

// Remove deletes one stored file; a missing file is not an error.
func (s *Store) Remove(ctx context.Context, buildID string, f File) error {
	key, err := objectKey(buildID, f)
	if err != nil {
		return err
	}
	return s.b.Delete(ctx, key)
}

// RemoveSecrets deletes a build's sealed certificates and credentials:
// what must not outlive the build.
func (s *Store) RemoveSecrets(ctx context.Context, buildID string) error {
	return errors.Join(s.Remove(ctx, buildID, Certs), s.Remove(ctx, buildID, Credentials))
}

// RemoveBuild deletes everything a build stored.
func (s *Store) RemoveBuild(ctx context.Context, buildID string) error {
	p, err := prefix(buildID)
	if err != nil {
		return err
	}
	var errs []error
	for info, err := range s.b.List(ctx, p) {
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		errs = append(errs, s.b.Delete(ctx, info.Key))
	}
	return errors.Join(errs...)
}

// CopySource copies build src's source for build dst (a retry). The
// returned Pending must be committed or aborted.
func (s *Store) CopySource(ctx context.Context, src, dst string) (*Pending, error) {
	in, _, err := s.Open(ctx, src, Source)
	if err != nil {
		return nil, fmt.Errorf("open source of build %s: %w", src, err)
	}
	defer in.Close()
	p, err := s.Create(ctx, dst, Source)
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
func (s *Store) CopySealed(ctx context.Context, src, dst string, f File) (*Pending, error) {
	plain, err := s.Unseal(ctx, src, f)
	if err != nil {
		return nil, err
	}
	return s.PrepareSeal(ctx, dst, f, plain)
}
