package serve_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs/s3blobs/s3test"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/pgtest"
	"github.com/freeagent-build/freeagent/controller/serve"
	"github.com/freeagent-build/freeagent/controller/store"
)

func TestMain(m *testing.M) {
	os.Exit(s3test.Main(s3test.Run(func() int { return pgtest.Main(m) })))
}

func quietLog() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// startReplica starts a controller (controllertest) with cfg, on the test
// defaults for its listener, lifecycle timings and limits.
func startReplica(t *testing.T, cfg serve.Config) *serve.Controller {
	t.Helper()
	c := controllertest.Start(t, controllertest.Logger(quietLog()), controllertest.Configure(func(c *serve.Config) {
		cfg.Listen, cfg.Store, cfg.Limits = c.Listen, c.Store, c.Limits
		*c = cfg
	}))
	return c.Serve
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func sha256Of(b []byte) []byte {
	h := sha256.Sum256(b)
	return h[:]
}

func hexKey() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// TestReplicasShareAnS3Store: two replicas
// on different data directories, one Postgres and one S3 store. A build
// submitted to A is claimed by a worker polling B, completes (after the
// store was unreachable for a while: the build does not complete without
// its artifact), and its artifact downloads from B, whole and resumed, with
// the recorded SHA-256, straight from the bucket (a 307 to a presigned URL,
// followed without credentials); neither replica keeps a source or
// artifact file.
func TestReplicasShareAnS3Store(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	bucket := s3test.NewBucket(t)
	bucket.Setenv(t)
	proxy, viaProxy := s3test.NewProxy(t, bucket)
	// The replicas share the keys that seal certificates and sign install
	// links, as replicas must.
	common := serve.Config{DatabaseURL: dsn, BlobStore: viaProxy.URL("farm"), CertsKey: hexKey(), LinkKey: hexKey()}
	cfgA, cfgB := common, common
	cfgA.Name, cfgA.DataDir = "A", t.TempDir()
	cfgB.Name, cfgB.DataDir = "B", t.TempDir()
	a, b := startReplica(t, cfgA), startReplica(t, cfgB)

	// A replica with another certificate key could not open the others'
	// sealed files: it does not start.
	cfgC := common
	cfgC.Name, cfgC.DataDir, cfgC.CertsKey, cfgC.Listen = "C", t.TempDir(), hexKey(), "127.0.0.1:0" // the rest: serve's defaults
	if c, err := serve.Start(ctx, cfgC, quietLog()); err == nil {
		c.Shutdown(ctx)
		t.Fatal("a replica with another certificate key started")
	} else if !strings.Contains(err.Error(), "same FREEAGENT_CERTS_KEY") {
		t.Fatalf("replica with another key: %v", err)
	}

	st, err := store.Open(ctx, dsn, store.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, adminKey, err := st.CreateKey(ctx, "admin", "admin")
	if err != nil {
		t.Fatal(err)
	}
	onA := &api.Client{BaseURL: a.URL, APIKey: adminKey}
	onB := &api.Client{BaseURL: b.URL, APIKey: adminKey}

	reg, err := onB.Register(ctx, api.RegisterRequest{Name: "mac", Capabilities: api.Capabilities{MaxConcurrentBuilds: 1}})
	if err != nil {
		t.Fatal(err)
	}
	src := []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00") // an empty tar.gz
	sub, err := onA.Submit(ctx, api.SubmitRequest{Platform: "android", Source: bytes.NewReader(src)})
	if err != nil {
		t.Fatal(err)
	}
	poll, err := onB.Poll(ctx, reg.AccessToken, 10*time.Second)
	if err != nil || poll.Job == nil || poll.Job.ID != sub.ID {
		t.Fatalf("poll on B: %+v %v", poll, err)
	}
	job, token := poll.Job, poll.AccessToken

	// B serves the source A received, from the bucket directly (requests
	// that reach the bucket itself are recorded).
	var seen []http.Header
	record := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if "http://"+r.URL.Host == viaProxy.Endpoint {
			seen = append(seen, r.Header.Clone())
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	onA.HTTP, onB.HTTP = record, record
	resp, err := onB.Source(ctx, job.ID, "", token)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, src) || resp.Header.Get(api.HeaderChecksum) != hex.EncodeToString(sha256Of(src)) || len(seen) != 1 {
		t.Fatalf("source from B: %d %q %v (%d direct requests)", resp.StatusCode, got, resp.Header, len(seen))
	}

	artifact := make([]byte, 3<<20+17)
	rand.Read(artifact)
	sum := sha256.Sum256(artifact)
	result := func() api.Result {
		return api.Result{BuildID: job.ID, AttemptID: job.AttemptID, LeaseToken: job.LeaseToken, Success: true,
			FileName: "app-release.apk", File: bytes.NewReader(artifact), SHA256: hex.EncodeToString(sum[:])}
	}

	// The store is unreachable: the result is refused and the build does
	// not complete without its artifact.
	proxy.Down()
	if _, err := onB.Upload(ctx, token, result()); err == nil {
		t.Fatal("a result was accepted while its artifact could not be stored")
	} else if e := (*api.Error)(nil); !errors.As(err, &e) || e.Status < 500 {
		t.Fatalf("upload with the store down: %v", err)
	}
	if bl, err := onA.GetBuild(ctx, job.ID); err != nil || bl.Status.Terminal() || len(bl.Artifacts) != 0 {
		t.Fatalf("build after the failed upload: %+v %v", bl, err)
	}
	// Back, but dropping connections: the client's retries carry the put.
	proxy.Up()
	proxy.FailNext(2)
	refusedBefore := proxy.Refused()
	res, err := onB.Upload(ctx, token, result())
	if err != nil || res.Status != api.StatusCompleted || res.Artifact == nil {
		t.Fatalf("upload: %+v %v", res, err)
	}
	if proxy.Refused()-refusedBefore != 2 {
		t.Fatalf("the proxy refused %d connections, want 2", proxy.Refused()-refusedBefore)
	}

	build, err := onA.GetBuild(ctx, job.ID)
	if err != nil || build.Status != api.StatusCompleted || len(build.Artifacts) != 1 {
		t.Fatalf("build from A: %+v %v", build, err)
	}
	rec := build.Artifacts[0]
	if rec.SHA256 != hex.EncodeToString(sum[:]) || rec.Size != int64(len(artifact)) {
		t.Fatalf("recorded artifact: %+v", rec)
	}
	// Downloads go straight to the bucket: a 307 to a short-lived signed
	// URL with the checksum headers, followed without the API key.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("GET", b.URL+rec.URL, nil)
	req.Header.Set(api.HeaderAPIKey, adminKey)
	redirect, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	redirect.Body.Close()
	loc, _ := url.Parse(redirect.Header.Get("Location"))
	if redirect.StatusCode != http.StatusTemporaryRedirect || loc == nil || "http://"+loc.Host != viaProxy.Endpoint ||
		redirect.Header.Get(api.HeaderChecksum) != rec.SHA256 || redirect.Header.Get("Cache-Control") != "no-store" ||
		loc.Query().Get("X-Amz-Expires") != "300" {
		t.Fatalf("download answer: %d %v", redirect.StatusCode, redirect.Header)
	}
	for _, c := range []*api.Client{onB, onA} {
		for _, offset := range []int64{0, 1 << 20} {
			resp, err := c.DownloadArtifact(ctx, job.ID, rec.Name, offset)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := http.StatusOK
			if offset > 0 {
				want = http.StatusPartialContent
			}
			if err != nil || resp.StatusCode != want || resp.Header.Get(api.HeaderChecksum) != rec.SHA256 {
				t.Fatalf("download from %s at %d: %d %v %v", c.BaseURL, offset, resp.StatusCode, resp.Header, err)
			}
			whole := append(slices.Clone(artifact[:offset]), body...)
			if got := sha256.Sum256(whole); hex.EncodeToString(got[:]) != rec.SHA256 {
				t.Fatalf("download from %s at %d: SHA-256 differs from the record", c.BaseURL, offset)
			}
		}
	}

	if len(seen) != 5 {
		t.Fatalf("%d requests reached the bucket directly, want 5", len(seen))
	}
	for _, h := range seen {
		if h.Get(api.HeaderAPIKey) != "" || h.Get(api.HeaderWorkerToken) != "" {
			t.Fatalf("a credential went to the bucket: %v", h)
		}
	}
	// The files are in the bucket, and on neither replica's disk.
	keys := bucket.Keys(t)
	slices.Sort(keys)
	want := []string{"farm/builds/" + job.ID + "/attempts/" + job.AttemptID + "/artifact-app-release.apk", "farm/builds/" + job.ID + "/source", "farm/keys/certs-key-check.sealed"}
	if !slices.Equal(keys, want) {
		t.Fatalf("bucket holds %v, want %v", keys, want)
	}
	for _, dir := range []string{cfgA.DataDir, cfgB.DataDir} {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				t.Fatal(err)
			}
			if !d.IsDir() {
				t.Errorf("file left on a replica's disk: %s", p)
			}
			return nil
		})
	}
}

// TestUnusableBlobStoreStopsStart: the controller refuses to start on a
// store it cannot use, naming the setting and what to fix.
func TestUnusableBlobStoreStopsStart(t *testing.T) {
	bucket := s3test.NewBucket(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	for _, c := range []struct {
		name, url, secret, want string
	}{
		{"missing bucket", "s3://no-such-bucket/x?endpoint=" + bucket.Endpoint, bucket.SecretKey, `bucket "no-such-bucket" at ` + strings.TrimPrefix(bucket.Endpoint, "http://") + " does not exist: create it"},
		{"wrong secret", bucket.URL("x"), "wrong" + bucket.SecretKey, "denied access (AccessDenied): check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"},
		{"no credentials", bucket.URL("x"), "", "no S3 credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"},
		{"unreachable", "s3://" + bucket.Name + "?endpoint=" + closed, bucket.SecretKey, "cannot reach bucket"},
		{"unknown parameter", bucket.URL("x") + "&regoin=eu", bucket.SecretKey, `unknown parameter "regoin"`},
		{"endpoint with a path", "s3://bkt?endpoint=http://h/p", bucket.SecretKey, "want the service's base URL"},
		{"bad bucket name", "s3://B_/x", bucket.SecretKey, `bucket "B_"`},
		{"other scheme", "ftp://h/x", bucket.SecretKey, "want file:///DIR or s3://"},
		{"relative file", "file://data/files", bucket.SecretKey, "want file:///absolute/directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("AWS_ACCESS_KEY_ID", bucket.AccessKey)
			t.Setenv("AWS_SECRET_ACCESS_KEY", c.secret)
			t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
			t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
			if c.secret == "" {
				t.Setenv("AWS_ACCESS_KEY_ID", "")
			}
			_, err := serve.OpenBlobStore(context.Background(), serve.Config{DataDir: t.TempDir(), BlobStore: c.url})
			if err == nil || !strings.Contains(err.Error(), "--blob-store (FREEAGENT_BLOB_STORE)") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant the setting named and %q", err, c.want)
			}
		})
	}
	// And serve.Start itself stops on it, before listening.
	t.Setenv("AWS_ACCESS_KEY_ID", bucket.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", bucket.SecretKey)
	_, err = serve.Start(context.Background(), serve.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), DatabaseURL: pgtest.NewDatabase(t),
		BlobStore: "s3://missing-bucket?endpoint=" + bucket.Endpoint, Store: store.DefaultConfig(), Limits: httpapi.DefaultLimits()}, quietLog())
	if err == nil || !strings.Contains(err.Error(), "--blob-store") {
		t.Fatalf("start on a missing bucket: %v", err)
	}
}

// TestStartSweepsBeforeServing: a build whose lease ran out while no
// controller ran is queued again by the time Start returns, and the sweep
// that did it has ended, so a caller's own sweep right after never finds
// the reaper's lock taken (it would report Ran false).
func TestStartSweepsBeforeServing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := controllertest.Start(t, controllertest.Logger(quietLog()))
	reg, err := c.Worker.Register(ctx, api.RegisterRequest{Name: "mac", Capabilities: api.Capabilities{MaxConcurrentBuilds: 1}})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.Developer.Submit(ctx, api.SubmitRequest{Platform: "android", Source: bytes.NewReader(controllertest.Project(t, map[string]string{"package.json": "{}"}))})
	if err != nil {
		t.Fatal(err)
	}
	if poll, err := c.Worker.Poll(ctx, reg.AccessToken, 10*time.Second); err != nil || poll.Job == nil || poll.Job.ID != sub.ID {
		t.Fatalf("poll: %+v %v", poll, err)
	}
	// The running controller sweeps next in an hour.
	if _, err := c.Serve.Store().Pool().Exec(ctx, `UPDATE builds SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, sub.ID); err != nil {
		t.Fatal(err)
	}

	c.Restart()
	b, err := c.Developer.GetBuild(ctx, sub.ID)
	if err != nil || b.Status != api.StatusPending {
		t.Fatalf("the build after a restart: %s %v, want pending again", b.Status, err)
	}
	if r, err := c.Serve.Store().Sweep(ctx); err != nil || !r.Ran {
		t.Fatalf("a sweep right after the start: %+v %v", r, err)
	}
}
