package httpapi_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/store"
)

// The VM's raw artifact upload (PUT .../artifacts/{name}) records exactly
// the bytes whose SHA-256 it was told, and refuses a wrong checksum, a
// missing one, a body shorter than its Content-Length, a bad name and a
// file over the limit, recording nothing for any of them.
func TestPutArtifact(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(_ *store.Config, l *httpapi.Limits) { l.Artifact = 1 << 20 })
	ctx := context.Background()
	w := e.register("mac", api.Capabilities{})
	sub, _ := e.submit("android")
	job := w.poll(0)
	if _, err := w.heartbeat(job); err != nil {
		t.Fatal(err)
	}
	vm, token := e.vmSession(job)
	body := bytes.Repeat([]byte("apk!"), 100_000) // 400 kB: past Fill's first buffer
	put := func(name string, b []byte, headers map[string]string, length int64) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPut, e.URL+"/api/builds/"+sub.ID+"/artifacts/"+name, io.NopCloser(bytes.NewReader(b)))
		req.ContentLength = length
		req.Header.Set(api.HeaderVMToken, token)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			if length > int64(len(b)) {
				return 0 // the client notices the short body itself
			}
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	sum := map[string]string{api.HeaderChecksum: sha(body)}
	for _, c := range []struct {
		what    string
		name    string
		body    []byte
		headers map[string]string
		length  int64
		want    []int
	}{
		{"a wrong checksum", "a.apk", body, map[string]string{api.HeaderChecksum: sha([]byte("other"))}, int64(len(body)), []int{http.StatusUnprocessableEntity}},
		{"no checksum", "a.apk", body, nil, int64(len(body)), []int{http.StatusBadRequest}},
		{"a short body", "a.apk", body, sum, int64(len(body)) + 10, []int{0, http.StatusBadRequest}},
		{"a control character in the name", "a%01b.apk", body, sum, int64(len(body)), []int{http.StatusBadRequest}},
		{"over the limit", "a.apk", make([]byte, 1<<20+1), map[string]string{api.HeaderChecksum: sha(make([]byte, 1<<20+1))}, 1<<20 + 1, []int{http.StatusRequestEntityTooLarge}},
		{"over the limit, chunked", "a.apk", make([]byte, 1<<20+1), map[string]string{api.HeaderChecksum: sha(make([]byte, 1<<20+1))}, -1, []int{http.StatusRequestEntityTooLarge}},
	} {
		if got := put(c.name, c.body, c.headers, c.length); !slices.Contains(c.want, got) {
			t.Errorf("%s: %d, want one of %v", c.what, got, c.want)
		}
	}
	if _, err := e.store.AttemptArtifact(ctx, sub.ID, job.AttemptID, "a.apk"); err == nil {
		t.Fatal("a refused upload was recorded")
	}
	art, err := vm.PutArtifact(ctx, sub.ID, token, "a.apk", bytes.NewReader(body), int64(len(body)), sha(body))
	if err != nil || art.SHA256 != sha(body) || art.Size != int64(len(body)) {
		t.Fatalf("put: %+v %v", art, err)
	}
	if _, err := w.complete(job, api.Result{Success: true}); err != nil {
		t.Fatal(err)
	}
	resp, err := e.admin.DownloadArtifact(ctx, sub.ID, "a.apk", 0)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, body) {
		t.Fatalf("downloaded %d bytes, not the upload", len(got))
	}
}
