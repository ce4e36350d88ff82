package blobs

import (
	"context"
	"io"
	"iter"
	"time"
)

// Backend is where a Store keeps its objects: a directory on this machine
// (Dir, file://) or an S3-compatible bucket (package s3blobs, s3://) that
// every replica shares. Keys are slash-separated paths such as
// "builds/<id>/source"; the Store builds them from validated ids and clean
// names, and a Backend refuses keys with empty, "." or ".." elements.
//
// A missing object is reported with an error satisfying
// errors.Is(err, fs.ErrNotExist) (os.ErrNotExist), whatever the backend.
type Backend interface {
	// Create starts writing the object at key, a stream of any length.
	// Nothing is visible at key until Writer.Commit returns nil; an
	// existing object stays readable, whole, until then, and is replaced
	// whole.
	Create(ctx context.Context, key string) (Writer, error)
	// CreateNew stores a small object at key only if none is there: an
	// error satisfying errors.Is(err, fs.ErrExist) otherwise. Replicas
	// starting together on an empty store race through it.
	CreateNew(ctx context.Context, key string, data []byte) error
	// Open opens the object at key for reading. The Object reads any
	// range (Seek, ReadAt), which is how resumable downloads (Range)
	// are served.
	Open(ctx context.Context, key string) (Object, Info, error)
	// Stat describes the object at key.
	Stat(ctx context.Context, key string) (Info, error)
	// Delete removes the object at key; a missing object is not an error.
	Delete(ctx context.Context, key string) error
	// List yields the committed objects whose keys start with prefix, in
	// no particular order, for clean-up and garbage collection.
	List(ctx context.Context, prefix string) iter.Seq2[Info, error]
}

// Writer is an object being written; see Backend.Create. Exactly one of
// Commit and Abort ends it: Abort after Commit is a no-op, and a failed
// Commit leaves nothing behind.
type Writer interface {
	io.Writer
	// Prepare does ahead what makes Commit slow, once everything is
	// written: the bytes become durable in the backend (the file store
	// syncs its temporary file; the S3 store sends it to a staging
	// object) without being visible at key. Callers prepare before the
	// database transaction that commits and records the object, so that
	// transaction lasts a rename or a copy inside the service, not an
	// upload. Optional: Commit does whatever Prepare did not.
	Prepare(ctx context.Context) error
	// Commit makes the object visible at its key, complete and durable.
	Commit(ctx context.Context) error
	// Abort discards what was written.
	Abort()
}

// Object is an open stored object. For the file store it is the *os.File
// itself, so downloads keep the kernel's sendfile path.
type Object interface {
	io.ReadSeekCloser
	io.ReaderAt
}

// Direct is a Backend that clients reach themselves: downloads and uploads
// go straight between the client and the service with short-lived signed
// URLs, and the controller only signs and checks (the S3 store).
type Direct interface {
	// DirectTransfers is false when clients must not be sent to the
	// service (direct=false): every transfer then goes through the
	// controller, and the Presign and multipart methods answer "".
	DirectTransfers() bool
	// PresignGet returns a URL that GETs the object at key (Range
	// included) until ttl has passed, answering with contentType and
	// Content-Disposition disposition; "" when direct transfers are off.
	PresignGet(ctx context.Context, key string, ttl time.Duration, contentType, disposition string) (string, error)
	// PresignPut returns a URL, and the headers to send with it, that PUT
	// an object at key until ttl has passed; the service refuses bytes
	// whose SHA-256 is not sha256hex. "" when direct transfers are off.
	PresignPut(ctx context.Context, key string, ttl time.Duration, sha256hex string) (string, map[string]string, error)
	// Checksum describes the object at key with the hex SHA-256 the
	// service verified on upload, "" when it keeps none.
	Checksum(ctx context.Context, key string) (Info, string, error)
	// Copy copies the object at src to dst inside the service; dst
	// appears whole or not at all.
	Copy(ctx context.Context, src, dst string) error
	// StartMultipart begins an upload of size bytes at key in parts of
	// partSize bytes (the last one shorter), numbered from 1, whose hex
	// SHA-256s are partSums, and signs a PUT for each, valid until ttl has
	// passed, that carries exactly its part's length and bytes (the
	// service refuses others) when sent with its partHeaders; "" when
	// direct transfers are off.
	StartMultipart(ctx context.Context, key string, size, partSize int64, partSums []string, ttl time.Duration) (uploadID string, partURLs []string, partHeaders []map[string]string, err error)
	// CompleteMultipart assembles the upload from exactly its planned
	// parts (each partSize bytes but the last, size in all), with the
	// checksums the service verified as they came, and makes Checksum
	// report the whole object's SHA-256. Other parts abort the upload with
	// ErrChecksum; a repeat after completion only checks.
	CompleteMultipart(ctx context.Context, key, uploadID string, size, partSize int64) error
	// AbortMultipart abandons an upload and frees its parts.
	AbortMultipart(ctx context.Context, key, uploadID string) error
	// AbortStaleMultipart abandons the uploads under prefix begun more
	// than age ago (the garbage collector's, for direct uploads whose URLs
	// and ticket expired) and says how many.
	AbortStaleMultipart(ctx context.Context, prefix string, age time.Duration) (int, error)
}

// Info describes a stored object.
type Info struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Sweeper is a Backend that keeps leftovers of its own beside its objects:
// temporary files of writes a crash interrupted (Dir), incomplete multipart
// uploads and spool files (the S3 store). The garbage collector calls it.
type Sweeper interface {
	// SweepStale removes such leftovers older than age and says how many.
	SweepStale(ctx context.Context, age time.Duration) (int, error)
}
