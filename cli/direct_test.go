package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs/s3blobs/s3test"
)

// countingBody counts the bytes a request body gives.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// TestSubmitDirectToS3: with a controller on an S3 store, expo-build sends
// the archive straight to the bucket, in parts when it is large, and the
// controller receives only the submit's fields (it reads the archive back
// from the store for its fingerprint); the worker gets exactly the project.
func TestSubmitDirectToS3(t *testing.T) {
	bucket := s3test.NewBucket(t)
	bucket.Setenv(t)
	e := newEnvOn(t, bucket.URL("farm"))
	bucketHost := strings.TrimPrefix(bucket.Endpoint, "http://")
	for _, tc := range []struct {
		name        string
		asset       int
		puts        int  // PUTs to the bucket: one, or one per part
		unreachable bool // the bucket cannot be reached from here: the archive goes through the controller
		loseAnswer  bool // the first submit's answer is lost: the retry names the same upload
	}{{"small", 2 << 20, 1, false, false}, {"multipart", 66 << 20, 5, false, false}, {"unreachable", 2 << 20, 1, true, false},
		{"answer lost", 1 << 20, 1, false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			asset := randomBytes(t, tc.asset)
			dir := project(t, map[string]string{"package.json": `{"name":"demo"}`, "assets/video.bin": string(asset)})
			var toController atomic.Int64
			var mu sync.Mutex
			var puts []string
			unsummed := 0 // PUTs without their part's (or file's) SHA-256
			var submits atomic.Int64
			record := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if r.Method == http.MethodPost && r.URL.Path == "/api/builds" && submits.Add(1) == 1 && tc.loseAnswer {
					resp, err := http.DefaultTransport.RoundTrip(r)
					if err == nil {
						resp.Body.Close()
					}
					return nil, errors.New("read: connection reset by peer")
				}
				if r.URL.Host == bucketHost {
					mu.Lock()
					puts = append(puts, r.Method+" "+r.URL.Path)
					if r.Header.Get("X-Amz-Checksum-Sha256") == "" {
						unsummed++
					}
					mu.Unlock()
					if tc.unreachable && r.Method == http.MethodPut {
						return nil, errors.New("dial tcp: connect: no route to host")
					}
				} else if r.Body != nil {
					r.Body = countingBody{r.Body, &toController}
				}
				return http.DefaultTransport.RoundTrip(r)
			})}
			r := e.runApp(func(a *App) { a.HTTPClient = record }, nil, "build", "--no-wait", dir, "--platform", "android", "--json")
			if r.code != 0 {
				t.Fatalf("submit: %s", r)
			}
			id := queuedID(t, r)
			if want := map[bool]int64{false: 1, true: 2}[tc.loseAnswer]; submits.Load() != want {
				t.Fatalf("%d submits, want %d", submits.Load(), want)
			}
			if list, err := e.admin.ListBuilds(context.Background(), api.ListOptions{Status: "pending"}); err != nil || len(list.Builds) != 1 || list.Builds[0].ID != id {
				t.Fatalf("pending builds: %+v %v", list.Builds, err)
			}
			if len(puts) != tc.puts || unsummed != 0 {
				t.Fatalf("requests to the bucket: %v, want %d PUTs; %d without a checksum", puts, tc.puts, unsummed)
			}
			for _, p := range puts {
				if !strings.HasPrefix(p, "PUT /"+bucket.Name+"/farm/uploads/sources/") {
					t.Fatalf("request to the bucket: %s", p)
				}
			}
			if n := toController.Load(); tc.unreachable != (n > int64(tc.asset)) || (!tc.unreachable && n > 64<<10) {
				t.Fatalf("%d bytes went to the controller", n)
			}
			if tc.unreachable != strings.Contains(r.stderr, "object store is unreachable from here") {
				t.Fatalf("warning about the unreachable store:\n%s", r.stderr)
			}
			w := e.worker("android")
			job := w.claim()
			if job.ID != id {
				t.Fatalf("job %s, want %s", job.ID, id)
			}
			if got := untar(t, w.source(job))["assets/video.bin"]; !bytes.Equal([]byte(got), asset) {
				t.Fatalf("the worker got %d bytes of the asset, want %d", len(got), len(asset))
			}
			// The controller read the upload back for its fingerprint: the one --reuse matches.
			if b, err := e.admin.GetBuild(context.Background(), id); err != nil || b.Spec == nil || b.SourceFingerprint != b.Spec.SourceFingerprint ||
				b.SourceFingerprintMismatch {
				t.Fatalf("source fingerprints: computed %q, declared %+v, mismatch %v (%v)", b.SourceFingerprint, b.Spec, b.SourceFingerprintMismatch, err)
			}
			e.mustRun(0, nil, "cancel", id)
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
