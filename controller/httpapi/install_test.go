package httpapi_test

import (
	"archive/zip"
	"bytes"
	"context"
	"html"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/install"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

// completeWith runs a build of platform to completion with one artifact,
// uploaded by its VM as a real worker would.
func (e *env) completeWith(platform, name string, body []byte) api.SubmitResponse {
	e.t.Helper()
	ctx := context.Background()
	w := e.register("w-"+platform, api.Capabilities{Platforms: []string{platform}, MaxConcurrentBuilds: 1})
	sub, _ := e.submit(platform)
	job := w.poll(0)
	if job == nil || job.ID != sub.ID {
		e.t.Fatalf("claim: %+v", job)
	}
	if _, err := w.heartbeat(job); err != nil {
		e.t.Fatal(err)
	}
	vm := &api.Client{BaseURL: e.URL}
	auth, err := vm.VMAuth(ctx, sub.ID, job.OTP)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := vm.UploadArtifact(ctx, sub.ID, auth.VMToken, name, bytes.NewReader(body), ""); err != nil {
		e.t.Fatal(err)
	}
	if res, err := w.complete(job, api.Result{Success: true}); err != nil || res.Status != api.StatusCompleted {
		e.t.Fatalf("complete: %+v %v", res, err)
	}
	return sub
}

// get fetches u with no credentials at all, as a phone's browser would.
func get(t *testing.T, u string, h ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(h); i += 2 {
		req.Header.Set(h[i], h[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

var hrefRE = regexp.MustCompile(`href="([^"]+)"`)

func hrefs(page []byte) []string {
	var out []string
	for _, m := range hrefRE.FindAllSubmatch(page, -1) {
		out = append(out, html.UnescapeString(string(m[1])))
	}
	return out
}

// tamper returns u with one query parameter replaced.
func tamper(t *testing.T, u, param, value string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := p.Query()
	q.Set(param, value)
	p.RawQuery = q.Encode()
	return p.String()
}

func TestInstallLinksAndroid(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	apk := bytes.Repeat([]byte("APK:"), 10000)
	sub := e.completeWith("android", "app-release.apk", apk)

	b := e.build(sub.ID)
	if b.InstallURL == nil || b.InstallURLExpiresAt == nil {
		t.Fatalf("a completed build has no install_url: %+v", b)
	}
	if d := time.Until(*b.InstallURLExpiresAt); d < install.DefaultTTL-time.Hour || d > install.DefaultTTL {
		t.Fatalf("install link lifetime %v, want 7 days", d)
	}
	if !strings.HasPrefix(*b.InstallURL, e.URL+"/install/"+sub.ID+"?") {
		t.Fatalf("install_url %q is not this controller's install page", *b.InstallURL)
	}
	if again := e.build(sub.ID); again.InstallURL == nil || *again.InstallURL != *b.InstallURL {
		t.Fatal("asking again gave another link (the QR code would change on every look)")
	}

	// The page and the download work without any header.
	resp, page := get(t, *b.InstallURL)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("install page: %d %s", resp.StatusCode, page)
	}
	if resp.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatal("the install page lets its signed URL leak through Referer")
	}
	var download string
	for _, h := range hrefs(page) {
		if strings.Contains(h, "/files/app-release.apk?") {
			download = h
		}
	}
	if download == "" {
		t.Fatalf("no download link for the APK on the page:\n%s", page)
	}
	resp, got := get(t, download)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, apk) || resp.Header.Get("Content-Type") != "application/vnd.android.package-archive" {
		t.Fatalf("download: %d %s, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(got))
	}
	resp, got = get(t, download, "Range", "bytes=100-199")
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(got, apk[100:200]) {
		t.Fatalf("ranged download: %d, %d bytes", resp.StatusCode, len(got))
	}

	// Altered, moved or expired links are refused.
	sig := url.Values{}
	if p, _ := url.Parse(*b.InstallURL); p != nil {
		sig = p.Query()
	}
	flipped := []byte(sig.Get("sig"))
	flipped[0] ^= 1
	other := e.completeWith("android", "other.apk", []byte("other"))
	expired := e.links.Query(sub.ID, install.Page, time.Now().Add(-time.Second))
	for name, u := range map[string]string{
		"altered signature":              tamper(t, *b.InstallURL, "sig", string(flipped)),
		"extended expiry":                tamper(t, *b.InstallURL, "exp", "99999999999"),
		"no signature":                   e.URL + "/install/" + sub.ID,
		"another build's page":           strings.Replace(*b.InstallURL, sub.ID, other.ID, 1),
		"the page's signature on a file": e.URL + "/install/" + sub.ID + "/files/app-release.apk?" + sig.Encode(),
		"expired":                        e.URL + "/install/" + sub.ID + "?" + expired.Encode(),
	} {
		resp, body := get(t, u)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, resp.StatusCode)
		}
		if name == "expired" && !strings.Contains(string(body), "expired") {
			t.Errorf("an expired link's answer does not say so: %s", body)
		}
	}

	// The QR code decodes back to the install page link.
	owner := &api.Client{BaseURL: e.URL, BuildToken: sub.AccessToken}
	req, _ := owner.NewRequest(ctx, http.MethodGet, "/api/builds/"+sub.ID+"/qr.png", nil, nil)
	qr, err := owner.Do(req)
	if err != nil {
		t.Fatalf("qr.png with the build token: %v", err)
	}
	pngBytes, err := io.ReadAll(qr.Body)
	qr.Body.Close()
	if err != nil || qr.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("qr.png: %v, Content-Type %q", err, qr.Header.Get("Content-Type"))
	}
	if _, err := png.Decode(bytes.NewReader(pngBytes)); err != nil {
		t.Fatalf("qr.png is not a PNG: %v", err)
	}
	decoded := zbarDecode(t, pngBytes)
	if decoded != qr.Header.Get(api.HeaderInstallURL) || !strings.HasPrefix(decoded, e.URL+"/install/"+sub.ID+"?") {
		t.Fatalf("QR code holds %q", decoded)
	}
	if resp, _ := get(t, decoded); resp.StatusCode != http.StatusOK {
		t.Fatalf("the QR code's link: %d", resp.StatusCode)
	}

	// qr.png is guarded like the build's other endpoints.
	if resp, _ := get(t, e.URL+"/api/builds/"+sub.ID+"/qr.png"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("qr.png without credentials: %d", resp.StatusCode)
	}
	if resp, _ := get(t, e.URL+"/api/builds/"+sub.ID+"/qr.png", api.HeaderBuildToken, other.AccessToken); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("qr.png with another build's token: %d", resp.StatusCode)
	}
	if resp, _ := get(t, e.URL+"/api/builds/"+sub.ID+"/qr.png", api.HeaderAPIKey, e.devKey); resp.StatusCode != http.StatusOK {
		t.Fatalf("qr.png with a developer key: %d", resp.StatusCode)
	}

	// A build that has not completed has neither link nor QR code.
	pending, _ := e.submit("ios")
	if b := e.build(pending.ID); b.InstallURL != nil {
		t.Fatalf("a pending build has an install_url")
	}
	if resp, _ := get(t, e.URL+"/api/builds/"+pending.ID+"/qr.png", api.HeaderAPIKey, e.devKey); resp.StatusCode != http.StatusConflict {
		t.Fatalf("qr.png of a pending build: %d, want 409", resp.StatusCode)
	}
}

// ipa builds a minimal IPA: a zip holding Payload/<app>.app/Info.plist.
func ipa(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	f, _ := zw.Create("Payload/Demo.app/Info.plist")
	f.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0"><dict>
<key>CFBundleIdentifier</key><string>com.example.demo</string>
<key>CFBundleShortVersionString</key><string>1.2.3</string>
<key>CFBundleVersion</key><string>45</string>
<key>CFBundleDisplayName</key><string>Demo &amp; Co</string>
</dict></plist>`))
	f, _ = zw.Create("Payload/Demo.app/Demo")
	f.Write(bytes.Repeat([]byte{0xfe, 0xed}, 5000))
	zw.Close()
	return buf.Bytes()
}

func TestInstallLinksIOS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	app := ipa(t)
	sub := e.completeWith("ios", "Demo.ipa", app)
	b := e.build(sub.ID)
	if b.InstallURL == nil {
		t.Fatal("no install_url")
	}
	_, page := get(t, *b.InstallURL)
	var itms string
	for _, h := range hrefs(page) {
		if strings.HasPrefix(h, "itms-services://") {
			itms = h
		}
	}
	if itms == "" {
		t.Fatalf("no itms-services link on the iOS install page:\n%s", page)
	}
	p, err := url.Parse(itms)
	if err != nil || p.Query().Get("action") != "download-manifest" {
		t.Fatalf("itms-services link %q", itms)
	}
	resp, manifest := get(t, p.Query().Get("url"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("manifest: %d %s", resp.StatusCode, manifest)
	}
	for _, want := range []string{"<string>com.example.demo</string>", "<string>1.2.3</string>", "<string>Demo &amp; Co</string>", "software-package"} {
		if !bytes.Contains(manifest, []byte(want)) {
			t.Fatalf("manifest lacks %s:\n%s", want, manifest)
		}
	}
	m := regexp.MustCompile(`<string>(http[^<]+/files/Demo\.ipa\?[^<]+)</string>`).FindSubmatch(manifest)
	if m == nil {
		t.Fatalf("manifest has no IPA URL:\n%s", manifest)
	}
	resp, got := get(t, html.UnescapeString(string(m[1])))
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, app) {
		t.Fatalf("IPA download from the manifest: %d, %d bytes", resp.StatusCode, len(got))
	}
}

// zbarDecode reads the QR code in a PNG with ZBar's zbarimg (Debian:
// zbar-tools), a decoder independent of the encoder the controller uses.
func zbarDecode(t *testing.T, pngBytes []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "qr.png")
	if err := os.WriteFile(path, pngBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(testtool.Path(t, "zbarimg"), "--raw", "-q", path).Output()
	if err != nil {
		t.Fatalf("zbarimg found no QR code in qr.png: %v", err)
	}
	return strings.TrimSuffix(string(out), "\n")
}
