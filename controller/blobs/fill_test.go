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
	for i, n := range []int{0, 1, 64 << 10, 64<<10 + 1, 5<<20 + 3} {
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
