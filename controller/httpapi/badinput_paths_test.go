package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
)

// Names and paths

func TestPathTraversal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.URL
	ctx := context.Background()
	w := biRegister(t, e, "mac", api.PlatformAndroid)
	R := biStartLive(t, e, w, api.PlatformAndroid, nil, true)
	ct := biMPType(biBoundary)
	upload := func(t *testing.T, name string, data []byte) biReply {
		t.Helper()
		return biSend(t, "POST", u+"/api/builds/"+R.ID+"/artifacts", biMultipart(biBoundary, biFile("artifact", name, data)),
			api.HeaderVMToken, R.VM, "Content-Type", ct)
	}
	uploadRaw := func(t *testing.T, disposition string, data []byte) biReply {
		t.Helper()
		return biSend(t, "POST", u+"/api/builds/"+R.ID+"/artifacts", biMultipart(biBoundary, biPart{file: true, disposition: disposition, data: data}),
			api.HeaderVMToken, R.VM, "Content-Type", ct)
	}

	t.Run("artifact name with a path is reduced to its last element", func(t *testing.T) {
		for _, c := range []struct{ name, stored string }{
			{"../../etc/passwd", "passwd"},
			{"/etc/shadow", "shadow"},
			{"..\\..\\windows\\evil.exe", "evil.exe"},
			{"a/b/../../../c.apk", "c.apk"},
		} {
			before := biFiles(t, e.dataDir)
			var art api.Artifact
			upload(t, c.name, []byte("content of "+c.stored)).wantOK(t, http.StatusCreated, &art)
			if art.Name != c.stored {
				t.Errorf("%q stored as %q, want %q", c.name, art.Name, c.stored)
			}
			stored := "builds/" + R.ID + "/" + blobs.AttemptsDir + "/" + R.Job.AttemptID + "/" + blobs.ArtifactPrefix + c.stored
			want := append(slices.Clone(before), "files/"+stored)
			slices.Sort(want)
			if got := biFiles(t, e.dataDir); !slices.Equal(got, want) {
				t.Errorf("files after uploading %q:\n got %v\nwant %v", c.name, got, want)
			}
			b, err := os.ReadFile(filepath.Join(e.dataDir, "files", filepath.FromSlash(stored)))
			if err != nil || string(b) != "content of "+c.stored {
				t.Errorf("stored %s: %q %v", c.stored, b, err)
			}
		}
	})

	t.Run("dot and empty names", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, name := range []string{"..", ".", "a/..", "a/../", "/", "   ", "../", "..\\", "a\\.."} {
			upload(t, name, []byte("x")).wantError(t, http.StatusBadRequest, api.CodeBadRequest)
		}
		// A name with control characters, one that is not UTF-8, one beyond 255 bytes.
		uploadRaw(t, "form-data; name=\"artifact\"; filename=\"a\x01b\"", []byte("x")).wantError(t, http.StatusBadRequest, api.CodeBadRequest)
		uploadRaw(t, "form-data; name=\"artifact\"; filename=\"a\xffb\"", []byte("x")).wantError(t, http.StatusBadRequest, api.CodeBadRequest)
		upload(t, strings.Repeat("n", 256), []byte("x")).wantError(t, http.StatusBadRequest, api.CodeBadRequest)
		biUnchanged(t, e, before)
	})

	t.Run("empty file name", func(t *testing.T) {
		before := biFingerprint(t, e)
		upload(t, "", []byte("x")).wantError(t, http.StatusBadRequest, api.CodeBadRequest)
		biUnchanged(t, e, before)
	})

	t.Run("download with a path in the name", func(t *testing.T) {
		before := biFingerprint(t, e)
		key, _ := os.ReadFile(filepath.Join(e.dataDir, "certs.key"))
		for _, name := range []string{
			"..%2F..%2F..%2Fcerts.key", "..%2F..%2Fcerts.key", "..%2Fsource", "%2E%2E%2F%2E%2E%2F%2E%2E%2Fcerts.key",
			"..%5C..%5C..%5Ccerts.key", "artifacts%2Fpasswd", "source", "certs.sealed", "%2E%2E", "nope.apk", "passwd%00", "%2Fetc%2Fpasswd",
		} {
			r := biSend(t, "GET", u+"/api/builds/"+R.ID+"/artifacts/"+name, nil, api.HeaderAPIKey, e.devKey)
			r.wantError(t, http.StatusNotFound, api.CodeNotFound)
			if len(key) > 0 && bytes.Contains(r.Body, bytes.TrimSpace(key)) || bytes.Contains(r.Body, R.Src[:16]) {
				t.Errorf("%s: answer carries a stored secret: %s", name, biClip(r.Body))
			}
		}
		// Unescaped dot segments: the mux redirects to the cleaned path. Whatever
		// it redirects to, following it with a developer key must end in a JSON
		// 403/404 (/api/builds/<id>/source is the VM's, /certs.key no endpoint).
		for _, p := range []string{"/api/builds/" + R.ID + "/artifacts/../../../certs.key", "/api/builds/" + R.ID + "/artifacts/./../source"} {
			r := biSend(t, "GET", u+p, nil, api.HeaderAPIKey, e.devKey)
			for hops := 0; r.Status/100 == 3 && hops < 5; hops++ {
				loc, err := url.Parse(r.Header.Get("Location"))
				if err != nil {
					t.Fatalf("redirect of %s: %v", p, err)
				}
				r = biSend(t, "GET", u+loc.Path, nil, api.HeaderAPIKey, e.devKey)
			}
			if r.Status != http.StatusNotFound && r.Status != http.StatusForbidden {
				t.Errorf("GET %s: want 403 or 404 after redirects, got %d: %s", p, r.Status, biClip(r.Body))
			} else {
				r.errorObject(t)
			}
			if bytes.Contains(r.Body, R.Src[:16]) || len(key) > 0 && bytes.Contains(r.Body, bytes.TrimSpace(key)) {
				t.Errorf("GET %s: answer carries a stored secret", p)
			}
		}
		biUnchanged(t, e, before)
	})

	t.Run("build id with a path", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, id := range []string{"..", "..%2F..%2Fcerts.key", "..%2F" + R.ID, "%2E%2E", R.ID + "%2F..", "a%2Fb", "%2F", R.ID[:25] + ".", "%00"} {
			dev := []string{api.HeaderAPIKey, e.devKey}
			for _, c := range []struct {
				method, path string
				hdr          []string
			}{
				{"GET", "/api/builds/" + id, dev},
				{"GET", "/api/builds/" + id + "/logs", dev},
				{"POST", "/api/builds/" + id + "/cancel", dev},
				{"POST", "/api/builds/" + id + "/retry", dev},
				{"GET", "/api/builds/" + id + "/artifacts/passwd", dev},
				{"GET", "/api/builds/" + id + "/source", []string{api.HeaderVMToken, R.VM}},
				{"GET", "/api/builds/" + id + "/certs-secure", []string{api.HeaderVMToken, R.VM}},
				{"POST", "/api/builds/" + id + "/logs?offset=0", []string{api.HeaderVMToken, R.VM}},
				{"POST", "/api/builds/" + id + "/artifacts", []string{api.HeaderVMToken, R.VM, "Content-Type", ct}},
			} {
				var body []byte
				if strings.HasSuffix(c.path, "/artifacts") {
					body = biMultipart(biBoundary, biFile("artifact", "x.apk", []byte("x")))
				}
				r := biSend(t, c.method, u+c.path, body, c.hdr...)
				if r.Status/100 == 3 { // a cleaned path ("..", "%2F"): the mux redirects; never a 5xx
					continue
				}
				if r.Status != http.StatusNotFound {
					t.Errorf("%s %s: want 404, got %d: %s", c.method, c.path, r.Status, biClip(r.Body))
					continue
				}
				r.wantError(t, http.StatusNotFound, api.CodeNotFound)
			}
		}
		biUnchanged(t, e, before)
	})

	t.Run("certs zip entries are read by base name", func(t *testing.T) {
		w2 := biRegister(t, e, "mac-ios", api.PlatformIOS)
		certs := biCertsZip(t, [][2]string{
			{"../../evil.p12", "P12-BYTES"},
			{"../password.txt", "s3cret\r\n"},
			{"a/../../x.mobileprovision", "PROFILE-1"},
			{"/abs/y.mobileprovision", "PROFILE-2"},
			{"..\\..\\z.mobileprovision", "PROFILE-3"},
			{"__MACOSX/../../ignored.p12", "IGNORED"},
		})
		before := biFiles(t, e.dataDir)
		I := biStartLive(t, e, w2, api.PlatformIOS, certs, true)
		got, err := (&api.Client{BaseURL: u}).CertsSecure(ctx, I.ID, I.VM)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.P12) != "P12-BYTES" || got.P12Password != "s3cret" || len(got.ProvisioningProfiles) != 3 {
			t.Errorf("certs-secure: p12 %q password %q, %d profiles", got.P12, got.P12Password, len(got.ProvisioningProfiles))
		}
		want := append(slices.Clone(before), "files/builds/"+I.ID+"/certs.sealed", "files/builds/"+I.ID+"/source")
		slices.Sort(want)
		if after := biFiles(t, e.dataDir); !slices.Equal(after, want) {
			t.Errorf("files after a submit with ../ certs entries:\n got %v\nwant %v", after, want)
		}
	})
}

// TestReservedArtifactNames: an artifact is a file of the build's artifacts/
// directory; its name must never reach the build's own source or sealed
// certificates, which live one level up under fixed names.
func TestReservedArtifactNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.URL
	ctx := context.Background()
	w := biRegister(t, e, "mac", api.PlatformIOS)
	R := biStartLive(t, e, w, api.PlatformIOS, biValidCerts(t, "R"), true)
	vmc := &api.Client{BaseURL: u}
	sealed, err := os.ReadFile(filepath.Join(biBuildsDir(e), R.ID, "certs.sealed"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"source", "certs.sealed", "../source", "x/certs.sealed"} {
		r := biSend(t, "POST", u+"/api/builds/"+R.ID+"/artifacts", biMultipart(biBoundary, biFile("artifact", name, []byte("ARTIFACT "+name))),
			api.HeaderVMToken, R.VM, "Content-Type", biMPType(biBoundary))
		switch r.Status {
		case http.StatusBadRequest:
			r.wantError(t, http.StatusBadRequest, api.CodeBadRequest)
		case http.StatusCreated: // then it must be a real artifact, beside the build's files
			var art api.Artifact
			json.Unmarshal(r.Body, &art)
			b, err := os.ReadFile(filepath.Join(biBuildsDir(e), R.ID, blobs.AttemptsDir, R.Job.AttemptID, blobs.ArtifactPrefix+art.Name))
			if err != nil || string(b) != "ARTIFACT "+name {
				t.Errorf("artifact %q is stored as %q (%v)", art.Name, biClip(b), err)
			}
		default:
			t.Errorf("artifact %q: want 201 or 400, got %d: %s", name, r.Status, biClip(r.Body))
		}
	}
	resp, err := vmc.Source(ctx, R.ID, R.VM, "")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(b, R.Src) {
		t.Errorf("the build's source was replaced by an artifact: %s", biClip(b))
	}
	if now, _ := os.ReadFile(filepath.Join(biBuildsDir(e), R.ID, "certs.sealed")); !bytes.Equal(now, sealed) {
		t.Errorf("the build's sealed certificates were replaced by an artifact")
	}
	if _, err := vmc.CertsSecure(ctx, R.ID, R.VM); err != nil {
		t.Errorf("certs-secure after the uploads: %v", err)
	}
	// The worker's result upload goes through the same file store.
	res, err := e.worker.Upload(ctx, w.Token, api.Result{BuildID: R.ID, AttemptID: R.Job.AttemptID, LeaseToken: R.Job.LeaseToken,
		Success: true, FileName: "source", File: strings.NewReader("RESULT")})
	if err != nil && api.StatusOf(err) != http.StatusBadRequest {
		t.Fatalf("result named source: %+v %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(biBuildsDir(e), R.ID, "source")); !bytes.Equal(b, R.Src) {
		t.Errorf("the build's source was replaced by the worker's result file")
	}
}
