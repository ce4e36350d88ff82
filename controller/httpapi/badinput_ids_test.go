package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

// Unknown ids

func TestUnknownIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.URL
	w := biRegister(t, e, "mac", api.PlatformAndroid)
	R := biStartLive(t, e, w, api.PlatformAndroid, nil, true)
	before := biFingerprint(t, e)
	for _, id := range []string{store.NewID(), "0123456789abcdefghjkmnpqrs", "not-an-id", strings.ToUpper(store.NewID()), "x", strings.Repeat("a", 300)} {
		for _, key := range []string{e.devKey, e.adminKey} {
			h := []string{api.HeaderAPIKey, key}
			biSend(t, "GET", u+"/api/builds/"+id, nil, h...).wantError(t, http.StatusNotFound, api.CodeNotFound)
			biSend(t, "POST", u+"/api/builds/"+id+"/cancel", nil, h...).wantError(t, http.StatusNotFound, api.CodeNotFound)
			biSend(t, "POST", u+"/api/builds/"+id+"/retry", nil, h...).wantError(t, http.StatusNotFound, api.CodeNotFound)
			biSend(t, "GET", u+"/api/builds/"+id+"/logs", nil, h...).wantError(t, http.StatusNotFound, api.CodeNotFound)
			biSend(t, "GET", u+"/api/builds/"+id+"/logs?after=5", nil, h...).wantError(t, http.StatusNotFound, api.CodeNotFound)
			biSend(t, "GET", u+"/api/builds/"+id+"/artifacts/app.apk", nil, h...).wantError(t, http.StatusNotFound, api.CodeNotFound)
		}
		if !store.ValidID(id) { // a malformed id is not found before any credential is looked at
			for _, p := range []string{"/source", "/certs-secure"} {
				biSend(t, "GET", u+"/api/builds/"+id+p, nil, api.HeaderVMToken, R.VM).wantError(t, http.StatusNotFound, api.CodeNotFound)
			}
			biSend(t, "POST", u+"/api/builds/"+id+"/logs?offset=0", []byte("x"), api.HeaderVMToken, R.VM).wantError(t, http.StatusNotFound, api.CodeNotFound)
		}
	}
	// An artifact name that does not exist on a build that does.
	biSend(t, "GET", u+"/api/builds/"+R.ID+"/artifacts/missing.apk", nil, api.HeaderAPIKey, e.devKey).wantError(t, http.StatusNotFound, api.CodeNotFound)
	// A worker result naming an unknown build without a file.
	biSend(t, "POST", u+"/api/workers/upload", biMultipart(biBoundary, biField("build_id", "not-an-id"), biField("attempt_id", R.Job.AttemptID),
		biField("lease_token", R.Job.LeaseToken), biField("success", "true")),
		api.HeaderAPIKey, e.workKey, api.HeaderWorkerToken, w.Token, "Content-Type", biMPType(biBoundary)).wantError(t, http.StatusNotFound, api.CodeNotFound)
	biUnchanged(t, e, before)
}
