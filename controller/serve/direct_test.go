package serve_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/blobs/s3blobs"
	"github.com/freeagent-build/freeagent/controller/blobs/s3blobs/s3test"
	"github.com/freeagent-build/freeagent/controller/pgtest"
	"github.com/freeagent-build/freeagent/controller/serve"
	"github.com/freeagent-build/freeagent/controller/store"
)

// directFarm is one controller on an S3 bucket, with a developer key, a
// second developer key and a worker key.
type directFarm struct {
	bucket      s3test.Bucket
	dev, other  *api.Client
	worker      *api.Client
	st          *store.Store
	controllerU string
}

func startDirectFarm(t *testing.T) *directFarm {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	bucket := s3test.NewBucket(t)
	bucket.Setenv(t)
	c := startReplica(t, serve.Config{Name: "A", DataDir: t.TempDir(), DatabaseURL: dsn, BlobStore: bucket.URL("farm"), CertsKey: hexKey(), LinkKey: hexKey()})
	st, err := store.Open(ctx, dsn, store.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	mk := func(name, role string) *api.Client {
		_, secret, err := st.CreateKey(ctx, name, role)
		if err != nil {
			t.Fatal(err)
		}
		return &api.Client{BaseURL: c.URL, APIKey: secret}
	}
	return &directFarm{bucket: bucket, dev: mk("dev", api.RoleDeveloper), other: mk("other", api.RoleDeveloper), worker: mk("worker", api.RoleWorker),
		st: st, controllerU: c.URL}
}

// archive returns n random bytes that start like a tar.gz, and their hex
// SHA-256.
func archive(n int) ([]byte, string) {
	b := make([]byte, n)
	rand.Read(b)
	copy(b, "\x1f\x8b\x08\x00")
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:])
}

// builds counts the farm's builds.
func (f *directFarm) builds(t *testing.T) int {
	t.Helper()
	l, err := f.dev.ListBuilds(context.Background(), api.ListOptions{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Builds)
}

// stagingKeys are the bucket's objects and incomplete multipart uploads
// under uploads/.
func (f *directFarm) staging(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, k := range f.bucket.Keys(t) {
		if strings.HasPrefix(k, "farm/uploads/") {
			out = append(out, k)
		}
	}
	for up := range f.bucket.Client(t).ListIncompleteUploads(context.Background(), f.bucket.Name, "farm/", true) {
		if up.Err != nil {
			t.Fatal(up.Err)
		}
		out = append(out, "incomplete:"+up.Key)
	}
	return out
}

// sourceOf takes the build as a worker and downloads its source (from the
// bucket, through the controller's 307).
func (f *directFarm) sourceOf(t *testing.T, id string) ([]byte, string) {
	t.Helper()
	ctx := context.Background()
	reg, err := f.worker.Register(ctx, api.RegisterRequest{Name: "mac", Capabilities: api.Capabilities{MaxConcurrentBuilds: 1}})
	if err != nil {
		t.Fatal(err)
	}
	poll, err := f.worker.Poll(ctx, reg.AccessToken, 10*time.Second)
	if err != nil || poll.Job == nil || poll.Job.ID != id {
		t.Fatalf("poll: %+v %v", poll, err)
	}
	resp, err := f.worker.Source(ctx, id, "", poll.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("source: %d %v", resp.StatusCode, err)
	}
	return b, resp.Header.Get(api.HeaderChecksum)
}

// TestDirectSourceUpload: with an S3 store the CLI's source archive goes
// straight to the bucket (one PUT when small, parts when large), the
// submit names its ticket, and the build's source is those bytes; the
// staging object is gone and the controller's disk holds nothing.
func TestDirectSourceUpload(t *testing.T) {
	f := startDirectFarm(t)
	ctx := context.Background()
	mode, err := f.dev.StartSourceUpload(ctx, api.DirectUploadRequest{Name: "source.tar.gz"})
	if err != nil || !mode.Direct || mode.URL != "" || mode.Ticket != "" {
		t.Fatalf("mode: %+v %v", mode, err)
	}
	for _, n := range []int{1 << 20, api.MultipartThreshold + 5<<20 + 3} {
		src, sum := archive(n)
		sums := api.NewUploadSums(-1)
		sums.Write(src)
		decl, err := sums.Declare("source.tar.gz", bytes.NewReader(src))
		if err != nil || decl.SHA256 != sum {
			t.Fatalf("%d bytes: declared %+v, %v", n, decl, err)
		}
		multipart := n > api.MultipartThreshold
		if multipart {
			// A client that predates part sums sends the bytes through
			// the controller: no part URL is signed for undeclared bytes.
			if up, err := f.dev.StartSourceUpload(ctx, api.DirectUploadRequest{Name: "source.tar.gz", Size: int64(n), SHA256: sum}); err != nil || up.Direct || len(up.Parts) != 0 {
				t.Fatalf("%d bytes without part sums: %+v %v", n, up, err)
			}
		}
		up, err := f.dev.StartSourceUpload(ctx, decl)
		if err != nil || !up.Direct || up.Ticket == "" {
			t.Fatalf("%d bytes: %+v %v", n, up, err)
		}
		if multipart != (len(up.Parts) > 0) || multipart == (up.URL != "") {
			t.Fatalf("%d bytes: %d parts, URL %q", n, len(up.Parts), up.URL)
		}
		if multipart && (up.PartSize != api.PartSize(int64(n)) || len(up.Parts) != 5 || len(up.PartHeaders) != 5) {
			t.Fatalf("%d bytes: %d parts of %d, %d part headers", n, len(up.Parts), up.PartSize, len(up.PartHeaders))
		}
		if err := api.SendDirect(ctx, nil, up, bytes.NewReader(src), int64(n)); err != nil {
			t.Fatalf("%d bytes: send: %v", n, err)
		}
		req := api.SubmitRequest{Platform: "android", SourceTicket: up.Ticket, IdempotencyKey: "k" + strconv.Itoa(n)}
		sub, err := f.dev.Submit(ctx, req)
		if err != nil {
			t.Fatalf("%d bytes: submit: %v", n, err)
		}
		// A repeat whose first answer was lost finds the build.
		if again, err := f.dev.Submit(ctx, req); err != nil || again.ID != sub.ID {
			t.Fatalf("%d bytes: repeated submit: %+v %v", n, again, err)
		}
		got, header := f.sourceOf(t, sub.ID)
		if !bytes.Equal(got, src) || header != sum {
			t.Fatalf("%d bytes: the build's source differs (%d bytes, checksum header %s)", n, len(got), header)
		}
		if s := f.staging(t); len(s) != 0 {
			t.Fatalf("%d bytes: staging left: %v", n, s)
		}
		if _, err := f.dev.Cancel(ctx, sub.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDirectSourceRefusals: a source upload used for other bytes, another
// size, another object, another key, after its URL expired, or never
// made, is refused, and no build is recorded; what was refused leaves no
// object behind.
func TestDirectSourceRefusals(t *testing.T) {
	f := startDirectFarm(t)
	ctx := context.Background()
	src, sum := archive(4 << 10)
	start := func(size int64, sha string) api.DirectUpload {
		t.Helper()
		up, err := f.dev.StartSourceUpload(ctx, api.DirectUploadRequest{Name: "source.tar.gz", Size: size, SHA256: sha})
		if err != nil || !up.Direct {
			t.Fatalf("start: %+v %v", up, err)
		}
		return up
	}
	put := func(rawURL string, headers map[string]string, body []byte) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPut, rawURL, bytes.NewReader(body))
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	submit := func(what, ticket string, c *api.Client, status int) {
		t.Helper()
		if c == nil {
			c = f.dev
		}
		_, err := c.Submit(ctx, api.SubmitRequest{Platform: "android", SourceTicket: ticket})
		if api.StatusOf(err) != status || (status == 0) != (err == nil) {
			t.Fatalf("%s: submit answered %v, want %d", what, err, status)
		}
	}

	// Bad declarations.
	for _, bad := range []api.DirectUploadRequest{{Size: -1, SHA256: sum}, {Size: 10, SHA256: "abc"}, {Size: 3 << 30, SHA256: sum}} {
		if _, err := f.dev.StartSourceUpload(ctx, bad); api.StatusOf(err) != http.StatusBadRequest && api.StatusOf(err) != http.StatusRequestEntityTooLarge {
			t.Fatalf("declaration %+v: %v", bad, err)
		}
	}
	// Part sums that do not fit the plan: a file sent in one PUT has
	// none, one sent in 5 parts has 5 sums of 64 hex digits.
	large := int64(api.MultipartThreshold + 1)
	for _, bad := range []api.DirectUploadRequest{
		{Size: int64(len(src)), SHA256: sum, PartSHA256: []string{sum}},
		{Size: large, SHA256: sum, PartSHA256: slices.Repeat([]string{sum}, 4)},
		{Size: large, SHA256: sum, PartSHA256: slices.Repeat([]string{sum}, 6)},
		{Size: large, SHA256: sum, PartSHA256: append(slices.Repeat([]string{sum}, 4), "abc")},
	} {
		if _, err := f.dev.StartSourceUpload(ctx, bad); api.StatusOf(err) != http.StatusBadRequest {
			t.Fatalf("%d bytes declared with %d part sums: %v, want 400", bad.Size, len(bad.PartSHA256), err)
		}
	}

	// Other bytes than declared: the store refuses the PUT; the submit
	// finds nothing.
	up := start(int64(len(src)), sum)
	other := slices.Clone(src)
	other[100] ^= 1
	if code := put(up.URL, up.Headers, other); code != http.StatusBadRequest {
		t.Fatalf("PUT of other bytes: %d", code)
	}
	if code := put(up.URL, nil, src); code/100 == 2 {
		t.Fatal("a PUT without the signed checksum header was accepted")
	}
	submit("never uploaded", up.Ticket, nil, http.StatusConflict)

	// The right bytes, but another size declared: refused, object removed.
	up = start(int64(len(src))+1, sum)
	if code := put(up.URL, up.Headers, src); code != http.StatusOK {
		t.Fatalf("PUT: %d", code)
	}
	submit("other size", up.Ticket, nil, http.StatusUnprocessableEntity)

	// The URL for another object: the signature does not cover it.
	up = start(int64(len(src)), sum)
	u, _ := url.Parse(up.URL)
	u.Path += "x"
	if code := put(u.String(), up.Headers, src); code != http.StatusForbidden {
		t.Fatalf("PUT to another key: %d", code)
	}
	// Another key's ticket, and a forged one.
	if code := put(up.URL, up.Headers, src); code != http.StatusOK {
		t.Fatalf("PUT: %d", code)
	}
	submit("another key's ticket", up.Ticket, f.other, http.StatusForbidden)
	forged := []byte(up.Ticket)
	forged[len(forged)/2] ^= 1
	submit("forged ticket", string(forged), nil, http.StatusForbidden)

	if n := f.builds(t); n != 0 {
		t.Fatalf("%d builds recorded", n)
	}
	// The upload the other key could not use is still the owner's.
	submit("owner", up.Ticket, nil, 0)
	submit("the same ticket again", up.Ticket, nil, http.StatusConflict)
	if n := f.builds(t); n != 1 {
		t.Fatalf("%d builds recorded, want 1", n)
	}
	if s := f.staging(t); len(s) != 0 {
		t.Fatalf("staging left: %v", s)
	}

	// Expiry: a URL signed for a second no longer works after it.
	files := openBlobs(t, f.bucket)
	ex, ok, err := files.StartSourceUpload(ctx, int64(len(src)), sum, nil, time.Second)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	time.Sleep(2 * time.Second)
	if code := put(ex.URL, ex.Headers, src); code != http.StatusForbidden {
		t.Fatalf("PUT after expiry: %d", code)
	}
	if _, err := files.Backend().Stat(ctx, ex.Key); err == nil {
		t.Fatal("an expired PUT stored an object")
	}
}

// openBlobs opens the farm's store as a controller does, for what the
// HTTP API does not let a test choose (a URL's lifetime).
func openBlobs(t *testing.T, b s3test.Bucket) *blobs.Store {
	t.Helper()
	cfg, err := s3blobs.ParseURL(b.URL("farm"))
	if err != nil {
		t.Fatal(err)
	}
	backend, err := s3blobs.Open(context.Background(), cfg, s3blobs.Options{SpoolDir: t.TempDir(), Credentials: b.Credentials()})
	if err != nil {
		t.Fatal(err)
	}
	files, err := blobs.New(backend, make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	return files
}
