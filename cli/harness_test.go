package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs/s3blobs/s3test"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/pgtest"
	"github.com/freeagent-build/freeagent/controller/serve"
	"github.com/freeagent-build/freeagent/internal/testsupport/syncbuf"
)

func TestMain(m *testing.M) { os.Exit(s3test.Main(s3test.Run(func() int { return pgtest.Main(m) }))) }

// env is a real controller on a fresh Postgres database, with one API key
// of each role and a config file for the CLI.
type env struct {
	t                           *testing.T
	URL                         string
	devKey, adminKey, workerKey string
	cfgPath                     string
	admin                       *api.Client
}

func newEnv(t *testing.T, tune ...func(*httpapi.Limits)) *env {
	t.Helper()
	return newEnvOn(t, "", tune...)
}

// newEnvOn is newEnv with the controller's files in blobStore (its
// --blob-store; "" is the file store under its data directory).
func newEnvOn(t *testing.T, blobStore string, tune ...func(*httpapi.Limits)) *env {
	t.Helper()
	return newEnvWith(t, func(c *serve.Config) { c.BlobStore = blobStore }, tune...)
}

// newEnvWith is newEnv with the controller's configuration changed by configure.
func newEnvWith(t *testing.T, configure func(*serve.Config), tune ...func(*httpapi.Limits)) *env {
	t.Helper()
	parent := t.TempDir()
	if err := os.Chmod(parent, 0o711); err != nil {
		t.Fatal(err)
	}
	logger := logrus.New()
	logger.SetOutput(io.Discard)
	c := controllertest.Start(t, controllertest.Logger(logger), controllertest.Configure(func(c *serve.Config) {
		c.DataDir, c.ReaperInterval = filepath.Join(parent, "data"), time.Second
		configure(c)
	}), controllertest.Limits(func(l *httpapi.Limits) {
		for _, f := range tune {
			f(l)
		}
	}))
	e := &env{t: t, URL: c.URL, cfgPath: filepath.Join(t.TempDir(), "cfg", "config.json"),
		devKey: c.DeveloperKey, adminKey: c.AdminKey, workerKey: c.WorkerKey}
	e.admin = &api.Client{BaseURL: e.URL, APIKey: e.adminKey}
	return e
}

// result is one expo-build run.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return "exit " + strconv.Itoa(r.code) + "\n--- stdout\n" + r.stdout + "--- stderr\n" + r.stderr
}

// app returns an expo-build App on this controller, with fast retries.
// vars override (or with "" remove) environment variables.
func (e *env) app(stdout, stderr io.Writer, vars map[string]string) *App {
	envMap := map[string]string{
		"EXPO_BUILD_CONFIG":       e.cfgPath,
		"EXPO_CONTROLLER_URL":     e.URL,
		"EXPO_CONTROLLER_API_KEY": e.devKey,
	}
	for k, v := range vars {
		envMap[k] = v
	}
	return &App{
		Stdin: strings.NewReader(""), Stdout: stdout, Stderr: stderr,
		Env:          func(k string) string { return envMap[k] },
		Retry:        RetryPolicy{Attempts: 3, Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond},
		PollInterval: 100 * time.Millisecond,
		StallTimeout: 10 * time.Second,
		Version:      "test",
		HTTPClient:   &http.Client{Transport: &http.Transport{DisableKeepAlives: false}},
	}
}

// run runs expo-build in-process and returns its exit code and output.
func (e *env) run(vars map[string]string, args ...string) result {
	e.t.Helper()
	return e.runApp(nil, vars, args...)
}

// runApp is run with a chance to adjust the App (standard input, prompts).
func (e *env) runApp(adjust func(*App), vars map[string]string, args ...string) result {
	e.t.Helper()
	var out, errb bytes.Buffer
	a := e.app(&out, &errb, vars)
	if adjust != nil {
		adjust(a)
	}
	code := a.Run(context.Background(), args)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// mustRun fails the test unless expo-build exits with want.
func (e *env) mustRun(want int, vars map[string]string, args ...string) result {
	e.t.Helper()
	r := e.run(vars, args...)
	if r.code != want {
		e.t.Fatalf("expo-build %s: want exit %d\n%s", strings.Join(args, " "), want, r)
	}
	return r
}

// jsonOf decodes the last JSON line of stdout.
func jsonOf[T any](t *testing.T, r result) T {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var v T
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &v); err != nil {
		t.Fatalf("decode %q: %v\n%s", lines[len(lines)-1], err, r)
	}
	return v
}

// project writes an Expo project.
func project(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	if _, ok := files["package.json"]; !ok {
		files["package.json"] = `{"name":"demo"}`
	}
	if _, ok := files["app.json"]; !ok {
		files["app.json"] = `{"expo":{"name":"demo","slug":"demo","android":{"package":"com.example.demo"},"ios":{"bundleIdentifier":"com.example.demo"}}}`
	}
	// A device build of iOS needs signing; the machinery's tests build
	// for the simulator unless they bring their own eas.json.
	if _, ok := files["eas.json"]; !ok {
		files["eas.json"] = `{"build":{"production":{"ios":{"simulator":true}}}}`
	}
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// untar lists a tar.gz: name → content.
func untar(t *testing.T, archive []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatalf("source is not gzip: %v", err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = string(b)
	}
}

// testWorker drives builds through the worker and VM API, as an agent and
// the in-VM bootstrap would.
type testWorker struct {
	e     *env
	c     *api.Client
	token string
}

func (e *env) worker(platforms ...string) *testWorker {
	e.t.Helper()
	if len(platforms) == 0 {
		platforms = []string{"ios", "android"}
	}
	return e.workerWith("test-mac", api.Capabilities{Platforms: platforms, MaxConcurrentBuilds: 2})
}

// workerWith registers a worker that advertises caps.
func (e *env) workerWith(name string, caps api.Capabilities) *testWorker {
	e.t.Helper()
	c := &api.Client{BaseURL: e.URL, APIKey: e.workerKey}
	resp, err := c.Register(context.Background(), api.RegisterRequest{Name: name, Capabilities: caps})
	if err != nil {
		e.t.Fatalf("register worker: %v", err)
	}
	return &testWorker{e: e, c: c, token: resp.AccessToken}
}

func (w *testWorker) keep(g api.TokenGrant) {
	if g.AccessToken != "" {
		w.token = g.AccessToken
	}
}

// claim long-polls until a job comes, and starts it (first heartbeat).
func (w *testWorker) claim() *api.Job {
	w.e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := w.c.Poll(context.Background(), w.token, 2*time.Second)
		if err != nil {
			w.e.t.Fatalf("poll: %v", err)
		}
		w.keep(resp.TokenGrant)
		if resp.Job != nil {
			hb, err := w.c.Heartbeat(context.Background(), w.token, api.HeartbeatRequest{BuildID: resp.Job.ID, AttemptID: resp.Job.AttemptID,
				LeaseToken: resp.Job.LeaseToken, Phase: "build"})
			if err != nil {
				w.e.t.Fatalf("heartbeat: %v", err)
			}
			w.keep(hb.TokenGrant)
			return resp.Job
		}
	}
	w.e.t.Fatal("no job within 20 s")
	return nil
}

// source downloads the job's source archive as the worker.
func (w *testWorker) source(j *api.Job) []byte {
	w.e.t.Helper()
	resp, err := w.c.Source(context.Background(), j.ID, "", w.token)
	if err != nil {
		w.e.t.Fatalf("source: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		w.e.t.Fatal(err)
	}
	return b
}

// vm is the build's VM: authenticated with the job's OTP.
type vm struct {
	w      *testWorker
	id     string
	token  string
	offset int64
	c      *api.Client
}

func (w *testWorker) vm(j *api.Job) *vm {
	w.e.t.Helper()
	c := &api.Client{BaseURL: w.e.URL}
	auth, err := c.VMAuth(context.Background(), j.ID, j.OTP)
	if err != nil {
		w.e.t.Fatalf("vm auth: %v", err)
	}
	return &vm{w: w, id: j.ID, token: auth.VMToken, c: c}
}

// log appends text to the build log.
func (v *vm) log(text string) {
	v.w.e.t.Helper()
	n, err := v.c.AppendLog(context.Background(), v.id, v.token, v.offset, []byte(text))
	if err != nil {
		v.w.e.t.Fatalf("append log: %v", err)
	}
	v.offset = n
}

// finish reports the attempt's end, with an artifact when data is not nil.
func (w *testWorker) finish(j *api.Job, success bool, name string, data []byte) {
	w.e.t.Helper()
	r := api.Result{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken, Success: success}
	if !success {
		r.ErrorMessage, r.ErrorCode = "xcodebuild exited with status 65", api.CodeBuildFailed
	}
	if data != nil {
		r.FileName, r.File, r.SHA256 = name, bytes.NewReader(data), sha(data)
	}
	if _, err := w.c.Upload(context.Background(), w.token, r); err != nil {
		w.e.t.Fatalf("upload result: %v", err)
	}
}

// waitFor waits until b shows text.
func waitFor(t *testing.T, b *syncbuf.Buffer, text string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(b.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("output never showed %q; got:\n%s", text, b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// faultProxy sits between the CLI and the controller and injects faults.
type faultProxy struct {
	URL string
	// dropSubmits: the next N submits reach the controller, but their
	// answers are lost (the connection is cut).
	dropSubmits atomic.Int32
	// cutDownloadsAt: artifact downloads are cut after this many bytes
	// (0: never) while cutsLeft > 0; after that, with blockDownloads, they
	// fail before any byte.
	cutDownloadsAt atomic.Int64
	cutsLeft       atomic.Int32
	blockDownloads atomic.Bool
	// cutStreamsAt: log event streams are cut after this many bytes while
	// streamCutsLeft > 0.
	cutStreamsAt   atomic.Int64
	streamCutsLeft atomic.Int32

	mu       sync.Mutex
	requests []recorded
}

type recorded struct {
	Method, Path, Range, IdempotencyKey, LastEventID string
}

func (p *faultProxy) log() []recorded {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]recorded(nil), p.requests...)
}

func (e *env) proxy() *faultProxy {
	target, _ := url.Parse(e.URL)
	p := &faultProxy{}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	rp.ErrorLog = log.New(io.Discard, "", 0)
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) { panic(http.ErrAbortHandler) }
	rp.ModifyResponse = func(resp *http.Response) error {
		r := resp.Request
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/api/builds" && p.dropSubmits.Add(-1) >= 0:
			io.Copy(io.Discard, resp.Body) // the controller made the build; the answer is lost
			return errors.New("answer dropped by the test proxy")
		case strings.Contains(r.URL.Path, "/artifacts/") && p.cutDownloadsAt.Load() > 0 && p.cutsLeft.Add(-1) >= 0:
			resp.Body = &cutReader{r: resp.Body, left: p.cutDownloadsAt.Load()}
		case strings.Contains(r.URL.Path, "/artifacts/") && p.blockDownloads.Load():
			resp.Body.Close()
			return errors.New("download blocked by the test proxy")
		case strings.HasSuffix(r.URL.Path, "/logs") && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") &&
			p.cutStreamsAt.Load() > 0 && p.streamCutsLeft.Add(-1) >= 0:
			resp.Body = &cutReader{r: resp.Body, left: p.cutStreamsAt.Load()}
		}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.requests = append(p.requests, recorded{Method: r.Method, Path: r.URL.Path, Range: r.Header.Get("Range"),
			IdempotencyKey: r.Header.Get(api.HeaderIdempotencyKey), LastEventID: r.Header.Get("Last-Event-ID")})
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	e.t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// cutReader fails after left bytes, like a connection that breaks.
type cutReader struct {
	r    io.ReadCloser
	left int64
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

func (c *cutReader) Close() error { return c.r.Close() }
