package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/freeagent-build/freeagent/api"
)

// TransferResult compares moving a file through the controller with
// copying it on the same disk, in the same run.
type TransferResult struct {
	Bytes  int64 `json:"bytes"`
	Rounds int   `json:"rounds"` // each figure is the best of this many
	// CopySeconds is the baseline: read the file (from the page cache)
	// and write it to a new file on the controller's disk in 1 MiB
	// blocks, then fsync it once.
	CopySeconds float64 `json:"copy_seconds"`
	// HashSeconds is SHA-256 of the same bytes from the page cache, in
	// this process: an upload that verifies its bytes, as the controller
	// must, takes at least this long, so CopySeconds ÷ HashSeconds bounds
	// UploadRatio on this machine whatever the path does.
	HashSeconds float64 `json:"hash_seconds"`
	// File store, through the controller: the VM's upload of the file as
	// an artifact (PUT, the client reads it from the page cache and sends
	// its SHA-256, computed beforehand), and the download of it into a
	// file on the same disk, fsynced.
	UploadSeconds   float64 `json:"upload_seconds"`
	DownloadSeconds float64 `json:"download_seconds"`
	UploadRatio     float64 `json:"upload_ratio"`   // CopySeconds ÷ UploadSeconds
	DownloadRatio   float64 `json:"download_ratio"` // CopySeconds ÷ DownloadSeconds
	// UploadCPUSeconds is the CPU one upload costs, the mean of the
	// rounds: the controller's (receive, write, SHA-256) and the
	// client's (this process sending the file). UploadFloorSeconds is
	// their sum spread over every CPU of the machine: no upload can be
	// shorter here, however well its stages overlap, so CopySeconds ÷
	// UploadFloorSeconds bounds UploadRatio.
	UploadCPUSeconds       float64 `json:"upload_cpu_s"`
	ClientUploadCPUSeconds float64 `json:"client_upload_cpu_s"`
	UploadFloorSeconds     float64 `json:"upload_floor_s"`
	// StreamCPUPerGiB is the file-store controller's CPU seconds per GiB
	// moved (up and down together).
	StreamCPUPerGiB float64 `json:"stream_cpu_s_per_gib"`
	// S3 is the same transfer with an S3 store (a local versitygw): the
	// VM's direct upload (parts above the multipart threshold) and the
	// 307 download; nil when skipped, see S3Skipped.
	S3        *S3Transfer `json:"s3,omitempty"`
	S3Skipped string      `json:"s3_skipped,omitempty"`
}

// S3Transfer is the transfer with an S3 store.
type S3Transfer struct {
	UploadSeconds   float64 `json:"upload_seconds"`
	DownloadSeconds float64 `json:"download_seconds"`
	// ControllerCPUPerGiB is the controller's CPU seconds per GiB moved,
	// counted during the uploads and downloads: it only signs URLs and
	// checks what the store computed. IdleCPUPerGiB is what the same
	// controller used doing nothing for as long (its background loops),
	// included in the former.
	ControllerCPUPerGiB float64 `json:"controller_cpu_s_per_gib"`
	IdleCPUPerGiB       float64 `json:"idle_cpu_s_per_gib"`
}

const transferRounds = 3

func runTransfer(ctx context.Context, e *env) (*TransferResult, error) {
	cfg := e.cfg
	r := &TransferResult{Bytes: cfg.TransferBytes, Rounds: transferRounds}
	dir := filepath.Join(e.dir, "transfer")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "payload")
	decl, err := writePayload(src, cfg.TransferBytes)
	if err != nil {
		return nil, err
	}
	pid := e.ctrl.pid()
	var cpu, upCPU, clientCPU float64
	for i := range transferRounds {
		d, err := copyFsync(src, filepath.Join(e.dataDir, "copy-baseline"))
		if err != nil {
			return nil, err
		}
		r.CopySeconds = best(r.CopySeconds, d)
		if d, err = hashFile(src); err != nil {
			return nil, err
		}
		r.HashSeconds = best(r.HashSeconds, d)
		t, err := e.transferOnce(ctx, e.client(), pid, src, decl, filepath.Join(dir, "download"), false)
		if err != nil {
			return nil, fmt.Errorf("file store, round %d: %w", i+1, err)
		}
		cpu += t.upCPU + t.downCPU
		upCPU += t.upCPU
		clientCPU += t.clientUpCPU
		r.UploadSeconds, r.DownloadSeconds = best(r.UploadSeconds, t.up), best(r.DownloadSeconds, t.down)
	}
	gib := float64(2*transferRounds) * float64(cfg.TransferBytes) / (1 << 30)
	r.StreamCPUPerGiB = cpu / gib
	r.UploadRatio, r.DownloadRatio = r.CopySeconds/r.UploadSeconds, r.CopySeconds/r.DownloadSeconds
	r.UploadCPUSeconds, r.ClientUploadCPUSeconds = upCPU/transferRounds, clientCPU/transferRounds
	r.UploadFloorSeconds = (r.UploadCPUSeconds + r.ClientUploadCPUSeconds) / float64(runtime.NumCPU())
	e.logf("   file store, %s: copy+fsync %.2fs (SHA-256 alone %.2fs); upload %.2fs (%.2f×), download %.2fs (%.2f×); controller %.2f CPU-s/GiB",
		size(cfg.TransferBytes), r.CopySeconds, r.HashSeconds, r.UploadSeconds, r.UploadRatio, r.DownloadSeconds, r.DownloadRatio, r.StreamCPUPerGiB)
	if r.UploadFloorSeconds > 0 {
		e.logf("   an upload costs %.2f CPU-s (controller %.2f, client %.2f): on %d CPUs at least %.2fs, so at most %.2f× here",
			r.UploadCPUSeconds+r.ClientUploadCPUSeconds, r.UploadCPUSeconds, r.ClientUploadCPUSeconds, runtime.NumCPU(), r.UploadFloorSeconds, r.CopySeconds/r.UploadFloorSeconds)
	}

	s3c, skipped, err := e.startS3Controller(ctx)
	if err != nil {
		return r, err
	}
	if s3c == nil {
		r.S3Skipped = skipped
		e.logf("   S3: skipped: %s", skipped)
		return r, nil
	}
	r.S3 = &S3Transfer{}
	cpu = 0
	var busy time.Duration
	for i := range transferRounds {
		t, err := e.transferOnce(ctx, s3c.client, s3c.pid, src, decl, filepath.Join(dir, "download"), true)
		if err != nil {
			return nil, fmt.Errorf("S3 store, round %d: %w", i+1, err)
		}
		cpu += t.upCPU + t.downCPU
		busy += t.up + t.down
		r.S3.UploadSeconds, r.S3.DownloadSeconds = best(r.S3.UploadSeconds, t.up), best(r.S3.DownloadSeconds, t.down)
	}
	r.S3.ControllerCPUPerGiB = cpu / gib
	idle0, err := cpuSeconds(s3c.pid)
	if err != nil {
		return nil, err
	}
	if err := api.Sleep(ctx, busy); err != nil {
		return nil, err
	}
	idle1, err := cpuSeconds(s3c.pid)
	if err != nil {
		return nil, err
	}
	r.S3.IdleCPUPerGiB = (idle1 - idle0) / gib
	e.logf("   S3 store (versitygw on this machine): upload %.2fs, download %.2fs; controller %.3f CPU-s/GiB (idle for as long: %.3f)",
		r.S3.UploadSeconds, r.S3.DownloadSeconds, r.S3.ControllerCPUPerGiB, r.S3.IdleCPUPerGiB)
	return r, errors.Join(e.alive(), s3c.ctrl.died())
}

// best keeps the shorter of two durations, 0 meaning none yet.
func best(cur float64, d time.Duration) float64 {
	if s := d.Seconds(); cur == 0 || s < cur {
		return s
	}
	return cur
}

// writePayload writes n pseudo-random bytes to path and syncs them, and
// gives their declaration as the artifact (size, SHA-256, the parts'
// SHA-256s); reading them back afterwards hits the page cache, for the
// copy and the upload alike.
func writePayload(path string, n int64) (api.DirectUploadRequest, error) {
	f, err := os.Create(path)
	if err != nil {
		return api.DirectUploadRequest{}, err
	}
	defer f.Close()
	sums := api.NewUploadSums(n)
	if _, err := io.Copy(io.MultiWriter(f, sums), io.LimitReader(rand.NewChaCha8([32]byte{'x', 'f', 'e', 'r'}), n)); err != nil {
		return api.DirectUploadRequest{}, fmt.Errorf("write the payload: %w", err)
	}
	if err := f.Sync(); err != nil {
		return api.DirectUploadRequest{}, err
	}
	return sums.Declare(artifactName, f)
}

// hashFile times SHA-256 of the file, read in 1 MiB blocks.
func hashFile(path string) (time.Duration, error) {
	start := time.Now()
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := io.CopyBuffer(sha256.New(), struct{ io.Reader }{f}, make([]byte, 1<<20)); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// copyFsync is the baseline: a plain copy in 1 MiB blocks (as dd or cp
// without a kernel copy offload would) and one fsync.
func copyFsync(src, dst string) (time.Duration, error) {
	start := time.Now()
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	defer os.Remove(dst)
	defer out.Close()
	buf := make([]byte, 1<<20)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			if _, err := out.Write(buf[:n]); err != nil {
				return 0, err
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if err := out.Sync(); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// transferTimes is one round of transferOnce: how long the upload and the
// download took, the controller's CPU seconds during each, and this
// process's (the client's) during the upload.
type transferTimes struct {
	up, down       time.Duration
	upCPU, downCPU float64
	clientUpCPU    float64
}

// transferOnce submits a build, takes it as a worker, uploads the payload
// as its artifact as the VM does (direct: straight to the store with the
// URLs the controller signs; else streamed through the controller as a
// raw PUT), completes the build and downloads the artifact into dst,
// fsynced. cpu is the CPU time process pid (the controller) used during
// the upload and the download. The SHA-256 of what came back is checked
// after the clock stops.
func (e *env) transferOnce(ctx context.Context, c *api.Client, pid int, src string, decl api.DirectUploadRequest, dst string, direct bool) (t transferTimes, err error) {
	w, err := registerWorker(ctx, c, "transfer")
	if err != nil {
		return t, err
	}
	job, err := e.startBuild(ctx, c, w, 5*time.Second)
	if err != nil {
		return t, err
	}
	f, err := os.Open(src)
	if err != nil {
		return t, err
	}
	defer f.Close()
	size, sum := decl.Size, decl.SHA256
	auth, err := c.VMAuth(ctx, job.ID, job.OTP)
	if err != nil {
		return t, fmt.Errorf("vm auth: %w", err)
	}
	cpu0, err := cpuSeconds(pid)
	if err != nil {
		return t, err
	}
	self0, err := cpuSeconds(os.Getpid())
	if err != nil {
		return t, err
	}
	start := time.Now()
	if direct {
		d, err := c.StartArtifactUpload(ctx, job.ID, auth.VMToken, decl)
		if err != nil || !d.Direct {
			return t, fmt.Errorf("start a direct upload: %+v %v", d, err)
		}
		if err := api.SendDirect(ctx, e.hc, d, f, size); err != nil {
			return t, err
		}
		if _, err := c.CompleteArtifactUpload(ctx, job.ID, auth.VMToken, d.Ticket); err != nil {
			return t, fmt.Errorf("complete the direct upload: %w", err)
		}
	} else if _, err := c.PutArtifact(ctx, job.ID, auth.VMToken, artifactName, f, size, sum); err != nil {
		return t, fmt.Errorf("upload: %w", err)
	}
	t.up = time.Since(start)
	cpu1, err := cpuSeconds(pid)
	if err != nil {
		return t, err
	}
	self1, err := cpuSeconds(os.Getpid())
	if err != nil {
		return t, err
	}
	if _, err := w.c.Upload(ctx, w.token, api.Result{BuildID: job.ID, AttemptID: job.AttemptID, LeaseToken: job.LeaseToken, Success: true}); err != nil {
		return t, fmt.Errorf("complete the build: %w", err)
	}

	cpu2, err := cpuSeconds(pid)
	if err != nil {
		return t, err
	}
	start = time.Now()
	resp, err := c.DownloadArtifact(ctx, job.ID, artifactName, 0)
	if err != nil {
		return t, fmt.Errorf("download: %w", err)
	}
	defer resp.Body.Close()
	out, err := os.Create(dst)
	if err != nil {
		return t, err
	}
	defer os.Remove(dst)
	defer out.Close()
	// As the baseline copies: 1 MiB blocks, one fsync.
	n, err := io.CopyBuffer(struct{ io.Writer }{out}, struct{ io.Reader }{resp.Body}, make([]byte, 1<<20))
	if err == nil {
		err = out.Sync()
	}
	if err != nil {
		return t, fmt.Errorf("download: %w", err)
	}
	t.down = time.Since(start)
	cpu3, err := cpuSeconds(pid)
	if err != nil {
		return t, err
	}
	if _, err := out.Seek(0, io.SeekStart); err != nil {
		return t, err
	}
	h := sha256.New()
	if _, err := io.Copy(h, out); err != nil {
		return t, err
	}
	if got := hex.EncodeToString(h.Sum(nil)); n != size || got != sum {
		return t, fmt.Errorf("download: %d bytes with SHA-256 %s, want %d with %s", n, got, size, sum)
	}
	t.upCPU, t.downCPU, t.clientUpCPU = cpu1-cpu0, cpu3-cpu2, self1-self0
	return t, nil
}

// s3Controller is a second controller, on the same database, whose store
// is a bucket of a versitygw gateway started for the run.
type s3Controller struct {
	ctrl   *child
	pid    int
	client *api.Client
}

// startS3Controller starts versitygw and the controller on it. Without
// versitygw it says why in skipped.
func (e *env) startS3Controller(ctx context.Context) (_ *s3Controller, skipped string, err error) {
	bin := e.cfg.VersitygwPath
	if bin == "" {
		if bin, err = findVersitygw(); err != nil {
			return nil, "versitygw not found on PATH or in $(go env GOPATH)/bin; install it with `go install github.com/versity/versitygw/cmd/versitygw@v1.8.0`", nil
		}
	}
	dir := filepath.Join(e.dir, "s3")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", err
	}
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	access, secret := "bench", fmt.Sprintf("%x", rand.Uint64())+fmt.Sprintf("%x", rand.Uint64())
	gw := exec.Command(bin, "--port", addr, "--quiet", "posix", dir)
	gw.Env = append(childEnv(), "ROOT_ACCESS_KEY_ID="+access, "ROOT_SECRET_ACCESS_KEY="+secret)
	gw.SysProcAttr = sysProcAttr()
	if err := gw.Start(); err != nil {
		return nil, "", fmt.Errorf("start versitygw: %w", err)
	}
	exited := make(chan struct{})
	go func() { gw.Wait(); close(exited) }()
	e.onClose(func() error {
		gw.Process.Kill()
		<-exited
		return nil
	})
	if err := waitListening(ctx, addr, exited); err != nil {
		return nil, "", err
	}
	mc, err := minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(access, secret, ""), Region: "us-east-1"})
	if err != nil {
		return nil, "", err
	}
	if err := mc.MakeBucket(ctx, "bench", minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		return nil, "", fmt.Errorf("create the bench bucket: %w", err)
	}
	ctrl, err := startChild(e.bin, []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(e.dir, "controller-s3"),
		"--database-url", e.dsn, "--rate-per-key", "0", "--rate-per-worker", "0", "--blob-store", "s3://bench/farm?endpoint=http://" + addr + "&region=us-east-1"},
		e.logf, "AWS_ACCESS_KEY_ID="+access, "AWS_SECRET_ACCESS_KEY="+secret)
	if err != nil {
		return nil, "", err
	}
	e.onClose(ctrl.stop)
	u, err := ctrl.waitURL(ctx, time.Minute)
	if err != nil {
		return nil, "", err
	}
	return &s3Controller{ctrl: ctrl, pid: ctrl.pid(), client: &api.Client{BaseURL: u, APIKey: e.key, HTTP: e.hc, UserAgent: "freeagent-bench"}}, "", nil
}

// findVersitygw looks on PATH, then in $(go env GOPATH)/bin.
func findVersitygw() (string, error) {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	out, err := exec.Command(goTool(), "env", "GOPATH").Output()
	if err != nil {
		return "", err
	}
	for _, d := range filepath.SplitList(strings.TrimSpace(string(out))) {
		p := filepath.Join(d, "bin", "versitygw")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", errors.New("versitygw not found")
}

// waitListening waits until addr accepts connections.
func waitListening(ctx context.Context, addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			resp, err := http.Get("http://" + addr + "/")
			if err == nil {
				resp.Body.Close()
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("versitygw exited at start")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("versitygw did not answer on %s within 30 s", addr)
		}
	}
}
