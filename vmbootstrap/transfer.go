package vmbootstrap

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/boundedfile"
)

// errChecksum: a download did not match the controller's checksum.
var errChecksum = errors.New("checksum mismatch")

// downloadSource streams the build's source archive into path, verifying
// it against the controller's X-Checksum-Sha256. Network trouble, 5xx and
// a checksum mismatch are retried (from the start) for up to budget.
func downloadSource(ctx context.Context, c *api.Client, buildID, vmToken, path string, budget time.Duration, onRetry func(error, time.Duration)) (int64, string, error) {
	var size int64
	var sum string
	err := retry(ctx, budget, func(ctx context.Context) error {
		// A transfer that stalls is abandoned and started again.
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		stall := time.AfterFunc(stallTimeout, func() { cancel(errStalled) })
		defer stall.Stop()
		resp, err := c.Source(ctx, buildID, vmToken, "")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		resp.Body = progressBody{resp.Body, func() { stall.Reset(stallTimeout) }}
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("create %s: %w", path, err)
		}
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(f, h), resp.Body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("download source: %w", err)
		}
		got := hex.EncodeToString(h.Sum(nil))
		if want := resp.Header.Get(api.HeaderChecksum); want != "" && !strings.EqualFold(want, got) {
			return fmt.Errorf("download source: %w: got sha256 %s, the controller says %s", errChecksum, got, want)
		}
		if resp.ContentLength >= 0 && n != resp.ContentLength {
			return fmt.Errorf("download source: %d bytes instead of %d", n, resp.ContentLength)
		}
		size, sum = n, got
		return nil
	}, onRetry)
	return size, sum, err
}

// uploadDirect sends the file straight to the store, with the URL (or, for
// a large file, the parts' URLs) the controller signs for it, and has the
// controller check and record it; ok is false when the controller takes no
// direct uploads (its file store, or a controller that predates them).
func uploadDirect(ctx context.Context, c *api.Client, buildID, vmToken, path string, decl api.DirectUploadRequest) (api.Artifact, bool, error) {
	name, size, sum := decl.Name, decl.Size, decl.SHA256
	up, err := c.StartArtifactUpload(ctx, buildID, vmToken, decl)
	if api.Streamed(up, err) {
		return api.Artifact{}, false, nil
	}
	if err != nil {
		return api.Artifact{}, false, err
	}
	f, err := openArtifact(path)
	if err != nil {
		return api.Artifact{}, true, fmt.Errorf("open artifact: %w", err)
	}
	defer f.Close()
	if err := api.SendDirect(ctx, c.HTTP, up, f, size); err != nil {
		// Every refusal is worth one more try with a fresh URL: an expired
		// signature, the store's hiccup, or bytes changed on the way
		// (BadDigest, 400), which the next read of the file may fix.
		var se *api.StoreError
		if errors.As(err, &se) && se.Status == http.StatusBadRequest {
			err = fmt.Errorf("%w: %w", errChecksum, err)
		}
		return api.Artifact{}, true, fmt.Errorf("upload %s: %w", name, err)
	}
	art, err := c.CompleteArtifactUpload(ctx, buildID, vmToken, up.Ticket)
	if api.StatusOf(err) == http.StatusUnprocessableEntity {
		return api.Artifact{}, true, fmt.Errorf("%w: %w", errChecksum, err)
	}
	if err != nil {
		return api.Artifact{}, true, err
	}
	if !strings.EqualFold(art.SHA256, sum) {
		return api.Artifact{}, true, fmt.Errorf("upload %s: %w: the controller recorded sha256 %s, the file has %s", name, errChecksum, art.SHA256, sum)
	}
	return art, true, nil
}

// stallTimeout: a download receiving nothing for this long is restarted.
const stallTimeout = time.Minute

var errStalled = errors.New("the transfer stalled")

// progressBody calls onData after every read that returned bytes.
type progressBody struct {
	io.ReadCloser
	onData func()
}

func (b progressBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.onData()
	}
	return n, err
}

// openArtifact opens a file the build wrote, refusing a symbolic link (or
// anything but a regular file) in its place: the build's user could swap
// one in between the search for artifacts and their upload, and this
// process may read what that user cannot.
func openArtifact(path string) (*os.File, error) {
	return boundedfile.OpenNoFollow(path, math.MaxInt64)
}

// declareFile reads a file once for its size, its SHA-256 and, when a
// direct upload sends it in parts, its parts' (api.UploadSums).
func declareFile(path string) (api.DirectUploadRequest, error) {
	f, err := openArtifact(path)
	if err != nil {
		return api.DirectUploadRequest{}, fmt.Errorf("hash %s: %w", path, err)
	}
	defer f.Close()
	size := int64(-1)
	if st, err := f.Stat(); err == nil {
		size = st.Size()
	}
	sums := api.NewUploadSums(size)
	if _, err := io.Copy(sums, f); err != nil {
		return api.DirectUploadRequest{}, fmt.Errorf("hash %s: %w", path, err)
	}
	decl, err := sums.Declare(filepath.Base(path), f)
	if err != nil {
		return api.DirectUploadRequest{}, fmt.Errorf("hash %s: %w", path, err)
	}
	return decl, nil
}

// uploadArtifact streams one artifact from disk with its SHA-256 (computed
// first, with its parts' for a direct upload; checked by the controller or
// the store on the way in), retrying transient
// failures for up to budget.
//
// When the controller's store takes direct uploads (S3), the file is PUT
// straight to the store with a signed URL the controller hands out, and
// the controller only checks and records it.
func uploadArtifact(ctx context.Context, c *api.Client, buildID, vmToken, path string, budget time.Duration, onRetry func(error, time.Duration)) (api.Artifact, error) {
	decl, err := declareFile(path)
	if err != nil {
		return api.Artifact{}, err
	}
	sum, size := decl.SHA256, decl.Size
	var out api.Artifact
	direct, raw := true, true
	err = retry(ctx, budget, func(ctx context.Context) error {
		if direct {
			art, ok, err := uploadDirect(ctx, c, buildID, vmToken, path, decl)
			if errors.Is(err, api.ErrStoreUnreachable) {
				direct = false // the next try goes through the controller
			}
			if err != nil || ok {
				out = art
				return err
			}
			direct = false // the controller streams it: fall through
		}
		f, err := openArtifact(path)
		if err != nil {
			return fmt.Errorf("open artifact: %w", err)
		}
		defer f.Close()
		var art api.Artifact
		if raw {
			art, err = c.PutArtifact(ctx, buildID, vmToken, filepath.Base(path), f, size, sum)
			if s := api.StatusOf(err); s == http.StatusNotFound || s == http.StatusMethodNotAllowed {
				raw = false // a controller that predates the raw upload
				if _, err = f.Seek(0, io.SeekStart); err != nil {
					return fmt.Errorf("rewind artifact: %w", err)
				}
			}
		}
		if !raw {
			art, err = c.UploadArtifact(ctx, buildID, vmToken, filepath.Base(path), f, sum)
		}
		if err != nil {
			if api.StatusOf(err) == 422 {
				// The bytes changed on the way: send them again.
				return fmt.Errorf("%w: %w", errChecksum, err)
			}
			return err
		}
		if !strings.EqualFold(art.SHA256, sum) {
			return fmt.Errorf("upload %s: %w: the controller stored sha256 %s, the file has %s", filepath.Base(path), errChecksum, art.SHA256, sum)
		}
		out = art
		return nil
	}, onRetry)
	return out, err
}
