package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs/s3blobs/s3test"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/store"
)

// vmSession is a claimed build's VM: its client and token.
type vmSession struct {
	e     *env
	w     *workerSession
	job   *api.Job
	vm    *api.Client
	token string
}

// runVM submits a build of platform, claims it and authenticates its VM.
func (e *env) runVM(platform string) *vmSession {
	e.t.Helper()
	w := e.register("w-"+platform, api.Capabilities{Platforms: []string{platform}, MaxConcurrentBuilds: 4})
	sub, _ := e.submit(platform)
	job, token := e.startVM(w, sub.ID)
	return &vmSession{e: e, w: w, job: job, vm: &api.Client{BaseURL: e.URL}, token: token}
}

func (v *vmSession) upload(name string, body []byte) (api.Artifact, error) {
	return v.vm.UploadArtifact(context.Background(), v.job.ID, v.token, name, bytes.NewReader(body), "")
}

// uploadDirect PUTs body straight to the bucket and records it, as the VM does with an S3 store.
func (v *vmSession) uploadDirect(name string, body []byte) (api.Artifact, error) {
	ctx := context.Background()
	sum := sha256.Sum256(body)
	up, err := v.vm.StartArtifactUpload(ctx, v.job.ID, v.token, api.DirectUploadRequest{Name: name, Size: int64(len(body)), SHA256: hex.EncodeToString(sum[:])})
	if err != nil {
		return api.Artifact{}, err
	}
	if !up.Direct {
		v.e.t.Fatal("the S3 store offered no direct upload")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, up.URL, bytes.NewReader(body))
	if err != nil {
		v.e.t.Fatal(err)
	}
	for k, val := range up.Headers {
		req.Header.Set(k, val)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		v.e.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		v.e.t.Fatalf("PUT to the bucket: %d", resp.StatusCode)
	}
	return v.vm.CompleteArtifactUpload(ctx, v.job.ID, v.token, up.Ticket)
}

func (v *vmSession) complete() {
	v.e.t.Helper()
	if res, err := v.w.complete(v.job, api.Result{Success: true}); err != nil || res.Status != api.StatusCompleted {
		v.e.t.Fatalf("complete: %+v %v", res, err)
	}
}

// installPage fetches a completed build's install page through its signed link.
func (e *env) installPage(id string) string {
	e.t.Helper()
	b := e.build(id)
	if b.InstallURL == nil {
		e.t.Fatalf("build %s has no install_url", id)
	}
	resp, page := get(e.t, *b.InstallURL)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("install page: %d %s", resp.StatusCode, page)
	}
	return string(page)
}

// manifestOf fetches the manifest the install page's itms-services link names.
func manifestOf(t *testing.T, page string) (int, string) {
	t.Helper()
	for _, h := range hrefs([]byte(page)) {
		if p, err := url.Parse(h); err == nil && p.Scheme == "itms-services" {
			resp, body := get(t, p.Query().Get("url"))
			return resp.StatusCode, string(body)
		}
	}
	t.Fatalf("no itms-services link on the page:\n%s", page)
	return 0, ""
}

// The IPA's Info.plist is read once, when the artifact is recorded: the
// manifest is served from the artifact's row even once the file is gone.
func TestIPAManifestReadAtUpload(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sub := e.completeWith("ios", "Demo.ipa", ipa(t))
	var stored []string
	filepath.WalkDir(e.dataDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, "artifact-Demo.ipa") {
			stored = append(stored, p)
		}
		return nil
	})
	if len(stored) != 1 {
		t.Fatalf("stored IPA files: %v", stored)
	}
	// Were the manifest read per request, it would now fail.
	if err := os.WriteFile(stored[0], []byte("not a zip any more"), 0o600); err != nil {
		t.Fatal(err)
	}
	page := e.installPage(sub.ID)
	status, manifest := manifestOf(t, page)
	if status != http.StatusOK || !strings.Contains(manifest, "<string>com.example.demo</string>") || !strings.Contains(manifest, "<string>Demo &amp; Co</string>") {
		t.Fatalf("manifest: %d\n%s", status, manifest)
	}
}

// An IPA whose Info.plist cannot be read is still the build's artifact;
// its install page says why it cannot be installed, and the manifest
// answers 409 with the same reason.
func TestUnreadableIPAIsStoredAndExplained(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	junk := []byte("this is not a zip archive")
	sub := e.completeWith("ios", "Broken.ipa", junk)
	b := e.build(sub.ID)
	if len(b.Artifacts) != 1 || b.Artifacts[0].Name != "Broken.ipa" || b.Artifacts[0].Size != int64(len(junk)) {
		t.Fatalf("artifacts: %+v", b.Artifacts)
	}
	page := e.installPage(sub.ID)
	if strings.Contains(page, "itms-services") || !strings.Contains(page, `id="unavailable"`) || !strings.Contains(html.UnescapeString(page), "Broken.ipa cannot be installed over the air: read the IPA:") {
		t.Fatalf("the page of an unreadable IPA:\n%s", page)
	}
	if !strings.Contains(page, "/files/Broken.ipa?") {
		t.Fatalf("the page does not list the file for download:\n%s", page)
	}
	m := regexp.MustCompile(`^(.*)/install/([^?]+)\?`).FindStringSubmatch(*b.InstallURL)
	q := e.links.Query(sub.ID, "manifest", b.InstallURLExpiresAt.Truncate(1))
	resp, body := get(t, m[1]+"/install/"+sub.ID+"/manifest.plist?"+q.Encode())
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "read the IPA") {
		t.Fatalf("manifest of an unreadable IPA: %d %s", resp.StatusCode, body)
	}
}

// An attempt uploads at most --max-artifacts-per-build artifacts, streamed
// or direct; the next is refused with 413 naming the setting, and a name
// uploaded again replaces its file without counting twice.
func TestArtifactsPerBuildCapped(t *testing.T) {
	t.Parallel()
	capAt2 := func(_ *store.Config, l *httpapi.Limits) { l.ArtifactsPerBuild = 2 }
	bucket := s3test.NewBucket(t)
	for name, e := range map[string]*env{"streamed": newEnv(t, capAt2), "direct": newEnvOn(t, &bucket, capAt2)} {
		v := e.runVM("android")
		up := v.upload
		if name == "direct" {
			up = v.uploadDirect
		}
		for i, n := range []string{"a.apk", "b.aab", "a.apk"} {
			if _, err := up(n, []byte(fmt.Sprint("artifact ", i))); err != nil {
				t.Fatalf("%s: upload %d (%s): %v", name, i, n, err)
			}
		}
		_, err := up("c.txt", []byte("one too many"))
		if api.StatusOf(err) != http.StatusRequestEntityTooLarge || !strings.Contains(err.Error(), "--max-artifacts-per-build") {
			t.Fatalf("%s: the third artifact: %v", name, err)
		}
		v.complete()
		b := e.build(v.job.ID)
		if len(b.Artifacts) != 2 || b.Artifacts[0].Name != "a.apk" || b.Artifacts[0].Size != int64(len("artifact 2")) {
			t.Fatalf("%s: artifacts %+v", name, b.Artifacts)
		}
	}
}

// An attempt opens at most --max-direct-uploads-per-attempt direct
// uploads, finished or not: the next start is refused with 413 naming the
// setting and signs nothing, so a VM cannot fill the bucket with unfinished
// uploads; the next attempt has its own count.
func TestDirectUploadsPerAttemptCapped(t *testing.T) {
	t.Parallel()
	bucket := s3test.NewBucket(t)
	e := newEnvOn(t, &bucket, func(_ *store.Config, l *httpapi.Limits) { l.DirectUploadsPerAttempt = 3 })
	v := e.runVM("android")
	ctx := context.Background()
	start := func(v *vmSession) (api.DirectUpload, error) {
		body := []byte("never sent")
		sum := sha256.Sum256(body)
		return v.vm.StartArtifactUpload(ctx, v.job.ID, v.token, api.DirectUploadRequest{Name: "app.apk", Size: int64(len(body)), SHA256: hex.EncodeToString(sum[:])})
	}
	for i := range 2 {
		if up, err := start(v); err != nil || !up.Direct {
			t.Fatalf("start %d: %+v %v", i+1, up, err)
		}
	}
	if _, err := v.uploadDirect("a.apk", []byte("a finished one counts too")); err != nil {
		t.Fatal(err)
	}
	up, err := start(v)
	if api.StatusOf(err) != http.StatusRequestEntityTooLarge || !strings.Contains(err.Error(), "--max-direct-uploads-per-attempt") || !strings.Contains(err.Error(), "3 direct uploads") {
		t.Fatalf("the fourth start: %+v %v, want 413 naming the limit", up, err)
	}
	v.complete()
	if _, err := start(v); api.StatusOf(err) != http.StatusConflict && api.StatusOf(err) != http.StatusUnauthorized {
		t.Fatalf("a start after the attempt ended: %v", err)
	}
	// Another build's attempt counts its own.
	if up, err := start(e.runVM("android")); err != nil || !up.Direct {
		t.Fatalf("another attempt: %+v %v", up, err)
	}
}

// With an S3 store the VM's direct upload of an IPA is read once too.
func TestIPAManifestReadAtDirectUpload(t *testing.T) {
	t.Parallel()
	bucket := s3test.NewBucket(t)
	e := newEnvOn(t, &bucket)
	v := e.runVM("ios")
	if _, err := v.uploadDirect("Demo.ipa", ipa(t)); err != nil {
		t.Fatal(err)
	}
	v.complete()
	status, manifest := manifestOf(t, e.installPage(v.job.ID))
	if status != http.StatusOK || !strings.Contains(manifest, "<string>com.example.demo</string>") {
		t.Fatalf("manifest: %d\n%s", status, manifest)
	}
}

// Without --public-url, links are built from the request only when it came
// straight to the controller; through a proxy the link endpoints answer 409
// naming --public-url, and the build shows no install_url.
func TestInstallLinksBehindProxy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sub := e.completeWith("ios", "Demo.ipa", ipa(t))
	direct := e.build(sub.ID)
	if direct.InstallURL == nil {
		t.Fatal("a request straight to the controller got no install_url")
	}
	ctx := context.Background()
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		req, _ := e.admin.NewRequest(ctx, http.MethodGet, "/api/builds/"+sub.ID, nil, nil)
		req.Header.Set(h, "for=203.0.113.7")
		resp, err := e.admin.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || strings.Contains(string(body), "install_url") {
			t.Fatalf("%s: GET build through a proxy: %d %s", h, resp.StatusCode, body)
		}
		resp2, qr := get(t, e.URL+"/api/builds/"+sub.ID+"/qr.png", api.HeaderAPIKey, e.devKey, h, "proxy.internal")
		if resp2.StatusCode != http.StatusConflict || !strings.Contains(string(qr), "--public-url") {
			t.Fatalf("%s: qr.png through a proxy: %d %s", h, resp2.StatusCode, qr)
		}
		for _, u := range []string{*direct.InstallURL, strings.Replace(*direct.InstallURL, "/install/"+sub.ID+"?", "/install/"+sub.ID+"/manifest.plist?", 1)} {
			resp, body := get(t, u, h, "proxy.internal")
			if !strings.Contains(u, "manifest") {
				if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "--public-url") {
					t.Fatalf("%s: install page through a proxy: %d %s", h, resp.StatusCode, body)
				}
			}
		}
	}
	// The page's own links, straight to the controller, still work.
	if status, _ := manifestOf(t, e.installPage(sub.ID)); status != http.StatusOK {
		t.Fatalf("manifest straight to the controller: %d", status)
	}
}
