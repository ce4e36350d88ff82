package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
)

// ArtifactResult is the controller's memory while a big artifact streams
// in and out.
type ArtifactResult struct {
	Bytes int64 `json:"bytes"`
	// BaselineRSS is the controller's VmRSS just before the upload;
	// PeakRSS the largest of the samples taken every RSSIntervalMS during
	// upload and download; PeakHWM the kernel's own peak (VmHWM, reset
	// just before the upload; 0 when it could not be reset). Growth is the
	// larger peak minus the baseline. All MiB.
	BaselineRSS     float64 `json:"baseline_rss_mib"`
	PeakRSS         float64 `json:"peak_rss_mib"`
	PeakHWM         float64 `json:"peak_hwm_mib,omitempty"`
	Growth          float64 `json:"growth_mib"`
	Samples         int     `json:"samples"`
	RSSIntervalMS   float64 `json:"rss_interval_ms"`
	UploadSeconds   float64 `json:"upload_seconds"`
	DownloadSeconds float64 `json:"download_seconds"`
	SHA256          string  `json:"sha256"` // verified: sent = stored = downloaded
}

const artifactName = "app-release.apk"

func runArtifact(ctx context.Context, e *env) (*ArtifactResult, error) {
	cfg := e.cfg
	pid := e.ctrl.pid()
	c := e.client()
	w, err := registerWorker(ctx, c, "artifact")
	if err != nil {
		return nil, err
	}
	job, err := e.startBuild(ctx, c, w, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer func() {
		// The controller's copy: 2 GiB we do not need to keep until the
		// temporary directory goes.
		path := filepath.Join(e.dataDir, "files", "builds", job.ID, blobs.ArtifactPrefix+artifactName)
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			e.logf("   could not remove %s: %v", path, err)
		}
	}()

	r := &ArtifactResult{Bytes: cfg.ArtifactBytes, RSSIntervalMS: toMS(cfg.RSSInterval)}
	if err := api.Sleep(ctx, 200*time.Millisecond); err != nil {
		return nil, err
	}
	base, _, err := memory(pid)
	if err != nil {
		return nil, err
	}
	hwmReset := resetPeakMemory(pid) == nil
	smp := startSampler(pid, cfg.RSSInterval)

	result, err := func() (string, error) {
		start := time.Now()
		sent := sha256.New()
		src := io.TeeReader(io.LimitReader(rand.NewChaCha8([32]byte{'a', 'r', 't'}), cfg.ArtifactBytes), sent)
		resp, err := w.c.Upload(ctx, w.token, api.Result{BuildID: job.ID, AttemptID: job.AttemptID, LeaseToken: job.LeaseToken,
			Success: true, FileName: artifactName, File: src})
		if err != nil {
			return "", fmt.Errorf("upload: %w", err)
		}
		r.UploadSeconds = time.Since(start).Seconds()
		sum := hex.EncodeToString(sent.Sum(nil))
		if resp.Artifact == nil || resp.Artifact.SHA256 != sum || resp.Artifact.Size != cfg.ArtifactBytes {
			return "", fmt.Errorf("upload: the controller recorded %+v; sent %d bytes with SHA-256 %s", resp.Artifact, cfg.ArtifactBytes, sum)
		}

		start = time.Now()
		dl, err := c.DownloadArtifact(ctx, job.ID, artifactName, 0)
		if err != nil {
			return "", fmt.Errorf("download: %w", err)
		}
		defer dl.Body.Close()
		got := sha256.New()
		n, err := io.Copy(got, dl.Body)
		if err != nil {
			return "", fmt.Errorf("download: %w", err)
		}
		r.DownloadSeconds = time.Since(start).Seconds()
		if gotSum := hex.EncodeToString(got.Sum(nil)); n != cfg.ArtifactBytes || gotSum != sum || dl.Header.Get(api.HeaderChecksum) != sum {
			return "", fmt.Errorf("download: got %d bytes with SHA-256 %s (header %q); want %d bytes with %s",
				n, gotSum, dl.Header.Get(api.HeaderChecksum), cfg.ArtifactBytes, sum)
		}
		return sum, nil
	}()
	peak, samples, smpErr := smp.stop()
	if err != nil {
		return nil, err
	}
	if smpErr != nil {
		return nil, smpErr
	}
	r.SHA256, r.Samples = result, samples
	r.BaselineRSS, r.PeakRSS = mib(base), mib(max(peak, base))
	top := r.PeakRSS
	if hwmReset {
		if _, hwm, err := memory(pid); err == nil {
			r.PeakHWM = mib(hwm)
			top = max(top, r.PeakHWM)
		}
	}
	r.Growth = top - r.BaselineRSS
	e.logf("   %d MiB up in %.1fs, down in %.1fs; RSS %.0f → peak %.0f MiB (growth %.1f MiB)",
		cfg.ArtifactBytes>>20, r.UploadSeconds, r.DownloadSeconds, r.BaselineRSS, top, r.Growth)
	return r, e.alive()
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// sampler reads a process's RSS at an interval until stopped.
type sampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	peak int64
	n    int
	err  error
}

func startSampler(pid int, every time.Duration) *sampler {
	s := &sampler{done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			rss, _, err := memory(pid)
			if err != nil {
				s.err = err
				return
			}
			s.peak, s.n = max(s.peak, rss), s.n+1
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop ends sampling and returns the peak and the number of samples.
func (s *sampler) stop() (peak int64, n int, err error) {
	close(s.done)
	s.wg.Wait()
	return s.peak, s.n, s.err
}
