package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

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
// parts, directParallel at a time), before the caller names up.Ticket to
// the controller. A network failure gives an error wrapping
// ErrStoreUnreachable, a refusal a *StoreError. hc nil is
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
					if err = putOnce(ctx, hc, up.Parts[i], nil, f, off, n); err == nil || ctx.Err() != nil {
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
