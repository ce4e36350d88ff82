// Package s3test gives tests a real S3-compatible server: one versitygw
// gateway (posix backend on a temporary directory) per test binary, started
// on first use, and a fresh bucket per test.
//
//	func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }
//
//	func TestX(t *testing.T) {
//		b := s3test.NewBucket(t)
//		... b.URL("prefix"), b.Credentials() ...
//	}
//
// The gateway is found on PATH or in $(go env GOPATH)/bin, where
// scripts/test-tools.sh installs it; when it is missing, tests asking for a
// bucket fail, saying so.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/freeagent-build/freeagent/internal/testsupport/syncbuf"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

// Package state is unavoidable here, as in pgtest: NewBucket(t) has no
// handle, and the gateway is shared by the binary's tests and stopped by Main.
var (
	mu         sync.Mutex
	mainCalled bool
	started    bool
	setupErr   error
	gw         *gateway

	bucketCounter atomic.Int64
)

type gateway struct {
	cmd      *exec.Cmd
	exited   chan struct{} // closed once the process is reaped
	dir      string
	endpoint string // http://127.0.0.1:port
	access   string
	secret   string
	logs     syncbuf.Buffer
}

// errMissing marks a missing gateway binary.
var errMissing = errors.New("versitygw not found on PATH or in $(go env GOPATH)/bin; run " + testtool.Install)

// Main runs the tests, then stops the gateway (if a test started one) and
// removes its directory. Use it as os.Exit(s3test.Main(m)) in TestMain; with
// pgtest too, nest them:
//
//	os.Exit(s3test.Main(s3test.Run(func() int { return pgtest.Main(m) })))
func Main(m interface{ Run() int }) int {
	mu.Lock()
	mainCalled = true
	mu.Unlock()
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	if gw != nil {
		gw.cmd.Process.Kill()
		<-gw.exited
		os.RemoveAll(gw.dir)
		gw = nil
	}
	return code
}

// Run is a function that runs the tests (another helper's Main), for Main.
type Run func() int

// Run calls r.
func (r Run) Run() int { return r() }

// Bucket is an empty bucket of its own for one test.
type Bucket struct {
	Name      string
	Endpoint  string // http://127.0.0.1:port
	AccessKey string
	SecretKey string
}

// URL is the --blob-store setting for the bucket under prefix (may be "").
func (b Bucket) URL(prefix string) string {
	return "s3://" + b.Name + "/" + prefix + "?endpoint=" + b.Endpoint + "&region=us-east-1"
}

// Credentials are the gateway's root credentials.
func (b Bucket) Credentials() *credentials.Credentials {
	return credentials.NewStaticV4(b.AccessKey, b.SecretKey, "")
}

// Setenv exports the credentials as the standard AWS variables for the
// test (so the test cannot be parallel).
func (b Bucket) Setenv(t testing.TB) {
	t.Setenv("AWS_ACCESS_KEY_ID", b.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", b.SecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
}

// Client is a plain client for the bucket, for checking what a test stored.
func (b Bucket) Client(t testing.TB) *minio.Client {
	t.Helper()
	c, err := minio.New(strings.TrimPrefix(b.Endpoint, "http://"), &minio.Options{Creds: b.Credentials(), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Keys lists every object key in the bucket.
func (b Bucket) Keys(t testing.TB) []string {
	t.Helper()
	var keys []string
	for o := range b.Client(t).ListObjectsIter(context.Background(), b.Name, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list bucket %s: %v", b.Name, o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

// NewBucket creates a fresh bucket on the test binary's gateway, starting
// the gateway on first use. The bucket is left for Main to remove.
func NewBucket(t testing.TB) Bucket {
	t.Helper()
	g, err := setup()
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	b := Bucket{Name: fmt.Sprintf("t%d-%s", bucketCounter.Add(1), randomHex(4)), Endpoint: g.endpoint, AccessKey: g.access, SecretKey: g.secret}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Client(t).MakeBucket(ctx, b.Name, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("s3test: create bucket %s: %v\n%s", b.Name, err, g.logs.String())
	}
	return b
}

// binary returns the gateway's path, or an error saying how to install it.
func binary() (string, error) {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		gopath = strings.TrimSpace(string(out))
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "bin", "versitygw")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", errMissing
}

func setup() (*gateway, error) {
	mu.Lock()
	defer mu.Unlock()
	if started {
		return gw, setupErr
	}
	if !mainCalled {
		return nil, errors.New("s3test.NewBucket needs s3test.Main: add `func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }` to the package's tests")
	}
	started = true
	bin, err := binary()
	if err != nil {
		setupErr = err
		return nil, err
	}
	// A port picked free can be taken before the gateway binds it: try a few.
	for range 3 {
		if gw, err = start(bin); err == nil {
			return gw, nil
		}
	}
	setupErr = err
	return nil, err
}

func start(bin string) (*gateway, error) {
	dir, err := os.MkdirTemp("", "s3test-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	g := &gateway{dir: dir, endpoint: "http://" + port, access: "test" + randomHex(6), secret: randomHex(20)}
	g.cmd = exec.Command(bin, "--port", port, "--quiet", "posix", dir)
	// The keys through the environment, not argv (ps shows argv).
	g.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+g.access, "ROOT_SECRET_ACCESS_KEY="+g.secret)
	g.cmd.Stdout, g.cmd.Stderr = &g.logs, &g.logs
	g.cmd.SysProcAttr = sysProcAttr()
	if err := g.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	exited := make(chan struct{})
	g.exited = exited
	go func() { g.cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(g.endpoint + "/")
		if err == nil {
			resp.Body.Close()
			return g, nil
		}
		select {
		case <-exited:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("versitygw exited at start:\n%s", g.logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			g.cmd.Process.Kill()
			<-exited
			os.RemoveAll(dir)
			return nil, fmt.Errorf("versitygw did not answer on %s within 30 s:\n%s", g.endpoint, g.logs.String())
		}
	}
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) //nolint:errcheck // crypto/rand does not fail on supported platforms
	return hex.EncodeToString(b)
}
