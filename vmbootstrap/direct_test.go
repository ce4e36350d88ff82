package vmbootstrap

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs/s3blobs/s3test"
	"github.com/freeagent-build/freeagent/controller/controllertest"
)

// TestUploadArtifactDirect: with an S3 store the VM PUTs its artifact
// straight to the bucket and the controller only records it; when the VM
// cannot reach the bucket it sends the file through the controller.
func TestUploadArtifactDirect(t *testing.T) {
	bucket := s3test.NewBucket(t)
	c := startControllerOn(t, controllertest.S3(bucket, ""))
	ctx := context.Background()
	data := make([]byte, 1<<20+5)
	rand.Read(data)
	sum := sha256.Sum256(data)
	path := filepath.Join(t.TempDir(), "app-release.apk")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	bucketHost := strings.TrimPrefix(bucket.Endpoint, "http://")

	for _, reachable := range []bool{true, false} {
		j := c.startJob("android", tarGz(t, tarEntry{name: "package.json", body: "{}"}), nil)
		var mu sync.Mutex
		var toBucket []string // methods of the requests the VM sent to the bucket
		client := &api.Client{BaseURL: c.URL, HTTP: &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			if r.URL.Host == bucketHost {
				mu.Lock()
				toBucket = append(toBucket, r.Method)
				mu.Unlock()
				if !reachable {
					return nil, errors.New("dial tcp: no route to host")
				}
			}
			return http.DefaultTransport.RoundTrip(r)
		})}}
		art, err := uploadArtifact(ctx, client, j.job.ID, c.vmToken(j.job), path, 30*time.Second, nil)
		if err != nil {
			t.Fatalf("reachable %v: %v", reachable, err)
		}
		if art.SHA256 != hex.EncodeToString(sum[:]) || art.Size != int64(len(data)) || art.Name != "app-release.apk" {
			t.Fatalf("reachable %v: recorded %+v", reachable, art)
		}
		if !slices.Equal(toBucket, []string{"PUT"}) {
			t.Fatalf("reachable %v: requests to the bucket: %v", reachable, toBucket)
		}
		keys := bucket.Keys(t)
		if !slices.Contains(keys, "builds/"+j.job.ID+"/attempts/"+j.job.AttemptID+"/artifact-app-release.apk") || slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, "uploads/") }) {
			t.Fatalf("reachable %v: bucket holds %v", reachable, keys)
		}
	}
}

// TestDirectUploadProtocol: the controller's side of a direct upload
// refuses what it did not sign, and a repeated completion gets the first
// answer.
func TestDirectUploadProtocol(t *testing.T) {
	bucket := s3test.NewBucket(t)
	c := startControllerOn(t, controllertest.S3(bucket, "p"))
	ctx := context.Background()
	j := c.startJob("android", tarGz(t, tarEntry{name: "package.json", body: "{}"}), nil)
	vm := c.vmToken(j.job)
	client := &api.Client{BaseURL: c.URL}
	data := []byte("an apk")
	sum := sha256.Sum256(data)
	req := api.DirectUploadRequest{Name: "app.apk", Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	for _, bad := range []api.DirectUploadRequest{
		{Name: "../app.apk", Size: req.Size, SHA256: req.SHA256},
		{Name: "app.apk", Size: -1, SHA256: req.SHA256},
		{Name: "app.apk", Size: req.Size, SHA256: "abc"},
	} {
		if _, err := client.StartArtifactUpload(ctx, j.job.ID, vm, bad); api.StatusOf(err) != http.StatusBadRequest {
			t.Fatalf("start %+v: %v", bad, err)
		}
	}
	if _, err := client.StartArtifactUpload(ctx, j.job.ID, "not-the-vm", req); api.StatusOf(err) != http.StatusUnauthorized {
		t.Fatalf("start without the VM token: %v", err)
	}
	up, err := client.StartArtifactUpload(ctx, j.job.ID, vm, req)
	if err != nil || !up.Direct || up.Ticket == "" || time.Until(up.ExpiresAt) < 20*time.Minute {
		t.Fatalf("start: %+v %v", up, err)
	}
	if _, err := client.CompleteArtifactUpload(ctx, j.job.ID, vm, up.Ticket); api.StatusOf(err) != http.StatusConflict {
		t.Fatalf("complete before the PUT: %v", err)
	}
	forged := []byte(up.Ticket)
	forged[len(forged)/2] ^= 1
	if _, err := client.CompleteArtifactUpload(ctx, j.job.ID, vm, string(forged)); api.StatusOf(err) != http.StatusForbidden {
		t.Fatalf("complete with a changed ticket: %v", err)
	}
	put := func(body string) int {
		r, _ := http.NewRequest("PUT", up.URL, strings.NewReader(body))
		for k, v := range up.Headers {
			r.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := put("an apq"); code != http.StatusBadRequest {
		t.Fatalf("PUT of other bytes: %d", code)
	}
	if code := put(string(data)); code != http.StatusOK {
		t.Fatalf("PUT: %d", code)
	}
	first, err := client.CompleteArtifactUpload(ctx, j.job.ID, vm, up.Ticket)
	if err != nil || first.SHA256 != req.SHA256 {
		t.Fatalf("complete: %+v %v", first, err)
	}
	if again, err := client.CompleteArtifactUpload(ctx, j.job.ID, vm, up.Ticket); err != nil || again.SHA256 != first.SHA256 || again.Name != first.Name {
		t.Fatalf("a repeated completion: %+v %v", again, err)
	}
	// A ticket is bound to its build: another build's VM cannot use it.
	j2 := c.startJob("android", tarGz(t, tarEntry{name: "package.json", body: "{}"}), nil)
	if _, err := client.CompleteArtifactUpload(ctx, j2.job.ID, c.vmToken(j2.job), up.Ticket); api.StatusOf(err) != http.StatusForbidden {
		t.Fatalf("another build's ticket: %v", err)
	}
	// p/keys/ holds the seal-key check the controller writes at start.
	keys := slices.DeleteFunc(bucket.Keys(t), func(k string) bool { return strings.HasPrefix(k, "p/keys/") })
	want := []string{"p/builds/" + j.job.ID + "/attempts/" + j.job.AttemptID + "/artifact-app.apk", "p/builds/" + j.job.ID + "/source", "p/builds/" + j2.job.ID + "/source"}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Fatalf("bucket holds %v, want %v", keys, want)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestUploadLargeArtifactInParts: an artifact over the multipart threshold
// goes to the bucket in parts (a part whose connection fails is sent
// again on its own), and the controller records it with the SHA-256 the
// store computed. Parts of other bytes or sizes are refused by the store
// itself (each part URL signs its length and its declared SHA-256), the
// upload is then refused at completion, and nothing of it stays in the
// bucket. A declaration without part sums gets no part URLs.
func TestUploadLargeArtifactInParts(t *testing.T) {
	bucket := s3test.NewBucket(t)
	c := startControllerOn(t, controllertest.S3(bucket, ""))
	ctx := context.Background()
	data := make([]byte, api.MultipartThreshold+3)
	rand.Read(data)
	sum := sha256.Sum256(data)
	path := filepath.Join(t.TempDir(), "app.ipa")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	bucketHost := strings.TrimPrefix(bucket.Endpoint, "http://")
	j := c.startJob("ios", tarGz(t, tarEntry{name: "package.json", body: "{}"}), nil)
	var mu sync.Mutex
	var parts []string // part numbers PUT to the bucket, in order of sending
	failed := false
	client := &api.Client{BaseURL: c.URL, HTTP: &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		if r.URL.Host == bucketHost && r.Method == http.MethodPut {
			mu.Lock()
			n := r.URL.Query().Get("partNumber")
			parts = append(parts, n)
			fail := n == "3" && !failed
			failed = failed || fail
			mu.Unlock()
			if fail {
				return nil, errors.New("connection reset by peer")
			}
		}
		return http.DefaultTransport.RoundTrip(r)
	})}}
	vm := c.vmToken(j.job)
	art, err := uploadArtifact(ctx, client, j.job.ID, vm, path, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if art.SHA256 != hex.EncodeToString(sum[:]) || art.Size != int64(len(data)) {
		t.Fatalf("recorded %+v", art)
	}
	slices.Sort(parts)
	if !slices.Equal(parts, []string{"1", "2", "3", "3", "4", "5"}) {
		t.Fatalf("parts sent: %v", parts)
	}
	noStaging := func(what string) {
		t.Helper()
		for _, k := range bucket.Keys(t) {
			if strings.HasPrefix(k, "uploads/") {
				t.Fatalf("%s: staging object %s left", what, k)
			}
		}
		for u := range bucket.Client(t).ListIncompleteUploads(ctx, bucket.Name, "", true) {
			t.Fatalf("%s: incomplete upload %s left (%v)", what, u.Key, u.Err)
		}
	}
	noStaging("after the upload")

	// Refusals, with the parts sent by hand.
	plain := &api.Client{BaseURL: c.URL}
	decl, err := declareFile(path)
	if err != nil || len(decl.PartSHA256) != 5 || decl.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("declared %d part sums, sha256 %s: %v", len(decl.PartSHA256), decl.SHA256, err)
	}
	decl.Name = "other.ipa"
	// A freeagent-vm that predates part sums is sent through the
	// controller: no part URL is signed for undeclared bytes.
	if up, err := plain.StartArtifactUpload(ctx, j.job.ID, vm, api.DirectUploadRequest{Name: decl.Name, Size: decl.Size, SHA256: decl.SHA256}); err != nil || up.Direct || len(up.Parts) != 0 {
		t.Fatalf("a declaration without part sums: %+v %v", up, err)
	}
	for _, tc := range []struct {
		name    string
		refused int // the part the store refuses, -1: none
		change  func(part int, b []byte, h map[string]string) ([]byte, map[string]string)
	}{
		{"a changed byte", 2, func(part int, b []byte, h map[string]string) ([]byte, map[string]string) {
			if part == 2 {
				b = slices.Clone(b)
				b[7] ^= 1
			}
			return b, h
		}},
		{"a changed byte without the part's checksum header", 1, func(part int, b []byte, h map[string]string) ([]byte, map[string]string) {
			if part == 1 {
				b = slices.Clone(b)
				b[7] ^= 1
				h = nil
			}
			return b, h
		}},
		{"a short last part", 4, func(part int, b []byte, h map[string]string) ([]byte, map[string]string) {
			if part == 4 {
				return b[:len(b)-1], h
			}
			return b, h
		}},
	} {
		up, err := plain.StartArtifactUpload(ctx, j.job.ID, vm, decl)
		if err != nil || len(up.Parts) != 5 || len(up.PartHeaders) != 5 {
			t.Fatalf("%s: start: %+v %v", tc.name, up, err)
		}
		for i, u := range up.Parts {
			body, headers := tc.change(i, data[int64(i)*up.PartSize:min(int64(i+1)*up.PartSize, int64(len(data)))], up.PartHeaders[i])
			req, _ := http.NewRequest(http.MethodPut, u, bytes.NewReader(body))
			for k, v := range headers {
				req.Header.Set(k, v)
			}
			// The store may refuse before it has read the body (a signature
			// that does not hold): it answers and hangs up while the part is
			// still being sent, and the client sees the connection reset.
			resp, err := http.DefaultClient.Do(req)
			status := "hung up: " + fmt.Sprint(err)
			refused := err != nil
			if err == nil {
				resp.Body.Close()
				status, refused = resp.Status, resp.StatusCode/100 == 4
			}
			if refused != (i == tc.refused) || (!refused && resp.StatusCode != http.StatusOK) {
				t.Fatalf("%s: part %d: %s, want the store to refuse part %d", tc.name, i+1, status, tc.refused+1)
			}
		}
		if _, err := plain.CompleteArtifactUpload(ctx, j.job.ID, vm, up.Ticket); api.StatusOf(err) != http.StatusUnprocessableEntity {
			t.Fatalf("%s: complete: %v", tc.name, err)
		}
		noStaging(tc.name)
	}
	if _, err := c.store.AttemptArtifact(ctx, j.job.ID, j.job.AttemptID, "other.ipa"); err == nil {
		t.Fatal("a refused upload was recorded")
	}
	if a, err := c.store.AttemptArtifact(ctx, j.job.ID, j.job.AttemptID, "app.ipa"); err != nil || a.SHA256 != art.SHA256 {
		t.Fatalf("the artifact: %+v %v", a, err)
	}
}

// TestUploadArtifactStreamed: on the file store the VM streams its
// artifact through the controller as a raw PUT, and to a controller that
// predates that (404 for the PUT) as the multipart POST.
func TestUploadArtifactStreamed(t *testing.T) {
	c := startController(t)
	ctx := context.Background()
	data := make([]byte, 3<<20+1)
	rand.Read(data)
	sum := sha256.Sum256(data)
	path := filepath.Join(t.TempDir(), "app-release.apk")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, old := range []bool{false, true} {
		j := c.startJob("android", tarGz(t, tarEntry{name: "package.json", body: "{}"}), nil)
		var mu sync.Mutex
		var sent []string // method and the last path element of each artifact request
		client := &api.Client{BaseURL: c.URL, HTTP: &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			if strings.Contains(r.URL.Path, "/artifacts") {
				mu.Lock()
				sent = append(sent, r.Method+" "+filepath.Base(r.URL.Path))
				mu.Unlock()
				if old && r.Method == http.MethodPut {
					return &http.Response{StatusCode: http.StatusNotFound, Header: http.Header{"Content-Type": {"application/json"}},
						Body: io.NopCloser(strings.NewReader(`{"error":"no such endpoint","code":"not_found"}`)), Request: r}, nil
				}
			}
			return http.DefaultTransport.RoundTrip(r)
		})}}
		art, err := uploadArtifact(ctx, client, j.job.ID, c.vmToken(j.job), path, 30*time.Second, nil)
		if err != nil {
			t.Fatalf("old %v: %v", old, err)
		}
		if art.SHA256 != hex.EncodeToString(sum[:]) || art.Size != int64(len(data)) {
			t.Fatalf("old %v: recorded %+v", old, art)
		}
		want := []string{"POST direct", "PUT app-release.apk"}
		if old {
			want = append(want, "POST artifacts")
		}
		if !slices.Equal(sent, want) {
			t.Fatalf("old %v: requests %v, want %v", old, sent, want)
		}
	}
}

// An artifact the build's user replaced with a link (to a file only this
// process may read) is refused, not followed, whichever way it would go up.
func TestUploadArtifactRefusesALink(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "vm-token")
	if err := os.WriteFile(secret, []byte("fa_vm_secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "app-release.apk")
	if err := os.Symlink(secret, path); err != nil {
		t.Fatal(err)
	}
	client := &api.Client{BaseURL: "http://127.0.0.1:1", HTTP: &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		t.Errorf("a request went out: %s %s", r.Method, r.URL)
		return nil, errors.New("no request expected")
	})}}
	_, err := uploadArtifact(context.Background(), client, "b1", "vm", path, time.Second, nil)
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("a link as the artifact: %v", err)
	}
}
