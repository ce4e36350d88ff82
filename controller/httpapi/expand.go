package httpapi

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/internal/bytesize"
	"github.com/freeagent-build/freeagent/internal/cachekey"
	"github.com/freeagent-build/freeagent/internal/sourcefp"
)

// getLimits tells a client what the controller accepts, so expo-build
// refuses an oversized project before its upload rather than after it.
func (s *Server) getLimits(w http.ResponseWriter, r *http.Request, _ store.APIKey) {
	writeJSON(w, http.StatusOK, api.Limits{MaxSourceBytes: s.limits.Source})
}

// farmOffers tells a client what the online workers offer builds (those
// of the pools ?project= may use), so expo-build refuses a profile no
// worker can run before its upload. Workers are not named: the offers are
// what a developer may know of the farm.
func (s *Server) farmOffers(w http.ResponseWriter, r *http.Request, k store.APIKey) {
	project := r.URL.Query().Get("project")
	if project != "" {
		if err := validProject("project", project); err != nil {
			s.fail(w, r, err)
			return
		}
		if err := projectAllowed(k, project); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	offers, err := s.store.FarmOffers(r.Context(), project)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, offers)
}

// sourceTooLarge names the limit a project exceeded and the setting that
// raises it (blobs.ErrTooLarge alone says neither).
func sourceTooLarge(err error, limit int64) error {
	if errors.Is(err, blobs.ErrTooLarge) {
		return fmt.Errorf("%w: the project archive is larger than the controller's limit of %d bytes (%s); leave large files out with .easignore, or raise the controller's --max-source-bytes",
			store.ErrTooLarge, limit, bytesize.IEC(limit))
	}
	return err
}

// expansionGuard passes a tar.gz through (to the file store) while a
// goroutine decompresses a copy and adds up the bytes of the files in it,
// never storing them: a few gigabytes of zeros compress to a few megabytes
// and would pass a bound on the compressed size alone. When the files add
// up to more than the limit, the next Read fails with a store.ErrTooLarge
// naming the limit, so the upload stops there. Memory stays at the
// decompressor's window and the tar reader's header buffers. On the way it
// computes the source's fingerprint and indexes the files its cache keys
// read (measureTarGz).
type expansionGuard struct {
	r    io.Reader
	pw   *io.PipeWriter
	done chan measured
}

// measured is measureTarGz's verdict.
type measured struct {
	source sourceTree
	err    error
}

// sourceTree is what the controller learns of a tar.gz source as it
// passes: its fingerprint (sourcefp) and the files its dependency caches'
// keys are computed from (cachekey.Index). Both are zero for a stream that
// is not a valid tar.gz to its end.
type sourceTree struct {
	fingerprint string
	caches      *cachekey.Index
}

func guardExpansion(r io.Reader, limit int64, gzips *sync.Pool) *expansionGuard {
	pr, pw := io.Pipe()
	g := &expansionGuard{r: r, pw: pw, done: make(chan measured, 1)}
	go func() {
		src, err := measureTarGz(pr, limit, gzips)
		if err != nil {
			pr.CloseWithError(err) // the writer's next Write fails with err
		} else {
			io.Copy(io.Discard, pr) //nolint:errcheck // what follows the archive is bounded by the compressed limit
		}
		g.done <- measured{src, err}
	}()
	return g
}

func (g *expansionGuard) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	if n > 0 {
		if _, werr := g.pw.Write(p[:n]); werr != nil {
			return 0, werr
		}
	}
	if err == io.EOF {
		g.pw.Close()
	}
	return n, err
}

// finish ends the measurement (at once, if the upload failed before its
// end) and returns its verdict: the source's fingerprint, or why it is
// refused.
func (g *expansionGuard) finish() (sourceTree, error) {
	g.pw.CloseWithError(io.ErrUnexpectedEOF) // no-op after a clean end: the measurer already saw EOF
	m := <-g.done
	return m.source, m.err
}

// measureTarGz reads a tar.gz and fails once the contents of its entries
// add up to more than limit. A stream that is not a valid tar.gz is not
// its business (the build's extraction reports it, as before): measuring
// stops there and nil is returned. It returns the source fingerprint of
// what it read (sourcefp: each entry as the build VM extracts it, hashed
// with its bytes, which it decompresses anyway) and the index of the files
// the cache keys read; neither for a stream that is not a valid tar.gz to
// its end.
//
// The decompressor comes from gzips and goes back to it: a new one
// allocates a 32 KiB window, its tables and a read buffer, which under a
// steady stream of submits was the next largest share of the controller's
// garbage after the file store's buffers; Reset reuses all three.
func measureTarGz(r io.Reader, limit int64, gzips *sync.Pool) (sourceTree, error) {
	d, _ := gzips.Get().(*gunzipper)
	if d == nil {
		d = &gunzipper{br: bufio.NewReader(nil), buf: make([]byte, 32<<10)}
	}
	defer gzips.Put(d)
	d.br.Reset(r)
	if err := d.zr.Reset(d.br); err != nil { // a bufio.Reader is a flate.Reader: gzip adds no buffer of its own
		return sourceTree{}, nil
	}
	tr := tar.NewReader(&d.zr)
	fp, idx := sourcefp.New(), cachekey.NewIndex()
	var total int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return sourceTree{fingerprint: fp.Sum(), caches: idx}, nil // the archive's end
		}
		if err != nil {
			return sourceTree{}, nil // not a tar
		}
		fp.Header(h)
		var dst io.Writer = fp
		if w := idx.Header(h); w != nil {
			dst = io.MultiWriter(fp, w)
		}
		n, err := io.CopyBuffer(dst, io.LimitReader(tr, limit-total+1), d.buf)
		total += n
		if total > limit {
			return sourceTree{}, fmt.Errorf("%w: the project expands to more than %d bytes (%s), the controller's limit, though its archive is smaller; leave large files out with .easignore, or raise the controller's --max-source-bytes",
				store.ErrTooLarge, limit, bytesize.IEC(limit))
		}
		if err != nil {
			return sourceTree{}, nil
		}
	}
}

// gunzipper is a reusable gzip reader with its input buffer, and the
// buffer that carries the entries' bytes to the fingerprint.
type gunzipper struct {
	br  *bufio.Reader
	zr  gzip.Reader
	buf []byte
}
