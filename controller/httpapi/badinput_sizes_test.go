package httpapi_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/store"
)

// Size limits

func TestOversizedBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(_ *store.Config, l *httpapi.Limits) {
		l.Source, l.Certs, l.Artifact, l.JSONBody, l.LogChunk, l.LogTotal = 64<<10, 8<<10, 64<<10, 4<<10, 1<<10, 4<<10
		l.Credentials = 4 << 10
	})
	u := e.URL
	ct := biMPType(biBoundary)
	src := controllertest.Project(t, map[string]string{"package.json": "{}"})

	t.Run("source", func(t *testing.T) {
		before := biFingerprint(t, e)
		body := biMultipart(biBoundary, biField("platform", "android"), biFile("source", "s.tar.gz", biGzipLike(64<<10+1)))
		biSend(t, "POST", u+"/api/builds", body, api.HeaderAPIKey, e.devKey, "Content-Type", ct).wantError(t, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
		body = biMultipart(biBoundary, biField("platform", "android"), biFile("source", "s.tar.gz", biGzipLike(100<<10)))
		biSend(t, "POST", u+"/api/builds", body, api.HeaderAPIKey, e.devKey, "Content-Type", ct).wantError(t, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
		biUnchanged(t, e, before)
		// Exactly at the limit is fine.
		body = biMultipart(biBoundary, biField("platform", "android"), biFile("source", "s.tar.gz", biGzipLike(64<<10)))
		var out api.SubmitResponse
		biSend(t, "POST", u+"/api/builds", body, api.HeaderAPIKey, e.devKey, "Content-Type", ct).wantOK(t, http.StatusCreated, &out)
		if _, err := e.developer.Cancel(context.Background(), out.ID); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("certs", func(t *testing.T) {
		before := biFingerprint(t, e)
		// Stored (not deflated) so the zip is surely beyond 8 KiB.
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for _, n := range []string{"a.p12", "password.txt", "big.mobileprovision"} {
			wr, _ := zw.CreateHeader(&zip.FileHeader{Name: n, Method: zip.Store})
			if n == "big.mobileprovision" {
				wr.Write(biGzipLike(9 << 10))
			} else {
				wr.Write([]byte("x"))
			}
		}
		zw.Close()
		certs := buf.Bytes()
		body := biMultipart(biBoundary, biField("platform", "ios"), biFile("source", "s.tar.gz", src), biFile("certs", "c.zip", certs))
		biSend(t, "POST", u+"/api/builds", body, api.HeaderAPIKey, e.devKey, "Content-Type", ct).wantError(t, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
		biUnchanged(t, e, before)
	})

	t.Run("credentials and spec", func(t *testing.T) {
		before := biFingerprint(t, e)
		creds, _ := json.Marshal(api.BuildCredentials{Android: &api.AndroidKeystore{Keystore: biGzipLike(4 << 10), KeystorePassword: "p", KeyAlias: "a", KeyPassword: "k"}})
		body := biMultipart(biBoundary, biField("platform", "android"), biFile("source", "s.tar.gz", src), biFile("credentials", "c.json", creds))
		biSend(t, "POST", u+"/api/builds", body, api.HeaderAPIKey, e.devKey, "Content-Type", ct).wantError(t, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
		spec, _ := json.Marshal(api.BuildSpec{Version: 1, Platform: "android", Message: strings.Repeat("m", 64<<10)})
		body = biMultipart(biBoundary, biField("platform", "android"), biFile("source", "s.tar.gz", src), biField("spec", string(spec)))
		biSend(t, "POST", u+"/api/builds", body, api.HeaderAPIKey, e.devKey, "Content-Type", ct).wantError(t, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
		biUnchanged(t, e, before)
	})

	t.Run("whole submit body", func(t *testing.T) {
		before := biFingerprint(t, e)
		// Many small fields, each under the 8 KiB field limit, together
		// beyond Source+Certs+Credentials+JSONBody and the 64 KiB spec.
		parts := []biPart{biField("platform", "android")}
		for i := 0; i < 24; i++ {
			parts = append(parts, biField(fmt.Sprintf("junk%d", i), strings.Repeat("j", 8<<10)))
		}
		parts = append(parts, biFile("source", "s.tar.gz", src))
		biSend(t, "POST", u+"/api/builds", biMultipart(biBoundary, parts...), api.HeaderAPIKey, e.devKey, "Content-Type", ct).
			wantError(t, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
		biUnchanged(t, e, before)
	})

	w := biRegister(t, e, "mac", api.PlatformIOS)
	R := biStartLive(t, e, w, api.PlatformIOS, nil, true)

	t.Run("VM artifact", func(t *testing.T) {
		before := biFingerprint(t, e)
		body := biMultipart(biBoundary, biFile("artifact", "app.ipa", biGzipLike(64<<10+1)))
		biSend(t, "POST", u+"/api/builds/"+R.ID+"/artifacts", body, api.HeaderVMToken, R.VM, "Content-Type", ct).
			wantError(t, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
		biUnchanged(t, e, before)
	})

	t.Run("worker result", func(t *testing.T) {
		before := biFingerprint(t, e)
		body := biResultBody(R.Job, true, biFile("result", "app.ipa", biGzipLike(100<<10)))
		biSend(t, "POST", u+"/api/workers/upload", body, api.HeaderAPIKey, e.workKey, api.HeaderWorkerToken, w.Token, "Content-Type", ct).
			wantError(t, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
		biUnchanged(t, e, before)
	})

	t.Run("JSON body", func(t *testing.T) {
		before := biFingerprint(t, e)
		big := []byte(`{"name": "` + strings.Repeat("n", 5<<10) + `"}`)
		biSend(t, "POST", u+"/api/workers/register", big, api.HeaderAPIKey, e.workKey, "Content-Type", "application/json").
			wantError(t, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
		hb := fmt.Sprintf(`{"build_id": %q, "attempt_id": %q, "lease_token": %q, "phase": "%s"}`, R.ID, R.Job.AttemptID, R.Job.LeaseToken, strings.Repeat("p", 5<<10))
		biSend(t, "POST", u+"/api/workers/heartbeat", []byte(hb), api.HeaderAPIKey, e.workKey, api.HeaderWorkerToken, w.Token).
			wantError(t, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
		// Leading whitespace counts too.
		ws := append(bytes.Repeat([]byte(" "), 5<<10), `{"name":"x"}`...)
		biSend(t, "POST", u+"/api/workers/register", ws, api.HeaderAPIKey, e.workKey).wantError(t, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
		biUnchanged(t, e, before)
	})

	t.Run("log chunk", func(t *testing.T) {
		before := biFingerprint(t, e)
		biSend(t, "POST", u+"/api/builds/"+R.ID+"/logs?offset=0", bytes.Repeat([]byte("l"), 1<<10+1), api.HeaderVMToken, R.VM).
			wantError(t, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
		biUnchanged(t, e, before)
	})

	t.Run("whole log", func(t *testing.T) {
		vmc := &api.Client{BaseURL: u}
		var want []byte
		for i := 0; i < 4; i++ {
			chunk := bytes.Repeat([]byte{byte('a' + i)}, 1<<10)
			if n, err := vmc.AppendLog(context.Background(), R.ID, R.VM, int64(i<<10), chunk); err != nil || n != int64(i+1)<<10 {
				t.Fatalf("append %d: %d %v", i, n, err)
			}
			want = append(want, chunk...)
		}
		before := biFingerprint(t, e)
		biSend(t, "POST", u+"/api/builds/"+R.ID+"/logs?offset=4096", []byte("x"), api.HeaderVMToken, R.VM).
			wantError(t, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
		biSend(t, "POST", u+"/api/builds/"+R.ID+"/logs?offset=4000", bytes.Repeat([]byte("d"), 100), api.HeaderVMToken, R.VM).
			wantError(t, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
		biUnchanged(t, e, before)
		// A resend of held bytes at the limit is still accepted.
		if n, err := vmc.AppendLog(context.Background(), R.ID, R.VM, 3072, bytes.Repeat([]byte("d"), 1024)); err != nil || n != 4096 {
			t.Errorf("resend at the limit: %d %v", n, err)
		}
		got, err := e.developer.ReadLogs(context.Background(), R.ID, 0)
		if err != nil || !bytes.Equal(got.Data, want) {
			t.Errorf("log after the refused appends differs (%d bytes, %v)", len(got.Data), err)
		}
	})
}
