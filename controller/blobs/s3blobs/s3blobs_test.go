package s3blobs_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/blobs/s3blobs"
	"github.com/freeagent-build/freeagent/controller/blobs/s3blobs/s3test"
)

func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }

func TestParseURL(t *testing.T) {
	for raw, want := range map[string]s3blobs.Config{
		"s3://builds":                                              {Bucket: "builds", Endpoint: "s3.amazonaws.com", Secure: true},
		"s3://builds/farm/a/?region=x":                             {Bucket: "builds", Prefix: "farm/a", Endpoint: "s3.amazonaws.com", Secure: true, Region: "x"},
		"s3://b-1/p?endpoint=http://127.0.0.1:9000":                {Bucket: "b-1", Prefix: "p", Endpoint: "127.0.0.1:9000"},
		"s3://b.x/?endpoint=https://acc.r2.cloudflarestorage.com/": {Bucket: "b.x", Endpoint: "acc.r2.cloudflarestorage.com", Secure: true},
		"s3://bkt?direct=false&region=r":                           {Bucket: "bkt", Endpoint: "s3.amazonaws.com", Secure: true, Region: "r", NoDirect: true},
	} {
		got, err := s3blobs.ParseURL(raw)
		if err != nil || got != want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", raw, got, err, want)
		}
		if again, err := s3blobs.ParseURL(got.String()); err != nil || again.Bucket != got.Bucket || again.Prefix != got.Prefix || again.Endpoint != got.Endpoint || again.Secure != got.Secure || again.NoDirect != got.NoDirect {
			t.Errorf("%q → %s does not parse back: %+v %v", raw, got, again, err)
		}
	}
	for raw, want := range map[string]string{
		"s3://":                          "want s3://BUCKET",
		"s3://user:pw@bkt/x":             "want s3://BUCKET",
		"http://bkt/x":                   "want s3://BUCKET",
		"s3://bkt/a/../b":                "prefix",
		"s3://bkt?endpoint=ftp://h":      "endpoint",
		"s3://bkt?endpoint=http://h?x=1": "endpoint",
		"s3://bkt?endpoint=a&endpoint=b": "given 2 times",
		"s3://bkt?acl=public":            `unknown parameter "acl"`,
		"s3://bkt?direct=maybe":          "want true or false",
		"s3://Bad_Name":                  `bucket "Bad_Name"`,
	} {
		if _, err := s3blobs.ParseURL(raw); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseURL(%q): %v, want an error about %q", raw, err, want)
		}
	}
}

func open(t *testing.T, b s3test.Bucket, spool string) *s3blobs.Store {
	t.Helper()
	cfg, err := s3blobs.ParseURL(b.URL("p"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := s3blobs.Open(context.Background(), cfg, s3blobs.Options{SpoolDir: spool, Credentials: b.Credentials()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFailedPutLeavesNothing: with the service unreachable Commit fails
// (after the client's retries), nothing appears in the bucket and the
// spool file is gone; dropped connections alone are retried through.
func TestFailedPutLeavesNothing(t *testing.T) {
	ctx := context.Background()
	proxy, b := s3test.NewProxy(t, s3test.NewBucket(t))
	spool := t.TempDir()
	s := open(t, b, spool)

	w, err := s.Create(ctx, "builds/x/source")
	if err != nil {
		t.Fatal(err)
	}
	w.Write(bytes.Repeat([]byte("x"), 1000))
	proxy.Down()
	if err := w.Commit(ctx); err == nil {
		t.Fatal("commit succeeded with the service unreachable")
	}
	proxy.Up()
	if _, err := s.Stat(ctx, "builds/x/source"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after a failed commit: %v", err)
	}
	if left, _ := os.ReadDir(spool); len(left) != 0 {
		t.Fatalf("spool files left: %v", left)
	}

	w, err = s.Create(ctx, "builds/x/source")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("whole"))
	proxy.FailNext(3)
	if err := w.Commit(ctx); err != nil {
		t.Fatalf("commit through dropped connections: %v", err)
	}
	if proxy.Refused() < 3 {
		t.Fatalf("refused %d connections, want at least 3", proxy.Refused())
	}
	if info, err := s.Stat(ctx, "builds/x/source"); err != nil || info.Size != 5 {
		t.Fatalf("stat: %+v %v", info, err)
	}
}

// TestStaleSpoolFilesAreRemoved: uploads a crash left in the spool
// directory go at the next start; fresh ones (another replica sharing the
// directory may be writing them) stay.
func TestStaleSpoolFilesAreRemoved(t *testing.T) {
	spool := t.TempDir()
	stale, fresh := filepath.Join(spool, "upload-1"), filepath.Join(spool, "upload-2")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-25 * time.Hour)
	os.Chtimes(stale, old, old)
	open(t, s3test.NewBucket(t), spool)
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stale spool file: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("fresh spool file: %v", err)
	}
}

// TestPresignedGet: a signed URL serves its object (Range too) with the
// headers asked for, and is refused for another object, once expired, or
// for another method; direct=false turns them off.
func TestPresignedGet(t *testing.T) {
	ctx := context.Background()
	b := s3test.NewBucket(t)
	s := open(t, b, t.TempDir())
	for key, body := range map[string]string{"builds/x/artifact-app.apk": "0123456789", "builds/x/source": "secret source"} {
		w, err := s.Create(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
		if err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	u, err := s.PresignGet(ctx, "builds/x/artifact-app.apk", time.Minute, "application/vnd.android.package-archive", `attachment; filename="app.apk"`)
	if err != nil {
		t.Fatal(err)
	}
	get := func(u, method, rng string) (int, http.Header, string) {
		req, _ := http.NewRequest(method, u, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(body)
	}
	if code, h, body := get(u, "GET", ""); code != 200 || body != "0123456789" || h.Get("Content-Type") != "application/vnd.android.package-archive" ||
		h.Get("Content-Disposition") != `attachment; filename="app.apk"` {
		t.Fatalf("GET: %d %q %v", code, body, h)
	}
	if code, h, body := get(u, "GET", "bytes=4-"); code != 206 || body != "456789" || h.Get("Content-Range") != "bytes 4-9/10" {
		t.Fatalf("ranged GET: %d %q %v", code, body, h)
	}
	other := strings.Replace(u, "artifact-app.apk", "source", 1)
	if code, _, body := get(other, "GET", ""); code != 403 || strings.Contains(body, "secret source") {
		t.Fatalf("the URL used for another object: %d %q", code, body)
	}
	if code, _, _ := get(u, "PUT", ""); code != 403 {
		t.Fatalf("the URL used to PUT: %d", code)
	}
	short, err := s.PresignGet(ctx, "builds/x/artifact-app.apk", time.Second, "", "")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond) // S3 expiry is in whole seconds: wait past it
	if code, _, body := get(short, "GET", ""); code != 403 || body == "0123456789" {
		t.Fatalf("an expired URL: %d %q", code, body)
	}

	cfg, _ := s3blobs.ParseURL(b.URL("p") + "&direct=false")
	off, err := s3blobs.Open(ctx, cfg, s3blobs.Options{SpoolDir: t.TempDir(), Credentials: b.Credentials()})
	if err != nil {
		t.Fatal(err)
	}
	if u, err := off.PresignGet(ctx, "builds/x/source", time.Minute, "", ""); u != "" || err != nil {
		t.Fatalf("direct=false: %q %v", u, err)
	}
	// Nor direct uploads: the controller says so before anything is signed.
	files, err := blobs.New(off, make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	sum := strings.Repeat("ab", 32)
	for _, size := range []int64{10, api.MultipartThreshold + 1} {
		if up, ok, err := files.StartSourceUpload(ctx, size, sum, slices.Repeat([]string{sum}, api.Parts(size)), time.Minute); ok || err != nil || up.URL != "" || up.UploadID != "" {
			t.Fatalf("direct=false, %d bytes: %+v %v %v", size, up, ok, err)
		}
	}
	if files.DirectUploads() {
		t.Fatal("direct=false takes direct uploads")
	}
	for up := range b.Client(t).ListIncompleteUploads(ctx, b.Name, "", true) {
		t.Fatalf("direct=false began an upload: %+v", up)
	}
}

// TestCompleteUploadBegunWithoutChecksums: during an upgrade a replica of
// the previous release may have begun a multipart upload without part
// checksums; this release completes it (the service lists no part
// checksums, and none are named) and checks the whole object as before.
func TestCompleteUploadBegunWithoutChecksums(t *testing.T) {
	b := s3test.NewBucket(t)
	s := open(t, b, t.TempDir())
	ctx := context.Background()
	core := minio.Core{Client: b.Client(t)}
	const key = "uploads/sources/old"
	// As the previous release began it: no checksum algorithm.
	id, err := core.NewMultipartUpload(ctx, b.Name, "p/"+key+".parts", minio.PutObjectOptions{ContentType: "application/octet-stream"})
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("old release "), (api.MultipartThreshold+1<<20)/12)
	ps := api.PartSize(int64(len(data)))
	for i := range api.Parts(int64(len(data))) {
		part := data[int64(i)*ps : min(int64(i+1)*ps, int64(len(data)))]
		if _, err := core.PutObjectPart(ctx, b.Name, "p/"+key+".parts", id, i+1, bytes.NewReader(part), int64(len(part)), minio.PutObjectPartOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CompleteMultipart(ctx, key, id, int64(len(data)), ps); err != nil {
		t.Fatalf("complete an upload begun without checksums: %v", err)
	}
	want := sha256.Sum256(data)
	if info, sum, err := s.Checksum(ctx, key); err != nil || info.Size != int64(len(data)) || sum != hex.EncodeToString(want[:]) {
		t.Fatalf("the assembled object: %+v %s %v", info, sum, err)
	}
}
