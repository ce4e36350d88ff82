package vmbootstrap

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs/s3blobs/s3test"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/pgtest"
	"github.com/freeagent-build/freeagent/controller/store"
)

// binDir holds the binaries built once for the tests: freeagent-vm, the
// stand-in xcodebuild and the stand-in launchctl.
var binDir = struct {
	once      sync.Once
	dir       string
	vm        string
	xcode     string
	launchctl string
	err       error
}{}

func TestMain(m *testing.M) {
	code := s3test.Main(s3test.Run(func() int { return pgtest.Main(m) }))
	if binDir.dir != "" {
		os.RemoveAll(binDir.dir)
	}
	os.Exit(code)
}

func buildBinaries() {
	binDir.dir, binDir.err = os.MkdirTemp("", "freeagent-vm-bin-")
	if binDir.err != nil {
		return
	}
	// A test's build user runs freeagent-vm too.
	if binDir.err = os.Chmod(binDir.dir, 0o755); binDir.err != nil {
		return
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if p, err := exec.LookPath("go"); err == nil {
		gobin = p
	}
	binDir.vm = filepath.Join(binDir.dir, "freeagent-vm")
	binDir.xcode = filepath.Join(binDir.dir, "xcode", "xcodebuild")
	binDir.launchctl = filepath.Join(binDir.dir, "launchctl")
	for out, pkg := range map[string]string{binDir.vm: "./cmd/freeagent-vm", binDir.xcode: "../internal/standins/fakexcodebuild",
		binDir.launchctl: "../internal/standins/fakelaunchctl"} {
		if log, err := exec.Command(gobin, "build", "-o", out, pkg).CombinedOutput(); err != nil {
			binDir.err = &buildError{out: string(log), err: err}
			return
		}
	}
}

// vmBinary builds ./cmd/freeagent-vm once per test binary.
func vmBinary(t *testing.T) string {
	t.Helper()
	binDir.once.Do(buildBinaries)
	if binDir.err != nil {
		t.Fatalf("build the test binaries: %v", binDir.err)
	}
	return binDir.vm
}

// xcodebuildDir is a directory holding only the stand-in xcodebuild
// (internal/standins/fakexcodebuild), built once per test binary.
func xcodebuildDir(t *testing.T) string {
	t.Helper()
	binDir.once.Do(buildBinaries)
	if binDir.err != nil {
		t.Fatalf("build the test binaries: %v", binDir.err)
	}
	return filepath.Dir(binDir.xcode)
}

// launchctlBinary is the stand-in launchctl
// (internal/standins/fakelaunchctl), built once per test binary.
func launchctlBinary(t *testing.T) string {
	t.Helper()
	binDir.once.Do(buildBinaries)
	if binDir.err != nil {
		t.Fatalf("build the test binaries: %v", binDir.err)
	}
	return binDir.launchctl
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// testController is a real controller (controllertest) on a fresh
// Postgres database.
type testController struct {
	t      *testing.T
	URL    string
	store  *store.Store
	admin  *api.Client
	dev    *api.Client
	worker *api.Client
}

// startControllerOn starts a controller with opts (controllertest.S3 keeps
// its files in a bucket).
func startControllerOn(t *testing.T, opts ...controllertest.Option) *testController {
	t.Helper()
	log := logrus.New()
	log.SetOutput(io.Discard)
	c := controllertest.Start(t, append([]controllertest.Option{controllertest.Logger(log)}, opts...)...)
	return &testController{t: t, URL: c.URL, store: c.Store, admin: c.Admin, dev: c.Developer, worker: c.Worker}
}

func startController(t *testing.T) *testController {
	t.Helper()
	return startControllerOn(t)
}

// startJob submits a build and takes it as a worker would (poll, first
// heartbeat), so the VM side can run: the job carries the OTP.
// startedJob is a build taken by a worker.
type startedJob struct {
	sub         api.SubmitResponse
	job         *api.Job
	workerToken string
}

func (c *testController) startJob(platform string, source, certs []byte) startedJob {
	t := c.t
	t.Helper()
	ctx := context.Background()
	req := api.SubmitRequest{Platform: platform, Profile: "production", Source: bytes.NewReader(source)}
	if certs != nil {
		req.Certs = bytes.NewReader(certs)
	}
	sub, err := c.dev.Submit(ctx, req)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	reg, err := c.worker.Register(ctx, api.RegisterRequest{Name: "test-mac", Capabilities: api.Capabilities{Platforms: []string{platform}, MaxConcurrentBuilds: 1}})
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	poll, err := c.worker.Poll(ctx, reg.AccessToken, 0)
	if err != nil || poll.Job == nil || poll.Job.ID != sub.ID {
		t.Fatalf("poll: %+v %v", poll.Job, err)
	}
	hb, err := c.worker.Heartbeat(ctx, poll.AccessToken, api.HeartbeatRequest{BuildID: sub.ID, AttemptID: poll.Job.AttemptID, LeaseToken: poll.Job.LeaseToken})
	if err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	return startedJob{sub: sub, job: poll.Job, workerToken: hb.AccessToken}
}

// report ends the attempt as the worker does after the VM finished.
func (c *testController) report(j startedJob, r api.Result) (api.ResultResponse, error) {
	r.BuildID, r.AttemptID, r.LeaseToken = j.job.ID, j.job.AttemptID, j.job.LeaseToken
	return c.worker.Upload(context.Background(), j.workerToken, r)
}

// vmToken exchanges a job's OTP.
func (c *testController) vmToken(job *api.Job) string {
	c.t.Helper()
	auth, err := (&api.Client{BaseURL: c.URL}).VMAuth(context.Background(), job.ID, job.OTP)
	if err != nil {
		c.t.Fatalf("vm auth: %v", err)
	}
	return auth.VMToken
}

func (c *testController) log(id string) []byte {
	c.t.Helper()
	var out []byte
	for {
		chunk, err := c.admin.ReadLogs(context.Background(), id, int64(len(out)))
		if err != nil {
			c.t.Fatalf("read logs: %v", err)
		}
		out = append(out, chunk.Data...)
		if len(chunk.Data) == 0 || int64(len(out)) >= chunk.Length {
			return out
		}
	}
}

// tarEntry describes one entry of a test archive.
type tarEntry struct {
	name     string
	body     string
	typ      byte // tar.TypeReg when 0
	linkname string
	mode     int64
}

func tarGz(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	writeTar(t, gz, entries)
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func writeTar(t testing.TB, w io.Writer, entries []tarEntry) {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.linkname, Mode: e.mode}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(e.body))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

// project returns a tar.gz of files (name → body), executable when the
// name ends in .sh.
func project(t testing.TB, files map[string]string) []byte {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var entries []tarEntry
	for _, n := range names {
		e := tarEntry{name: n, body: files[n]}
		if filepath.Ext(n) == ".sh" {
			e.mode = 0o755
		}
		entries = append(entries, e)
	}
	return tarGz(t, entries...)
}

type zipEntry struct {
	name string
	body string
	mode os.FileMode
}

func zipArchive(t testing.TB, entries ...zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		if e.mode != 0 {
			h.SetMode(e.mode)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(e.body))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// proxy is a TCP proxy in front of the controller whose behaviour the test
// switches: pass traffic, refuse connections, or deliver requests but drop
// the answers (the controller acted; the client never hears of it).
type proxy struct {
	ln     net.Listener
	target string
	mode   atomic.Int32
	mu     sync.Mutex
	conns  map[net.Conn]bool
	// answered counts answers dropped in proxyDropAnswers mode.
	dropped atomic.Int32
}

const (
	proxyPass int32 = iota
	proxyRefuse
	proxyDropAnswers
)

func newProxy(t *testing.T, targetURL string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: targetURL[len("http://"):], conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.setMode(proxyRefuse) })
	return p
}

func (p *proxy) URL() string { return "http://" + p.ln.Addr().String() }

// setMode switches behaviour and cuts every open connection, so kept-alive
// connections cannot bypass the new mode.
func (p *proxy) setMode(m int32) {
	p.mode.Store(m)
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
	p.mu.Unlock()
}

func (p *proxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns[c] = true
	p.mu.Unlock()
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.mode.Load() == proxyRefuse {
			c.Close()
			continue
		}
		go p.handle(c)
	}
}

func (p *proxy) handle(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.track(c)
	p.track(up)
	go func() {
		io.Copy(up, c)
		up.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			if p.mode.Load() != proxyPass {
				p.dropped.Add(1)
				break
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	c.Close()
	up.Close()
}

// waitFor polls cond every 20 ms until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
