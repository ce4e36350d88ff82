package httpapi_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/store"
)

// zerosTarGz streams a tar.gz whose entries hold sizes[i] zero bytes each,
// generated as it is read (never whole in memory).
func zerosTarGz(sizes ...int64) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		gz, _ := gzip.NewWriterLevel(pw, gzip.BestSpeed)
		tw := tar.NewWriter(gz)
		zero := make([]byte, 1<<20)
		err := func() error {
			for i, n := range sizes {
				if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("file%d.bin", i), Mode: 0o644, Size: n, Typeflag: tar.TypeReg}); err != nil {
					return err
				}
				for left := n; left > 0; {
					k, err := tw.Write(zero[:min(left, int64(len(zero)))])
					if err != nil {
						return err
					}
					left -= int64(k)
				}
			}
			if err := tw.Close(); err != nil {
				return err
			}
			return gz.Close()
		}()
		pw.CloseWithError(err)
	}()
	return pr
}

// A tar.gz is bounded by what it expands to, not only by what is sent: a
// file of zeros far beyond the limit compresses to almost nothing, and is
// refused with 413 naming the limit and the setting that raises it, with
// nothing stored. Exactly the limit is accepted.
func TestSourceUncompressedLimit(t *testing.T) {
	t.Parallel()
	const limit = 8 << 20
	e := newEnv(t, func(_ *store.Config, l *httpapi.Limits) { l.Source = limit })
	ctx := context.Background()

	got, err := e.developer.Limits(ctx)
	if err != nil || got.MaxSourceBytes != limit {
		t.Fatalf("GET /api/limits = %+v, %v; want max_source_bytes %d", got, err, limit)
	}

	before := biFingerprint(t, e)
	// 256 MiB of zeros: about 1 MiB compressed at BestSpeed, under the
	// 8 MiB limit as sent, 32 times over it expanded.
	_, err = e.developer.Submit(ctx, api.SubmitRequest{Platform: "android", Source: zerosTarGz(1<<10, 256<<20)})
	if api.StatusOf(err) != http.StatusRequestEntityTooLarge {
		t.Fatalf("submit of 256 MiB of zeros: %v, want 413", err)
	}
	for _, want := range []string{"expands to more than 8388608 bytes", "8.0 MiB", "--max-source-bytes", ".easignore"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	biUnchanged(t, e, before)

	// Files adding up to exactly the limit pass.
	sub, err := e.developer.Submit(ctx, api.SubmitRequest{Platform: "android", Source: zerosTarGz(limit/2, limit/2)})
	if err != nil {
		t.Fatalf("submit of exactly the limit: %v", err)
	}
	// One byte more does not.
	_, err = e.developer.Submit(ctx, api.SubmitRequest{Platform: "android", Source: zerosTarGz(limit/2, limit/2+1)})
	if api.StatusOf(err) != http.StatusRequestEntityTooLarge {
		t.Fatalf("submit of the limit plus one byte: %v, want 413", err)
	}
	if _, err := e.developer.Cancel(ctx, sub.ID); err != nil {
		t.Fatal(err)
	}
}

// An archive over the limit as sent is refused with the limit and the
// setting named.
func TestSourceCompressedLimitNamed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(_ *store.Config, l *httpapi.Limits) { l.Source = 64 << 10 })
	_, err := e.developer.Submit(context.Background(), api.SubmitRequest{Platform: "android", Source: strings.NewReader(string(biGzipLike(64<<10 + 1)))})
	if api.StatusOf(err) != http.StatusRequestEntityTooLarge {
		t.Fatalf("submit: %v, want 413", err)
	}
	for _, want := range []string{"65536 bytes", "--max-source-bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
}

// The case at its size: a 2.6 GB file of zeros (a few megabytes
// compressed) against the default limit of 2 GiB.
func TestSourceOfZerosAtDefaultLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.developer.Submit(context.Background(), api.SubmitRequest{Platform: "android", Source: zerosTarGz(2_600_000_000)})
	if api.StatusOf(err) != http.StatusRequestEntityTooLarge || !strings.Contains(err.Error(), "expands to more than 2147483648 bytes (2.0 GiB)") {
		t.Fatalf("submit of 2.6 GB of zeros: %v, want 413 naming the 2 GiB limit", err)
	}
}
