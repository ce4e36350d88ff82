package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

// JSON bodies

func TestBadJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.URL
	w := biRegister(t, e, "mac", api.PlatformAndroid)
	R := biStartLive(t, e, w, api.PlatformAndroid, nil, false)
	register := func(t *testing.T, body []byte) biReply {
		t.Helper()
		return biSend(t, "POST", u+"/api/workers/register", body, api.HeaderAPIKey, e.workKey, "Content-Type", "application/json")
	}
	heartbeat := func(t *testing.T, body []byte) biReply {
		t.Helper()
		return biSend(t, "POST", u+"/api/workers/heartbeat", body, api.HeaderAPIKey, e.workKey, api.HeaderWorkerToken, w.Token,
			"Content-Type", "application/json")
	}
	j := R.Job

	t.Run("malformed JSON", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, body := range []string{`{`, `{"name":`, `{"name" "x"}`, `not json`, `{"name":"x",}`, `{"name":"x"` + "\x00", `'name'`, "\xff\xfe{}"} {
			register(t, []byte(body)).wantError(t, http.StatusBadRequest, api.CodeBadRequest)
			heartbeat(t, []byte(body)).wantError(t, http.StatusBadRequest, api.CodeBadRequest)
		}
		biUnchanged(t, e, before)
	})

	t.Run("empty body", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, body := range []string{"", "   \n\t"} {
			register(t, []byte(body)).wantError(t, http.StatusBadRequest, api.CodeBadRequest)
			heartbeat(t, []byte(body)).wantError(t, http.StatusBadRequest, api.CodeBadRequest)
		}
		// No body at all (no Content-Length).
		biSend(t, "POST", u+"/api/workers/register", nil, api.HeaderAPIKey, e.workKey).wantError(t, http.StatusBadRequest, api.CodeBadRequest)
		biUnchanged(t, e, before)
	})

	t.Run("wrong field type", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, c := range []struct{ body, field string }{
			{`{"name": 5}`, "name"},
			{`{"name": ["mac"]}`, "name"},
			{`{"name": "mac", "id": 7}`, "id"},
			{`{"name": "mac", "capabilities": {"max_concurrent_builds": "two"}}`, "capabilities.max_concurrent_builds"},
			{`{"name": "mac", "capabilities": {"max_concurrent_builds": 1e100}}`, "capabilities.max_concurrent_builds"},
			{`{"name": "mac", "capabilities": {"platforms": "ios"}}`, "capabilities.platforms"},
			{`{"name": "mac", "capabilities": {"labels": ["a"]}}`, "capabilities.labels"},
		} {
			register(t, []byte(c.body)).wantFieldError(t, http.StatusUnprocessableEntity, c.field)
		}
		for _, c := range []struct{ body, field string }{
			{`{"build_id": 1, "attempt_id": "a", "lease_token": "l"}`, "build_id"},
			{`{"build_id": "b", "attempt_id": "a", "lease_token": true}`, "lease_token"},
			{fmt.Sprintf(`{"build_id": %q, "attempt_id": %q, "lease_token": %q, "progress": "50"}`, j.ID, j.AttemptID, j.LeaseToken), "progress"},
			{fmt.Sprintf(`{"build_id": %q, "attempt_id": %q, "lease_token": %q, "progress": 5.5}`, j.ID, j.AttemptID, j.LeaseToken), "progress"},
		} {
			heartbeat(t, []byte(c.body)).wantFieldError(t, http.StatusUnprocessableEntity, c.field)
		}
		biUnchanged(t, e, before)
	})

	t.Run("not an object", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, body := range []string{`[]`, `"mac"`, `42`, `true`} {
			for _, r := range []biReply{register(t, []byte(body)), heartbeat(t, []byte(body))} {
				if r.Status != http.StatusBadRequest && r.Status != http.StatusUnprocessableEntity {
					t.Errorf("body %s: want 400 or 422, got %d: %s", body, r.Status, biClip(r.Body))
				} else {
					r.errorObject(t)
				}
			}
		}
		biUnchanged(t, e, before)
	})

	t.Run("missing required field", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, body := range []string{`{}`, `null`, `{"name": ""}`, `{"name": "   "}`, `{"capabilities": {"platforms": ["ios"]}}`, `{"Name ": "x"}`} {
			register(t, []byte(body)).wantFieldError(t, http.StatusUnprocessableEntity, "name")
		}
		for _, c := range []struct{ body, field string }{
			{`{}`, "build_id"},
			{`null`, "build_id"},
			{fmt.Sprintf(`{"build_id": %q, "lease_token": %q}`, j.ID, j.LeaseToken), "attempt_id"},
			{fmt.Sprintf(`{"build_id": %q, "attempt_id": %q}`, j.ID, j.AttemptID), "lease_token"},
			{fmt.Sprintf(`{"build_id": %q, "attempt_id": %q, "lease_token": " "}`, j.ID, j.AttemptID), "lease_token"},
		} {
			heartbeat(t, []byte(c.body)).wantFieldError(t, http.StatusUnprocessableEntity, c.field)
		}
		biUnchanged(t, e, before)
	})

	t.Run("invalid field value", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, c := range []struct{ body, field string }{
			{`{"name": "` + strings.Repeat("n", 201) + `"}`, "name"},
			{`{"name": "mac", "id": "../../etc"}`, "id"},
			{`{"name": "mac", "id": "` + strings.Repeat("a", 65) + `"}`, "id"},
			{`{"name": "mac", "capabilities": {"platforms": ["windows"]}}`, "capabilities.platforms"},
			{`{"name": "mac", "capabilities": {"platforms": ["ios", null]}}`, "capabilities.platforms"},
			{`{"name": "mac", "capabilities": {"max_concurrent_builds": -1}}`, "capabilities.max_concurrent_builds"},
			{`{"name": "mac", "capabilities": {"max_concurrent_builds": 65}}`, "capabilities.max_concurrent_builds"},
		} {
			register(t, []byte(c.body)).wantFieldError(t, http.StatusUnprocessableEntity, c.field)
		}
		for _, c := range []struct{ body, field string }{
			{fmt.Sprintf(`{"build_id": %q, "attempt_id": %q, "lease_token": %q, "progress": 101}`, j.ID, j.AttemptID, j.LeaseToken), "progress"},
			{fmt.Sprintf(`{"build_id": %q, "attempt_id": %q, "lease_token": %q, "progress": -1}`, j.ID, j.AttemptID, j.LeaseToken), "progress"},
			{fmt.Sprintf(`{"build_id": %q, "attempt_id": %q, "lease_token": %q, "phase": %q}`, j.ID, j.AttemptID, j.LeaseToken, strings.Repeat("p", 101)), "phase"},
		} {
			heartbeat(t, []byte(c.body)).wantFieldError(t, http.StatusUnprocessableEntity, c.field)
		}
		biUnchanged(t, e, before)
	})

	t.Run("lease that is not held", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, body := range []string{
			fmt.Sprintf(`{"build_id": %q, "attempt_id": %q, "lease_token": "flt_wrong"}`, j.ID, j.AttemptID),
			fmt.Sprintf(`{"build_id": %q, "attempt_id": %q, "lease_token": %q}`, j.ID, store.NewID(), j.LeaseToken),
			fmt.Sprintf(`{"build_id": %q, "attempt_id": %q, "lease_token": %q}`, store.NewID(), j.AttemptID, j.LeaseToken),
			fmt.Sprintf(`{"build_id": "../../etc", "attempt_id": %q, "lease_token": %q}`, j.AttemptID, j.LeaseToken),
		} {
			heartbeat(t, []byte(body)).wantError(t, http.StatusConflict, api.CodeLeaseLost)
		}
		biUnchanged(t, e, before)
	})

	t.Run("unknown fields are ignored", func(t *testing.T) {
		body := fmt.Sprintf(`{"build_id": %q, "attempt_id": %q, "lease_token": %q, "surprise": {"nested": [1, 2]}}`, j.ID, j.AttemptID, j.LeaseToken)
		heartbeat(t, []byte(body)).wantOK(t, http.StatusOK, nil)
	})
}
