package server_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/controller/api"
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
	sub, err := e.developer.Submit(ctx, api.SubmitRequest{Platform: "ios", Source: bytes.NewReader(project(t, map[string]string{"a": "b"})),
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
		_, err := e.developer.Submit(ctx, api.SubmitRequest{Platform: "ios", Source: bytes.NewReader(project(t, map[string]string{"a": "b"})),
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
