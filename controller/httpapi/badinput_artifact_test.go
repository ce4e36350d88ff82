package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
)

// Multipart: the VM's artifact upload

func TestBadArtifactUpload(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.URL
	w := biRegister(t, e, "mac", api.PlatformAndroid)
	R := biStartLive(t, e, w, api.PlatformAndroid, nil, true)
	up := func(t *testing.T, ctype string, body []byte, hdr ...string) biReply {
		t.Helper()
		return biSend(t, "POST", u+"/api/builds/"+R.ID+"/artifacts", body, append([]string{api.HeaderVMToken, R.VM, "Content-Type", ctype}, hdr...)...)
	}
	ct := biMPType(biBoundary)
	full := biMultipart(biBoundary, biFile("artifact", "app.apk", []byte("APK")))
	before := biFingerprint(t, e)
	for _, c := range []struct {
		ctype string
		body  []byte
	}{
		{ct, []byte("garbage")},
		{ct, full[:len(full)-10]},
		{"multipart/form-data", full},
		{"application/octet-stream", []byte("APK")},
		{"", full},
	} {
		up(t, c.ctype, c.body).wantError(t, http.StatusBadRequest, api.CodeBadRequest)
	}
	up(t, ct, biMultipart(biBoundary, biField("artifact", "not a file"), biFile("other", "x.apk", []byte("x")))).
		wantFieldError(t, http.StatusUnprocessableEntity, "artifact")
	up(t, ct, biMultipart(biBoundary)).wantFieldError(t, http.StatusUnprocessableEntity, "artifact")
	up(t, ct, full, api.HeaderChecksum, strings.Repeat("0", 64)).wantError(t, http.StatusUnprocessableEntity, api.CodeChecksum)
	if b := e.build(R.ID); len(b.Artifacts) != 0 {
		t.Errorf("artifacts after rejected uploads: %v", b.Artifacts)
	}
	biUnchanged(t, e, before)
}
