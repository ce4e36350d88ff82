package httpapi

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"math/rand/v2"
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

// BenchmarkMeasureTarGz is the controller's work on a streamed source
// beyond storing it: decompress, measure and fingerprint, per expanded
// byte. The project is 1024 files of 64 KiB, half text, half random
// (assets), as a project packs.
func BenchmarkMeasureTarGz(b *testing.B) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	rng := rand.New(rand.NewPCG(1, 2))
	text := bytes.Repeat([]byte("export const answer = 42; // a line of a project's source\n"), 64<<10/58+1)[:64<<10]
	asset := make([]byte, 64<<10)
	var expanded int64
	for i := range 1024 {
		body := text
		if i%2 == 1 {
			for j := range asset {
				asset[j] = byte(rng.Uint32())
			}
			body = asset
		}
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("src/f%04d", i), Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			b.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			b.Fatal(err)
		}
		expanded += int64(len(body))
	}
	if err := errors.Join(tw.Close(), gz.Close()); err != nil {
		b.Fatal(err)
	}
	var pool sync.Pool
	b.SetBytes(expanded)
	b.ReportAllocs()
	for b.Loop() {
		if src, err := measureTarGz(bytes.NewReader(buf.Bytes()), 1<<40, &pool); err != nil || src.fingerprint == "" {
			b.Fatalf("%q %v", src.fingerprint, err)
		}
	}
}
