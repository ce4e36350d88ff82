package httpapi_test

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

// Multipart: the worker's result upload

func TestBadWorkerUpload(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.URL
	w := biRegister(t, e, "mac", api.PlatformAndroid)
	R := biStartLive(t, e, w, api.PlatformAndroid, nil, false)
	j := R.Job
	upload := func(t *testing.T, ctype string, body []byte) biReply {
		t.Helper()
		return biSend(t, "POST", u+"/api/workers/upload", body, api.HeaderAPIKey, e.workKey, api.HeaderWorkerToken, w.Token, "Content-Type", ctype)
	}
	ct := biMPType(biBoundary)
	mp := func(parts ...biPart) []byte { return biMultipart(biBoundary, parts...) }
	ids := []biPart{biField("build_id", j.ID), biField("attempt_id", j.AttemptID), biField("lease_token", j.LeaseToken)}
	with := func(parts ...biPart) []byte { return mp(append(slices.Clone(ids), parts...)...) }
	apk := []byte("APK-CONTENT")
	still := func(t *testing.T) {
		t.Helper()
		if b := e.build(R.ID); b.Status != api.StatusBuilding || len(b.Artifacts) != 0 {
			t.Errorf("build after a rejected upload: status %s, artifacts %v", b.Status, b.Artifacts)
		}
	}

	t.Run("malformed multipart", func(t *testing.T) {
		before := biFingerprint(t, e)
		full := with(biField("success", "true"), biFile("result", "app.apk", apk))
		for _, c := range []struct {
			ctype string
			body  []byte
		}{
			{ct, []byte("garbage, not multipart")},
			{ct, full[:len(full)-40]}, // truncated inside the file
			{biMPType("nope"), full},
			{"multipart/form-data", full},
			{"application/json", []byte(`{"build_id":"x"}`)},
			{"", full},
		} {
			upload(t, c.ctype, c.body).wantError(t, http.StatusBadRequest, api.CodeBadRequest)
		}
		still(t)
		biUnchanged(t, e, before)
	})

	t.Run("invalid fields", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, c := range []struct {
			body  []byte
			field string
		}{
			{mp(biField("build_id", ""), biField("attempt_id", j.AttemptID), biField("lease_token", j.LeaseToken), biField("success", "true")), "build_id"},
			{mp(biField("build_id", j.ID), biField("attempt_id", " "), biField("lease_token", j.LeaseToken), biField("success", "true")), "attempt_id"},
			{mp(biField("build_id", j.ID), biField("attempt_id", j.AttemptID), biField("lease_token", ""), biField("success", "true")), "lease_token"},
			{with(), "success"},
			{with(biField("success", "maybe")), "success"},
			{with(biField("success", "false"), biField("retryable", "perhaps")), "retryable"},
			{with(biField("success", "false"), biField("error_message", strings.Repeat("m", 9000))), "error_message"},
		} {
			upload(t, ct, c.body).wantFieldError(t, http.StatusUnprocessableEntity, c.field)
		}
		still(t)
		biUnchanged(t, e, before)
	})

	t.Run("missing required field", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, c := range []struct {
			body  []byte
			field string
		}{
			{mp(biField("attempt_id", j.AttemptID), biField("lease_token", j.LeaseToken), biField("success", "true")), "build_id"},
			{mp(biField("build_id", j.ID), biField("lease_token", j.LeaseToken), biField("success", "true")), "attempt_id"},
			{mp(biField("build_id", j.ID), biField("attempt_id", j.AttemptID), biField("success", "true")), "lease_token"},
		} {
			upload(t, ct, c.body).wantFieldError(t, http.StatusUnprocessableEntity, c.field)
		}
		still(t)
		biUnchanged(t, e, before)
	})

	t.Run("truncated inside the result file", func(t *testing.T) {
		before := biFingerprint(t, e)
		full := with(biField("success", "true"), biFile("result", "app.apk", bytes.Repeat([]byte("A"), 4096)))
		for _, cut := range []int{len(full) - 5, len(full) - 40, len(full) - 2000} {
			upload(t, ct, full[:cut]).wantError(t, http.StatusBadRequest, api.CodeBadRequest)
		}
		still(t)
		biUnchanged(t, e, before)
	})

	t.Run("truncated inside the result file's header", func(t *testing.T) {
		// Its own worker and build: when the bug strikes, the build ends.
		w2 := biRegister(t, e, "mac-2", api.PlatformIOS)
		R2 := biStartLive(t, e, w2, api.PlatformIOS, nil, false)
		before := biFingerprint(t, e)
		full := biResultBody(R2.Job, true, biFile("result", "app.ipa", apk))
		cut := bytes.Index(full, []byte("Content-Type: application/octet-stream")) + 20
		biSend(t, "POST", u+"/api/workers/upload", full[:cut], api.HeaderAPIKey, e.workKey, api.HeaderWorkerToken, w2.Token, "Content-Type", ct).
			wantError(t, http.StatusBadRequest, api.CodeBadRequest)
		if b := e.build(R2.ID); b.Status != api.StatusBuilding {
			t.Errorf("build after a truncated result: %s, artifacts %v", b.Status, b.Artifacts)
		}
		biUnchanged(t, e, before)
	})

	t.Run("bad result file", func(t *testing.T) {
		before := biFingerprint(t, e)
		// The file before build_id: the controller cannot know where it goes.
		upload(t, ct, mp(biFile("result", "app.apk", apk), biField("build_id", j.ID), biField("attempt_id", j.AttemptID),
			biField("lease_token", j.LeaseToken), biField("success", "true"))).wantFieldError(t, http.StatusBadRequest, "build_id")
		// A build_id that is not an id.
		upload(t, ct, mp(biField("build_id", "../../etc"), biField("attempt_id", j.AttemptID), biField("lease_token", j.LeaseToken),
			biField("success", "true"), biFile("result", "app.apk", apk))).wantFieldError(t, http.StatusBadRequest, "build_id")
		for _, name := range []string{"..", ".", "a/..", "   "} {
			upload(t, ct, with(biField("success", "true"), biFile("result", name, apk))).wantError(t, http.StatusBadRequest, api.CodeBadRequest)
		}
		upload(t, ct, with(biField("success", "true"), biFile("result", "a.apk", apk), biFile("result", "b.apk", apk))).
			wantError(t, http.StatusBadRequest, api.CodeBadRequest)
		still(t)
		biUnchanged(t, e, before)
	})

	t.Run("checksum mismatch", func(t *testing.T) {
		before := biFingerprint(t, e)
		r := biSend(t, "POST", u+"/api/workers/upload", with(biField("success", "true"), biFile("result", "app.apk", apk)),
			api.HeaderAPIKey, e.workKey, api.HeaderWorkerToken, w.Token, "Content-Type", ct, api.HeaderChecksum, strings.Repeat("ab", 32))
		r.wantError(t, http.StatusUnprocessableEntity, api.CodeChecksum)
		still(t)
		biUnchanged(t, e, before)
	})

	t.Run("stale lease with a file", func(t *testing.T) {
		before := biFingerprint(t, e)
		body := mp(biField("build_id", j.ID), biField("attempt_id", j.AttemptID), biField("lease_token", "flt_stale"), biField("success", "true"),
			biFile("result", "app.apk", apk))
		upload(t, ct, body).wantError(t, http.StatusConflict, api.CodeLeaseLost)
		still(t)
		biUnchanged(t, e, before)
	})

	t.Run("result for an unknown build leaves no directory", func(t *testing.T) {
		before := biFingerprint(t, e)
		ghost := store.NewID()
		body := mp(biField("build_id", ghost), biField("attempt_id", j.AttemptID), biField("lease_token", j.LeaseToken), biField("success", "true"),
			biFile("result", "app.apk", apk))
		upload(t, ct, body).wantError(t, http.StatusConflict, api.CodeLeaseLost)
		if orphans := biOrphanDirs(t, e); len(orphans) != 0 {
			t.Errorf("directories of no build left under files/builds: %v", orphans)
		}
		biUnchanged(t, e, before)
	})
}
