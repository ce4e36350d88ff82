package httpapi_test

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/controllertest"
)

func certsZip(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	zw.Close()
	return buf.Bytes()
}

// TestCertificatesSealedServedToTheVMAndDeleted: certificates are encrypted
// at rest, reach only the build's VM, and are gone once the build ends.
func TestCertificatesSealedServedToTheVMAndDeleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const p12 = "-----P12 SECRET BYTES-----"
	certs := certsZip(t, map[string]string{"dist.p12": p12, "password.txt": "hunter2\n", "App_Store.mobileprovision": "PROFILE"})
	sub, err := e.developer.Submit(ctx, api.SubmitRequest{Platform: "ios", Source: bytes.NewReader(controllertest.Project(t, map[string]string{"a": "b"})),
		Certs: bytes.NewReader(certs)})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := os.ReadFile(filepath.Join(e.dataDir, "files", "builds", sub.ID, "certs.sealed"))
	if err != nil {
		t.Fatalf("sealed certificates missing: %v", err)
	}
	if bytes.Contains(sealed, []byte(p12)) || bytes.Contains(sealed, []byte("hunter2")) {
		t.Fatal("certificates are stored in the clear")
	}
	w := e.register("mac", api.Capabilities{Platforms: []string{"ios"}})
	job := w.poll(0)
	if job.CertsURL == nil || *job.CertsURL != "/api/builds/"+sub.ID+"/certs-secure" {
		t.Fatalf("job certs_url: %v", job.CertsURL)
	}
	w.heartbeat(job)
	vm := &api.Client{BaseURL: e.URL}
	auth, err := vm.VMAuth(ctx, sub.ID, job.OTP)
	if err != nil {
		t.Fatal(err)
	}
	got, err := vm.CertsSecure(ctx, sub.ID, auth.VMToken)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.P12) != p12 || got.P12Password != "hunter2" || len(got.ProvisioningProfiles) != 1 ||
		string(got.ProvisioningProfiles[0]) != "PROFILE" || len(got.KeychainPassword) < 20 {
		t.Fatalf("certs-secure: %+v", got)
	}
	// Not for developers or workers: only the VM.
	req, _ := http.NewRequest(http.MethodGet, e.URL+"/api/builds/"+sub.ID+"/certs-secure", nil)
	req.Header.Set(api.HeaderAPIKey, e.adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("certs-secure with an API key: %d", resp.StatusCode)
	}

	if _, err := w.complete(job, api.Result{Success: true}); err != nil {
		t.Fatal(err)
	}
	e.reaper.Sweep(ctx) // what the kick after a terminal result triggers
	if _, err := os.Stat(filepath.Join(e.dataDir, "files", "builds", sub.ID, "certs.sealed")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("certificates still on disk after the build ended: %v", err)
	}
	// A retry of a signed build needs the certificates again.
	_, err = e.developer.Retry(ctx, sub.ID)
	wantStatus(t, err, http.StatusConflict)
	if !strings.Contains(err.Error(), "certs") {
		t.Fatalf("retry error does not say how to fix it: %v", err)
	}
}

func TestCertsZipValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for name, files := range map[string]map[string]string{
		"no p12":       {"password.txt": "x"},
		"no password":  {"a.p12": "x"},
		"two p12s":     {"a.p12": "x", "b.p12": "y", "password.txt": "z"},
		"not even zip": nil,
	} {
		raw := []byte("this is not a zip")
		if files != nil {
			raw = certsZip(t, files)
		}
		_, err := e.developer.Submit(ctx, api.SubmitRequest{Platform: "ios", Source: bytes.NewReader(controllertest.Project(t, map[string]string{"a": "b"})),
			Certs: bytes.NewReader(raw)})
		if api.StatusOf(err) != http.StatusUnprocessableEntity {
			t.Errorf("%s: want 422, got %v", name, err)
		}
	}
	var n int
	e.store.Pool().QueryRow(ctx, `SELECT count(*) FROM builds`).Scan(&n)
	entries, _ := os.ReadDir(filepath.Join(e.dataDir, "files", "builds"))
	if n != 0 || len(entries) != 0 {
		t.Fatalf("rejected submits left %d builds and %d directories", n, len(entries))
	}
}

// TestCertsZipBounds: a certificates zip may list at most 50 entries and
// decompress to at most 10 MiB in all, whatever its headers claim; each
// breach is a 422 on submit, on a retry that sends certificates, and when
// the stored zip is parsed for the VM.
func TestCertsZipBounds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	base := map[string]string{"dist.p12": "P12", "password.txt": "pw"}
	with := func(extra map[string]string) []byte {
		files := maps.Clone(base)
		maps.Copy(files, extra)
		return certsZip(t, files)
	}
	many := map[string]string{}
	for i := range 49 {
		many[fmt.Sprintf("p%02d.mobileprovision", i)] = "x"
	}
	four := strings.Repeat("z", 4<<20)
	// An entry whose header says 3 bytes but which inflates to 20 MiB.
	var lying bytes.Buffer
	{
		var deflated bytes.Buffer
		fw, _ := flate.NewWriter(&deflated, flate.BestCompression)
		fw.Write(make([]byte, 20<<20))
		fw.Close()
		zw := zip.NewWriter(&lying)
		for name, body := range base {
			w, _ := zw.Create(name)
			w.Write([]byte(body))
		}
		w, err := zw.CreateRaw(&zip.FileHeader{Name: "big.mobileprovision", Method: zip.Deflate,
			CompressedSize64: uint64(deflated.Len()), UncompressedSize64: 3, CRC32: crc32.ChecksumIEEE([]byte("abc"))})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(deflated.Bytes())
		zw.Close()
	}
	bombs := map[string][]byte{
		"51 entries":          with(many),
		"12 MiB in three":     with(map[string]string{"a.mobileprovision": four, "b.mobileprovision": four, "c.mobileprovision": four}),
		"header understates":  lying.Bytes(),
		"one entry of 11 MiB": with(map[string]string{"a.mobileprovision": strings.Repeat("z", 11<<20)}),
	}
	src := func() *bytes.Reader {
		return bytes.NewReader(controllertest.Project(t, map[string]string{"n": randomID()}))
	}
	for name, bomb := range bombs {
		_, err := e.developer.Submit(ctx, api.SubmitRequest{Platform: "ios", Source: src(), Certs: bytes.NewReader(bomb)})
		if api.StatusOf(err) != http.StatusUnprocessableEntity {
			t.Errorf("submit %s: want 422, got %v", name, err)
		}
	}
	// Just inside the bounds: 50 entries, 8 MiB.
	delete(many, "p00.mobileprovision")
	for name, ok := range map[string][]byte{"8 MiB": with(map[string]string{"a.mobileprovision": four, "b.mobileprovision": four}), "50 entries": with(many)} {
		sub, err := e.developer.Submit(ctx, api.SubmitRequest{Platform: "ios", Source: src(), Certs: bytes.NewReader(ok)})
		if err != nil {
			t.Fatalf("a zip within the bounds (%s): %v", name, err)
		}
		if _, err := e.developer.Cancel(ctx, sub.ID); err != nil {
			t.Fatal(err)
		}
	}
	// Retry with certificates sent again.
	sub, err := e.developer.Submit(ctx, api.SubmitRequest{Platform: "ios", Source: src(), Certs: bytes.NewReader(with(nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.developer.Cancel(ctx, sub.ID); err != nil {
		t.Fatal(err)
	}
	for name, bomb := range bombs {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		fw, _ := mw.CreateFormFile("certs", "certs.zip")
		fw.Write(bomb)
		mw.Close()
		req, _ := http.NewRequest(http.MethodPost, e.URL+"/api/builds/"+sub.ID+"/retry", &body)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set(api.HeaderAPIKey, e.devKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("retry %s: want 422, got %d", name, resp.StatusCode)
		}
	}
	// The parse for the VM is bounded too (a stored zip from an older controller).
	sub, err = e.developer.Submit(ctx, api.SubmitRequest{Platform: "ios", Source: src(), Certs: bytes.NewReader(with(nil))})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.blobs.PrepareSeal(context.Background(), sub.ID, blobs.Certs, bombs["12 MiB in three"])
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, vmToken := e.startVM(e.register("mac", api.Capabilities{Platforms: []string{"ios"}}), sub.ID)
	_, err = (&api.Client{BaseURL: e.URL}).CertsSecure(ctx, sub.ID, vmToken)
	if api.StatusOf(err) != http.StatusUnprocessableEntity {
		t.Fatalf("fetching a stored bomb: want 422, got %v", err)
	}
}
