package blobs_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/blobs/s3blobs"
	"github.com/freeagent-build/freeagent/controller/blobs/s3blobs/s3test"
)

func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }

// backends are the two implementations every behaviour below must share.
var backends = []struct {
	name string
	open func(t *testing.T) blobs.Backend
}{
	{"file", func(t *testing.T) blobs.Backend {
		d, err := blobs.NewDir(filepath.Join(t.TempDir(), "files"))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}},
	{"s3", func(t *testing.T) blobs.Backend {
		b := s3test.NewBucket(t)
		cfg, err := s3blobs.ParseURL(b.URL("farm/one"))
		if err != nil {
			t.Fatal(err)
		}
		spool := t.TempDir()
		s, err := s3blobs.Open(context.Background(), cfg, s3blobs.Options{SpoolDir: spool, Credentials: b.Credentials()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			// Every upload, committed or not, leaves the local disk.
			if left, _ := os.ReadDir(spool); len(left) != 0 {
				t.Errorf("spool files left behind: %v", left)
			}
		})
		return s
	}},
}

// behaviours is the contract of blobs.Backend.
var behaviours = []struct {
	name string
	run  func(t *testing.T, b blobs.Backend)
}{
	{"commit makes the object visible, whole", func(t *testing.T, b blobs.Backend) {
		data := random(t, 100_000)
		w := create(t, b, "builds/b1/attempts/a1/artifact-app.apk")
		write(t, w, data[:50_000])
		if _, err := b.Stat(ctx, "builds/b1/attempts/a1/artifact-app.apk"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("visible before commit: %v", err)
		}
		write(t, w, data[50_000:])
		if keys := list(t, b, ""); len(keys) != 0 {
			t.Fatalf("listed before commit: %v", keys)
		}
		if err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		w.Abort() // a no-op after Commit
		if err := w.Commit(ctx); err == nil {
			t.Fatal("a second Commit succeeded")
		}
		if got := read(t, b, "builds/b1/attempts/a1/artifact-app.apk"); !bytes.Equal(got, data) {
			t.Fatalf("read back %d bytes, differing", len(got))
		}
		info, err := b.Stat(ctx, "builds/b1/attempts/a1/artifact-app.apk")
		if err != nil || info.Size != int64(len(data)) || info.Key != "builds/b1/attempts/a1/artifact-app.apk" || time.Since(info.ModTime) > time.Hour {
			t.Fatalf("stat: %+v %v", info, err)
		}
	}},
	{"prepare then commit, or abort", func(t *testing.T, b blobs.Backend) {
		data := random(t, 70_000)
		w := create(t, b, "builds/b1/source")
		write(t, w, data)
		if err := w.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Stat(ctx, "builds/b1/source"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("visible once prepared: %v", err)
		}
		if err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if got := read(t, b, "builds/b1/source"); !bytes.Equal(got, data) {
			t.Fatalf("read back %d bytes, differing", len(got))
		}
		a := create(t, b, "builds/b2/source")
		write(t, a, data)
		if err := a.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		a.Abort()
		// Only the committed object is left, staging included.
		if keys := list(t, b, ""); !slices.Equal(keys, []string{"builds/b1/source"}) {
			t.Fatalf("after a prepared abort: %v", keys)
		}
	}},
	{"create new never replaces", func(t *testing.T, b blobs.Backend) {
		if err := b.CreateNew(ctx, "keys/marker", []byte("first")); err != nil {
			t.Fatal(err)
		}
		if err := b.CreateNew(ctx, "keys/marker", []byte("second")); !errors.Is(err, fs.ErrExist) {
			t.Fatalf("a second CreateNew: %v", err)
		}
		if got := read(t, b, "keys/marker"); string(got) != "first" {
			t.Fatalf("the marker holds %q", got)
		}
		if keys := list(t, b, ""); !slices.Equal(keys, []string{"keys/marker"}) {
			t.Fatalf("left: %v", keys)
		}
	}},
	{"abort leaves nothing", func(t *testing.T, b blobs.Backend) {
		w := create(t, b, "builds/b1/source")
		write(t, w, []byte("half a file"))
		w.Abort()
		w.Abort()
		if err := w.Commit(ctx); err == nil {
			t.Fatal("Commit after Abort succeeded")
		}
		if _, err := b.Stat(ctx, "builds/b1/source"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("aborted object: %v", err)
		}
		if keys := list(t, b, ""); len(keys) != 0 {
			t.Fatalf("aborted upload listed: %v", keys)
		}
	}},
	{"an empty object", func(t *testing.T, b blobs.Backend) {
		w := create(t, b, "builds/b1/artifact-empty")
		if err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if got := read(t, b, "builds/b1/artifact-empty"); len(got) != 0 {
			t.Fatalf("read %q", got)
		}
	}},
	{"a replacement is seen whole, and only once committed", func(t *testing.T, b blobs.Backend) {
		put(t, b, "builds/b1/artifact-a", []byte("old"))
		w := create(t, b, "builds/b1/artifact-a")
		write(t, w, []byte("new content"))
		if got := read(t, b, "builds/b1/artifact-a"); string(got) != "old" {
			t.Fatalf("before the replacement's commit: %q", got)
		}
		if err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if got := read(t, b, "builds/b1/artifact-a"); string(got) != "new content" {
			t.Fatalf("after: %q", got)
		}
	}},
	{"missing objects", func(t *testing.T, b blobs.Backend) {
		if _, _, err := b.Open(ctx, "builds/nope/source"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("open: %v", err)
		}
		if _, err := b.Stat(ctx, "builds/nope/source"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("stat: %v", err)
		}
		if err := b.Delete(ctx, "builds/nope/source"); err != nil {
			t.Fatalf("delete: %v", err)
		}
	}},
	{"delete", func(t *testing.T, b blobs.Backend) {
		put(t, b, "builds/b1/source", []byte("s"))
		put(t, b, "builds/b1/artifact-x", []byte("x"))
		if err := b.Delete(ctx, "builds/b1/source"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Stat(ctx, "builds/b1/source"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("deleted object: %v", err)
		}
		if got := read(t, b, "builds/b1/artifact-x"); string(got) != "x" {
			t.Fatalf("its neighbour: %q", got)
		}
		if err := b.Delete(ctx, "builds/b1/artifact-x"); err != nil {
			t.Fatal(err)
		}
		// The emptied build can be written again at once.
		put(t, b, "builds/b1/source", []byte("again"))
	}},
	{"list by prefix", func(t *testing.T, b blobs.Backend) {
		for _, k := range []string{"builds/a/source", "builds/a/artifact-1", "builds/ab/source", "builds/b/source", "other/x"} {
			put(t, b, k, []byte(k))
		}
		half := create(t, b, "builds/a/artifact-2") // in progress: not listed
		defer half.Abort()
		write(t, half, []byte("partial"))
		for prefix, want := range map[string][]string{
			"builds/a/": {"builds/a/artifact-1", "builds/a/source"},
			"builds/a":  {"builds/a/artifact-1", "builds/a/source", "builds/ab/source"},
			"builds/":   {"builds/a/artifact-1", "builds/a/source", "builds/ab/source", "builds/b/source"},
			"":          {"builds/a/artifact-1", "builds/a/source", "builds/ab/source", "builds/b/source", "other/x"},
			"builds/z/": nil,
			"nothing":   nil,
		} {
			if got := list(t, b, prefix); !slices.Equal(got, want) {
				t.Errorf("List(%q) = %v, want %v", prefix, got, want)
			}
		}
		for info, err := range b.List(ctx, "builds/a/source") {
			if err != nil || info.Size != int64(len("builds/a/source")) {
				t.Fatalf("listed info: %+v %v", info, err)
			}
		}
		n := 0
		for range b.List(ctx, "") { // stopping early is allowed
			n++
			break
		}
		if n != 1 {
			t.Fatalf("early stop: %d", n)
		}
	}},
	{"reads at any offset (resumable downloads)", func(t *testing.T, b blobs.Backend) {
		// Over 16 MiB: the S3 store uploads it in parts.
		data := random(t, 17<<20+123)
		put(t, b, "builds/b1/artifact-big.ipa", data)
		obj, info, err := b.Open(ctx, "builds/b1/artifact-big.ipa")
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Close()
		if info.Size != int64(len(data)) {
			t.Fatalf("size %d", info.Size)
		}
		buf := make([]byte, 1000)
		if _, err := obj.ReadAt(buf, 16<<20-500); err != nil || !bytes.Equal(buf, data[16<<20-500:16<<20+500]) {
			t.Fatalf("ReadAt across the part boundary: %v", err)
		}
		if _, err := obj.Seek(-10, io.SeekEnd); err != nil {
			t.Fatal(err)
		}
		if tail, err := io.ReadAll(obj); err != nil || !bytes.Equal(tail, data[len(data)-10:]) {
			t.Fatalf("tail: %v", err)
		}
		// What a download handler does with it: Range requests, as a
		// resumed download sends them.
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			obj, info, err := b.Open(r.Context(), "builds/b1/artifact-big.ipa")
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			defer obj.Close()
			http.ServeContent(w, r, "", info.ModTime, obj)
		}))
		defer srv.Close()
		for rng, want := range map[string][]byte{
			"":                        data,
			"bytes=5000000-":          data[5000000:],
			"bytes=100-199":           data[100:200],
			"bytes=-7":                data[len(data)-7:],
			"bytes=17825792-17825799": data[17825792:17825800],
		} {
			req, _ := http.NewRequest("GET", srv.URL, nil)
			if rng != "" {
				req.Header.Set("Range", rng)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			wantStatus := http.StatusPartialContent
			if rng == "" {
				wantStatus = http.StatusOK
			}
			if err != nil || resp.StatusCode != wantStatus || !bytes.Equal(got, want) {
				t.Fatalf("Range %q: %d, %d bytes (want %d), %v", rng, resp.StatusCode, len(got), len(want), err)
			}
		}
	}},
	{"keys that could escape are refused", func(t *testing.T, b blobs.Backend) {
		for _, k := range []string{"", "../x", "builds/../../x", "/abs", "a//b", "a/./b", "a/", `a\b`, "builds/b1/.upload-x"} {
			if w, err := b.Create(ctx, k); err == nil {
				w.Abort()
				t.Errorf("Create(%q) accepted", k)
			}
			if _, _, err := b.Open(ctx, k); err == nil || errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Open(%q): %v", k, err)
			}
			if err := b.Delete(ctx, k); err == nil {
				t.Errorf("Delete(%q) accepted", k)
			}
		}
	}},
	{"direct uploads: checked, then moved to their build", func(t *testing.T, b blobs.Backend) {
		s, _ := blobs.New(b, bytes.Repeat([]byte{1}, 32))
		data := []byte("the artifact's bytes")
		up, ok, err := s.StartDirectUpload(ctx, "b1", "a1", int64(len(data)), sum(string(data)), nil, time.Minute)
		if _, direct := b.(blobs.Direct); ok != direct || err != nil {
			t.Fatalf("direct uploads offered: %v (the store is direct: %v), %v", ok, direct, err)
		}
		if !ok {
			return // the file store: uploads go through the controller
		}
		if !strings.HasPrefix(up.Key, "uploads/b1/a1/") {
			t.Fatalf("staging key %q", up.Key)
		}
		putURL := func(body []byte, headers map[string]string) int {
			req, _ := http.NewRequest("PUT", up.URL, bytes.NewReader(body))
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
		if err := s.FinishDirectUpload(ctx, up.UploadRef, int64(len(data)), sum(string(data))); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("finish before the upload: %v", err)
		}
		if code := putURL([]byte("other bytes, same size"), up.Headers); code != http.StatusBadRequest {
			t.Fatalf("other bytes: %d", code)
		}
		if code := putURL(data, nil); code < 400 {
			t.Fatalf("a PUT without the checksum header: %d", code)
		}
		if code := putURL(data, up.Headers); code != http.StatusOK {
			t.Fatalf("the declared bytes: %d", code)
		}
		if err := s.FinishDirectUpload(ctx, up.UploadRef, int64(len(data))+1, sum(string(data))); !errors.Is(err, blobs.ErrChecksum) {
			t.Fatalf("finish with another size: %v", err)
		}
		if keys := list(t, b, "uploads/"); len(keys) != 0 {
			t.Fatalf("a refused upload was kept: %v", keys)
		}
		up, _, _ = s.StartDirectUpload(ctx, "b1", "a1", int64(len(data)), sum(string(data)), nil, time.Minute)
		if code := putURL(data, up.Headers); code != http.StatusOK {
			t.Fatalf("upload: %d", code)
		}
		if err := s.FinishDirectUpload(ctx, up.UploadRef, int64(len(data)), sum(string(data))); err != nil {
			t.Fatal(err)
		}
		if err := s.PromoteUpload(ctx, up.Key, "b1", blobs.Artifact("a1", "app.apk")); err != nil {
			t.Fatal(err)
		}
		if got := list(t, b, ""); !slices.Equal(got, []string{"builds/b1/attempts/a1/artifact-app.apk"}) {
			t.Fatalf("after promotion: %v", got)
		}
		if got := read(t, b, "builds/b1/attempts/a1/artifact-app.apk"); !bytes.Equal(got, data) {
			t.Fatalf("promoted: %q", got)
		}
	}},
	{"a multipart upload's part URLs take exactly their part's declared bytes", func(t *testing.T, b blobs.Backend) {
		if _, direct := b.(blobs.Direct); !direct {
			return // the file store takes no direct uploads
		}
		s, _ := blobs.New(b, bytes.Repeat([]byte{1}, 32))
		data := random(t, api.MultipartThreshold+1<<20)
		sums := api.NewUploadSums(int64(len(data)))
		sums.Write(data)
		req, err := sums.Declare("app.apk", nil)
		if err != nil || len(req.PartSHA256) != 5 {
			t.Fatalf("the parts' sums: %d, %v", len(req.PartSHA256), err)
		}
		// A client that declares no part sums gets no part URLs: it
		// streams through the controller.
		if up, ok, err := s.StartDirectUpload(ctx, "b1", "a1", req.Size, req.SHA256, nil, time.Minute); ok || err != nil || up.UploadID != "" {
			t.Fatalf("a multipart upload without part sums: %+v %v %v", up, ok, err)
		}
		if _, _, err := s.StartDirectUpload(ctx, "b1", "a1", req.Size, req.SHA256, req.PartSHA256[1:], time.Minute); err == nil {
			t.Fatal("a multipart upload with a part sum missing was signed")
		}
		up, ok, err := s.StartDirectUpload(ctx, "b1", "a1", req.Size, req.SHA256, req.PartSHA256, time.Minute)
		if err != nil || !ok || len(up.PartURLs) != 5 || len(up.PartHeaders) != 5 {
			t.Fatalf("multipart plan: %d parts, %d headers, %v %v", len(up.PartURLs), len(up.PartHeaders), ok, err)
		}
		// put gives the answer's status, 0 when the service hung up before
		// taking the whole body (a refusal too).
		put := func(i int, body []byte, headers map[string]string) int {
			req, _ := http.NewRequest(http.MethodPut, up.PartURLs[i], bytes.NewReader(body))
			for k, v := range headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return 0
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		part := func(i int) []byte {
			off := int64(i) * up.PartSize
			return data[off : off+min(up.PartSize, int64(len(data))-off)]
		}
		last := len(up.PartURLs) - 1
		// A part URL is no way to store more, or other, than the plan says.
		if code := put(last, make([]byte, up.PartSize), up.PartHeaders[last]); code/100 == 2 {
			t.Fatalf("a full part's bytes to the short last part's URL: %d", code)
		}
		if code := put(0, append(slices.Clone(part(0)), 0), up.PartHeaders[0]); code/100 == 2 {
			t.Fatalf("one byte more than the part: %d", code)
		}
		other := slices.Clone(part(1))
		other[len(other)/2] ^= 1
		if code := put(1, other, up.PartHeaders[1]); code/100 == 2 {
			t.Fatalf("other bytes of the part's length: %d", code)
		}
		if code := put(1, other, nil); code/100 == 2 {
			t.Fatalf("other bytes of the part's length, without its checksum header: %d", code)
		}
		if code := put(1, part(2), up.PartHeaders[2]); code/100 == 2 {
			t.Fatalf("another part's bytes and header: %d", code)
		}
		for i := range up.PartURLs {
			if code := put(i, part(i), up.PartHeaders[i]); code != http.StatusOK {
				t.Fatalf("part %d of the plan: %d", i+1, code)
			}
		}
		if err := s.FinishDirectUpload(ctx, up.UploadRef, req.Size, req.SHA256); err != nil {
			t.Fatalf("the planned parts: %v", err)
		}
		if got := read(t, b, up.Key); !bytes.Equal(got, data) {
			t.Fatalf("assembled: %d bytes, want %d", len(got), len(data))
		}
	}},
	{"replicas starting together on an empty store agree on one key", func(t *testing.T, b blobs.Backend) {
		const n = 6
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			s, _ := blobs.New(b, bytes.Repeat([]byte{byte(i + 1)}, 32))
			wg.Go(func() { errs[i] = s.CheckSealKey(ctx) })
		}
		wg.Wait()
		ok := 0
		for i, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, blobs.ErrKeyMismatch):
				t.Fatalf("replica %d: %v", i, err)
			}
		}
		if ok != 1 {
			t.Fatalf("%d of %d replicas with different keys started (errors %v)", ok, n, errs)
		}
	}},
	{"replicas sharing the store must share the certificate key", func(t *testing.T, b blobs.Backend) {
		one, _ := blobs.New(b, bytes.Repeat([]byte{1}, 32))
		again, _ := blobs.New(b, bytes.Repeat([]byte{1}, 32))
		other, _ := blobs.New(b, bytes.Repeat([]byte{2}, 32))
		if err := one.CheckSealKey(ctx); err != nil {
			t.Fatalf("first start: %v", err)
		}
		if err := again.CheckSealKey(ctx); err != nil {
			t.Fatalf("same key: %v", err)
		}
		if err := other.CheckSealKey(ctx); !errors.Is(err, blobs.ErrKeyMismatch) {
			t.Fatalf("another key: %v", err)
		}
	}},
	{"the build store on top: sealing, checksums, removal", func(t *testing.T, b blobs.Backend) {
		s, err := blobs.New(b, bytes.Repeat([]byte{7}, 32))
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.Create(ctx, "b1", blobs.Source)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Fill(strings.NewReader("project"), 100); err != nil {
			t.Fatal(err)
		}
		if err := p.Verify(sum("other")); !errors.Is(err, blobs.ErrChecksum) {
			t.Fatalf("verify: %v", err)
		}
		if err := p.Verify(sum("project")); err != nil {
			t.Fatal(err)
		}
		if err := p.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		big, _ := s.Create(ctx, "b1", blobs.Artifact("a1", "big.bin"))
		if err := big.Fill(bytes.NewReader(make([]byte, 101)), 100); !errors.Is(err, blobs.ErrTooLarge) {
			t.Fatalf("over the limit: %v", err)
		}
		big.Abort()
		sealed, err := s.PrepareSeal(ctx, "b1", blobs.Credentials, []byte("secret"))
		if err != nil {
			t.Fatal(err)
		}
		if err := sealed.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if raw := read(t, b, "builds/b1/"+blobs.CredentialsFile); bytes.Contains(raw, []byte("secret")) {
			t.Fatal("sealed file holds the plaintext")
		}
		if got, err := s.Unseal(ctx, "b1", blobs.Credentials); err != nil || string(got) != "secret" {
			t.Fatalf("unseal: %q %v", got, err)
		}
		if _, err := s.Unseal(ctx, "b1", blobs.Certs); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("unseal missing: %v", err)
		}
		// A retry's copies: the sealed copy opens under the new id only.
		cp, err := s.CopySource(ctx, "b1", "b2")
		if err != nil {
			t.Fatal(err)
		}
		if err := cp.Commit(ctx); err != nil || cp.SHA256() != sum("project") {
			t.Fatalf("copy source: %v", err)
		}
		cs, err := s.CopySealed(ctx, "b1", "b2", blobs.Credentials)
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Unseal(ctx, "b2", blobs.Credentials); err != nil || string(got) != "secret" {
			t.Fatalf("unseal copy: %q %v", got, err)
		}
		if err := s.RemoveSecrets(ctx, "b1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Unseal(ctx, "b1", blobs.Credentials); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("after RemoveSecrets: %v", err)
		}
		if err := s.RemoveBuild(ctx, "b2"); err != nil {
			t.Fatal(err)
		}
		if got := list(t, b, ""); !slices.Equal(got, []string{"builds/b1/source"}) {
			t.Fatalf("after removing b2 and b1's secrets: %v", got)
		}
		obj, info, err := s.Open(ctx, "b1", blobs.Source)
		if err != nil || info.Size != 7 {
			t.Fatalf("open: %+v %v", info, err)
		}
		obj.Close()
	}},
}

var ctx = context.Background()

// TestBackendContract runs every behaviour on both stores.
func TestBackendContract(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			for _, bh := range behaviours {
				t.Run(bh.name, func(t *testing.T) { bh.run(t, be.open(t)) })
			}
		})
	}
}

func create(t *testing.T, b blobs.Backend, key string) blobs.Writer {
	t.Helper()
	w, err := b.Create(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func write(t *testing.T, w blobs.Writer, p []byte) {
	t.Helper()
	if _, err := w.Write(p); err != nil {
		t.Fatal(err)
	}
}

func put(t *testing.T, b blobs.Backend, key string, data []byte) {
	t.Helper()
	w := create(t, b, key)
	write(t, w, data)
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, b blobs.Backend, key string) []byte {
	t.Helper()
	obj, info, err := b.Open(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil || int64(len(data)) != info.Size {
		t.Fatalf("read %s: %d of %d bytes: %v", key, len(data), info.Size, err)
	}
	return data
}

func list(t *testing.T, b blobs.Backend, prefix string) []string {
	t.Helper()
	var keys []string
	for info, err := range b.List(ctx, prefix) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, info.Key)
	}
	slices.Sort(keys)
	return keys
}

func random(t *testing.T, n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
