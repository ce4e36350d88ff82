package vmbootstrap

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/controller/api"
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

// hashFile returns the hex SHA-256 and size of a file.
func hashFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("hash %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// uploadArtifact streams one artifact from disk with its SHA-256 (computed
// first, checked by the controller on the way in), retrying transient
// failures for up to budget.
func uploadArtifact(ctx context.Context, c *api.Client, buildID, vmToken, path string, budget time.Duration, onRetry func(error, time.Duration)) (api.Artifact, error) {
	sum, _, err := hashFile(path)
	if err != nil {
		return api.Artifact{}, err
	}
	var out api.Artifact
	err = retry(ctx, budget, func(ctx context.Context) error {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("open artifact: %w", err)
		}
		defer f.Close()
		art, err := c.UploadArtifact(ctx, buildID, vmToken, filepath.Base(path), f, sum)
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
