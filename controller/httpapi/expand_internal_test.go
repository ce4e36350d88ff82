package httpapi

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"sync"
	"testing"

	"github.com/freeagent-build/freeagent/controller/store"
)

// The pooled decompressor leaves nothing behind from one archive to the
// next: a bomb after a good archive, a good one after a bomb, one after
// a stream that is no gzip at all, each measured as if alone.
func TestMeasureTarGzReusesItsDecompressor(t *testing.T) {
	tarGz := func(sizes ...int) []byte {
		var b bytes.Buffer
		gz := gzip.NewWriter(&b)
		tw := tar.NewWriter(gz)
		for _, n := range sizes {
			if err := tw.WriteHeader(&tar.Header{Name: "f", Mode: 0o644, Size: int64(n), Typeflag: tar.TypeReg}); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write(make([]byte, n)); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := gz.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	const limit = 100 << 10
	small, bomb := tarGz(1000, 2000), tarGz(60<<10, 60<<10)
	var pool sync.Pool
	for i, c := range []struct {
		in      []byte
		tooLong bool
	}{{small, false}, {bomb, true}, {small, false}, {[]byte("not gzip"), false}, {bomb, true}, {small[:len(small)/2], false}, {small, false}} {
		_, err := measureTarGz(bytes.NewReader(c.in), limit, &pool)
		if got := errors.Is(err, store.ErrTooLarge); got != c.tooLong || (err != nil && !got) {
			t.Fatalf("archive %d: %v, want too large: %v", i, err, c.tooLong)
		}
	}
}
