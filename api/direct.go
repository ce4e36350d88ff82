package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// MultipartThreshold is the size above which a direct upload is sent in
// parts (S3 multipart upload), each retried on its own, rather than as one
// PUT.
const MultipartThreshold = 64 << 20

// minPartSize and maxPlannedParts shape a multipart plan: parts of at
// least 16 MiB, more only when a file would need more than 256 of them.
const (
	minPartSize     = 16 << 20
	maxPlannedParts = 256
)

// PartSize is the size of every part but the last in a multipart upload
// of size bytes: 16 MiB, or larger (a whole number of MiB) for files over
// 4 GiB, so that no plan has more than 256 parts. The controller plans
// with it, and a client hashes the parts it will send with it before it
// asks (DirectUploadRequest.PartSHA256).
func PartSize(size int64) int64 {
	ps := (size + maxPlannedParts - 1) / maxPlannedParts
	ps = (ps + 1<<20 - 1) &^ (1<<20 - 1)
	return max(ps, minPartSize)
}

// Parts is how many parts a direct upload of size bytes is sent in: 0 for
// one PUT (size up to MultipartThreshold).
func Parts(size int64) int {
	if size <= MultipartThreshold {
		return 0
	}
	ps := PartSize(size)
	return int((size + ps - 1) / ps)
}

// UploadSums hashes a file as it is written to it, for the
// DirectUploadRequest that declares it: the whole file's SHA-256 and, for
// a file sent in parts, each part's, in the one pass over the bytes a
// client already makes to hash the file.
type UploadSums struct {
	whole hash.Hash
	part  hash.Hash // nil when the file is known to go in one PUT
	// partSize is the part size the parts are hashed at: the plan's for
	// the size given, or a file up to 4 GiB's when the size is unknown.
	partSize int64
	inPart   int64 // bytes of the current part hashed so far
	n        int64
	parts    []string // hex SHA-256 of each whole part hashed
}

// NewUploadSums hashes a file of size bytes, or of a size not yet known
// (-1): its parts are then hashed as a file up to 4 GiB plans them, and a
// larger file is read again by Declare.
func NewUploadSums(size int64) *UploadSums {
	u := &UploadSums{whole: sha256.New(), partSize: PartSize(max(size, 0))}
	if size < 0 || Parts(size) > 0 {
		u.part = sha256.New()
	}
	return u
}

// Write hashes p; it never fails.
func (u *UploadSums) Write(p []byte) (int, error) {
	u.whole.Write(p)
	u.n += int64(len(p))
	if u.part == nil {
		return len(p), nil
	}
	for rest := p; len(rest) > 0; {
		k := min(int64(len(rest)), u.partSize-u.inPart)
		u.part.Write(rest[:k])
		rest, u.inPart = rest[k:], u.inPart+k
		if u.inPart == u.partSize {
			u.parts = append(u.parts, hex.EncodeToString(u.part.Sum(nil)))
			u.part.Reset()
			u.inPart = 0
		}
	}
	return len(p), nil
}

// Declare gives the request that declares the bytes written, as name.
// r reads the same bytes again; it is read only when they were hashed in
// other parts than their plan's (a size not known in advance, over 4
// GiB, or other than the one given), and may otherwise be nil.
func (u *UploadSums) Declare(name string, r io.ReaderAt) (DirectUploadRequest, error) {
	req := DirectUploadRequest{Name: name, Size: u.n, SHA256: hex.EncodeToString(u.whole.Sum(nil))}
	parts := Parts(u.n)
	if parts == 0 {
		return req, nil
	}
	if u.part != nil && u.partSize == PartSize(u.n) {
		req.PartSHA256 = slices.Clip(u.parts)
		if u.inPart > 0 {
			req.PartSHA256 = append(req.PartSHA256, hex.EncodeToString(u.part.Sum(nil)))
		}
		return req, nil
	}
	if r == nil {
		return DirectUploadRequest{}, fmt.Errorf("the %d bytes written were not hashed in the parts a direct upload sends them in, and there is nothing to read them again from", u.n)
	}
	ps := PartSize(u.n)
	h := sha256.New()
	req.PartSHA256 = make([]string, parts)
	for i := range req.PartSHA256 {
		h.Reset()
		off := int64(i) * ps
		if _, err := io.Copy(h, io.NewSectionReader(r, off, min(ps, u.n-off))); err != nil {
			return DirectUploadRequest{}, fmt.Errorf("hash part %d of %d: %w", i+1, parts, err)
		}
		req.PartSHA256[i] = hex.EncodeToString(h.Sum(nil))
	}
	return req, nil
}

// ErrStoreUnreachable is SendDirect's error when the object store a signed
// URL points at cannot be reached from here (a VM or laptop outside the
// store's network): the caller sends the bytes through the controller
// instead.
var ErrStoreUnreachable = errors.New("the object store is unreachable from here")

// StoreError is the object store's refusal of a signed request: an expired
// signature, other bytes than the declared ones (400 BadDigest), a full
// bucket. The next attempt should start over with a fresh DirectUpload.
type StoreError struct {
	Status  int
	Message string // the start of the store's answer
}

func (e *StoreError) Error() string {
	return fmt.Sprintf("the object store refused the upload: %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// directParallel is how many parts of a multipart upload are in flight at
// once: enough to fill a link whose round trips are long, few enough not
// to starve the rest of the machine.
const directParallel = 4

// partTries is how often one part is sent before the upload gives up: a
// part is small, and sending it again is cheaper than starting over.
const partTries = 3

// SendDirect sends the size bytes of f to where up says (one PUT, or its
// parts with their PartHeaders, directParallel at a time), before the
// caller names up.Ticket to the controller. A network failure gives an
// error wrapping ErrStoreUnreachable, a refusal a *StoreError. hc nil is
// http.DefaultClient; it needs no controller credentials, the URLs carry
// their own signatures.
func SendDirect(ctx context.Context, hc *http.Client, up DirectUpload, f io.ReaderAt, size int64) error {
	if hc == nil {
		hc = http.DefaultClient
	}
	if !up.Direct {
		return errors.New("SendDirect: the controller asked for no direct upload")
	}
	if len(up.Parts) == 0 {
		return putOnce(ctx, hc, up.URL, up.Headers, f, 0, size)
	}
	if up.PartSize <= 0 || (size+up.PartSize-1)/up.PartSize != int64(len(up.Parts)) {
		return fmt.Errorf("the controller's plan of %d parts of %d bytes does not fit %d bytes", len(up.Parts), up.PartSize, size)
	}
	if len(up.PartHeaders) != 0 && len(up.PartHeaders) != len(up.Parts) {
		return fmt.Errorf("the controller's plan has %d parts but headers for %d", len(up.Parts), len(up.PartHeaders))
	}
	partHeaders := func(i int) map[string]string {
		if len(up.PartHeaders) == 0 {
			return nil // a controller that signs no part checksums
		}
		return up.PartHeaders[i]
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(directParallel, len(up.Parts)) {
		wg.Go(func() {
			for i := range next {
				off := int64(i) * up.PartSize
				n := min(up.PartSize, size-off)
				var err error
				for range partTries {
					if err = putOnce(ctx, hc, up.Parts[i], partHeaders(i), f, off, n); err == nil || ctx.Err() != nil {
						break
					}
					var se *StoreError
					if errors.As(err, &se) && se.Status < 500 {
						break // refused: the same URL will be refused again
					}
				}
				if err != nil {
					cancel(fmt.Errorf("part %d of %d: %w", i+1, len(up.Parts), err))
				}
			}
		})
	}
feed:
	for i := range up.Parts {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return nil
}

// putOnce PUTs bytes [off, off+n) of f to a signed URL.
func putOnce(ctx context.Context, hc *http.Client, rawURL string, headers map[string]string, f io.ReaderAt, off, n int64) error {
	// A SectionReader the client can rewind (it may resend the body on
	// a redirect or a closed keep-alive connection).
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, rawURL, io.NewSectionReader(f, off, n))
	if err != nil {
		return fmt.Errorf("signed upload URL: %w", err)
	}
	req.ContentLength = n
	if n == 0 {
		req.Body = http.NoBody
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL carries a signature: keep it out of messages
		}
		return fmt.Errorf("%w: %w", ErrStoreUnreachable, err)
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return &StoreError{Status: resp.StatusCode, Message: strings.TrimSpace(string(msg))}
	}
	return nil
}

// StartSourceUpload asks where to upload a source archive directly, before
// the submit that names its ticket (SubmitRequest.SourceTicket).
func (c *Client) StartSourceUpload(ctx context.Context, req DirectUploadRequest) (DirectUpload, error) {
	var out DirectUpload
	return out, c.call(ctx, http.MethodPost, "/api/builds/uploads", req, &out, nil)
}

// Streamed reports whether the answer to a StartSourceUpload or
// StartArtifactUpload means "send the bytes through the controller": the
// store takes no direct uploads (Direct false), or the controller
// predates them (404, 405). Any other error is the call's own.
func Streamed(up DirectUpload, err error) bool {
	if s := StatusOf(err); s == http.StatusNotFound || s == http.StatusMethodNotAllowed {
		return true
	}
	return err == nil && !up.Direct
}
