package blobs_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"testing"

	"github.com/freeagent-build/freeagent/controller/blobs"
)

// failingReader gives its bytes, then err instead of io.EOF: a multipart
// part whose body was cut says io.ErrUnexpectedEOF.
type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		err = f.err
	}
	return n, err
}

// Fill stores every size whole with its SHA-256 (below, at and above its
// first buffer, across many chunks), refuses one byte over the limit, and
// takes a reader that fails, even with io.ErrUnexpectedEOF, for the error
// it is, never for the end of the file.
func TestFill(t *testing.T) {
	ctx := context.Background()
	s, err := blobs.Open(t.TempDir(), make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range []int{0, 1, 64 << 10, 64<<10 + 1, 5<<20 + 3, 3} { // the last reuses a pooled first buffer
		data := make([]byte, n)
		rand.Read(data)
		want := sha256.Sum256(data)
		p, err := s.Create(ctx, "b1", blobs.Artifact("a", "f"))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Fill(bytes.NewReader(data), int64(n)); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if p.Size() != int64(n) || p.SHA256() != hex.EncodeToString(want[:]) {
			t.Fatalf("%d bytes: size %d, sha %s", n, p.Size(), p.SHA256())
		}
		if err := p.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		obj, _, err := s.Open(ctx, "b1", blobs.Artifact("a", "f"))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(obj)
		obj.Close()
		if !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: stored %d other bytes", n, len(got))
		}
		if n == 0 {
			continue
		}
		over, err := s.Create(ctx, "b1", blobs.Artifact("a", "over"))
		if err != nil {
			t.Fatal(err)
		}
		if err := over.Fill(bytes.NewReader(data), int64(n-1)); !errors.Is(err, blobs.ErrTooLarge) {
			t.Fatalf("%d bytes with a limit one less: %v", n, err)
		}
		over.Abort()
		for _, cut := range []error{io.ErrUnexpectedEOF, errors.New("connection reset")} {
			p, err := s.Create(ctx, "b1", blobs.Artifact("a", "cut"))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Fill(&failingReader{bytes.NewReader(data), cut}, int64(n)); !errors.Is(err, cut) {
				t.Fatalf("case %d, %d bytes cut by %v: Fill gave %v", i, n, cut, err)
			}
			p.Abort()
		}
	}
}

// failAfter is a backend whose writers fail once they hold more than
// limit bytes, as a full disk or a dropped S3 connection would.
type failAfter struct {
	blobs.Backend
	limit int64
	err   error
}

func (f failAfter) Create(ctx context.Context, key string) (blobs.Writer, error) {
	w, err := f.Backend.Create(ctx, key)
	return &failingWriter{Writer: w, left: f.limit, err: f.err}, err
}

type failingWriter struct {
	blobs.Writer
	left int64
	err  error
}

func (w *failingWriter) Write(b []byte) (int, error) {
	if int64(len(b)) > w.left {
		n, _ := w.Writer.Write(b[:w.left])
		w.left = 0
		return n, w.err
	}
	w.left -= int64(len(b))
	return w.Writer.Write(b)
}

// A write that fails in the middle of a large file (while the receiver,
// the writer and the hasher each hold a chunk) ends Fill with that error,
// whether the body itself ends cleanly or is cut too, and without
// waiting for the rest of the body.
func TestFillWriteFails(t *testing.T) {
	ctx := context.Background()
	diskFull := errors.New("no space left on device")
	dir, err := blobs.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 9<<20)
	rand.Read(data)
	for _, at := range []int64{0, 100 << 10, 3<<20 + 5, 8 << 20} {
		s, err := blobs.New(failAfter{Backend: dir, limit: at, err: diskFull}, make([]byte, 32))
		if err != nil {
			t.Fatal(err)
		}
		for _, body := range []io.Reader{
			bytes.NewReader(data),
			&failingReader{bytes.NewReader(data), io.ErrUnexpectedEOF},
			io.MultiReader(bytes.NewReader(data), endless{}), // a body that never ends
		} {
			p, err := s.Create(ctx, "b1", blobs.Artifact("a", "f"))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Fill(body, 1<<40); !errors.Is(err, diskFull) {
				t.Fatalf("writes failing after %d bytes: Fill gave %v", at, err)
			}
			p.Abort()
		}
	}
}

// endless reads zeros forever.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
