package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
)

// Text that Postgres cannot store: NUL bytes and invalid UTF-8 reaching a
// text or jsonb column. The contract answers bad fields with 400/422 naming
// the field; a worker's free-text error report must still be recorded.

func TestUnstorableText(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.URL
	ctx := context.Background()
	ct := biMPType(biBoundary)
	src := controllertest.Project(t, map[string]string{"package.json": "{}"})

	t.Run("register", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, c := range []struct{ body, field string }{
			{`{"name": "mac\u0000mini"}`, "name"},
			{`{"name": "mac", "capabilities": {"labels": {"k": "v\u0000"}}}`, "capabilities.labels"},
			{`{"name": "mac", "capabilities": {"labels": {"k\u0000": "v"}}}`, "capabilities.labels"},
			{`{"name": "mac", "capabilities": {"xcode_version": "\u0000"}}`, "capabilities.xcode_version"},
		} {
			biSend(t, "POST", u+"/api/workers/register", []byte(c.body), api.HeaderAPIKey, e.workKey).
				wantFieldError(t, http.StatusUnprocessableEntity, c.field)
		}
		biUnchanged(t, e, before)
	})

	t.Run("heartbeat", func(t *testing.T) {
		w := biRegister(t, e, "hb", api.PlatformAndroid)
		R := biStartLive(t, e, w, api.PlatformAndroid, nil, false)
		j := R.Job
		before := biFingerprint(t, e)
		hb := func(body string) biReply {
			return biSend(t, "POST", u+"/api/workers/heartbeat", []byte(body), api.HeaderAPIKey, e.workKey, api.HeaderWorkerToken, w.Token)
		}
		hb(fmt.Sprintf(`{"build_id": %q, "attempt_id": %q, "lease_token": %q, "phase": "npm\u0000ci"}`, j.ID, j.AttemptID, j.LeaseToken)).
			wantFieldError(t, http.StatusUnprocessableEntity, "phase")
		hb(fmt.Sprintf(`{"build_id": "\u0000", "attempt_id": %q, "lease_token": %q}`, j.AttemptID, j.LeaseToken)).
			wantError(t, http.StatusConflict, api.CodeLeaseLost)
		hb(fmt.Sprintf(`{"build_id": %q, "attempt_id": "\u0000", "lease_token": %q}`, j.ID, j.LeaseToken)).
			wantError(t, http.StatusConflict, api.CodeLeaseLost)
		biUnchanged(t, e, before)
	})

	t.Run("submit", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, c := range []struct {
			parts []biPart
			hdr   []string
			field string
		}{
			{[]biPart{biField("platform", "android"), biField("profile", "rel\x00ease"), biFile("source", "s.tar.gz", src)}, nil, "profile"},
			{[]biPart{biField("platform", "android"), biField("profile", "rel\xffease"), biFile("source", "s.tar.gz", src)}, nil, "profile"},
			{[]biPart{biField("platform", "android"), biField("base_image", "img\x00"), biFile("source", "s.tar.gz", src)}, nil, "base_image"},
			{[]biPart{biField("platform", "android"), biFile("source", "s.tar.gz", src)}, []string{api.HeaderIdempotencyKey, "key-\xff"}, "Idempotency-Key"},
		} {
			biSend(t, "POST", u+"/api/builds", biMultipart(biBoundary, c.parts...), append([]string{api.HeaderAPIKey, e.devKey, "Content-Type", ct}, c.hdr...)...).
				wantFieldError(t, http.StatusUnprocessableEntity, c.field)
		}
		biUnchanged(t, e, before)
	})

	t.Run("list filter", func(t *testing.T) {
		for _, q := range []string{"worker_id=%00", "worker_id=%FF"} {
			r := biSend(t, "GET", u+"/api/builds?"+q, nil, api.HeaderAPIKey, e.devKey)
			if r.Status != http.StatusOK && r.Status != http.StatusUnprocessableEntity {
				t.Errorf("%s: want 200 (no such worker) or 422, got %d: %s", q, r.Status, biClip(r.Body))
			}
		}
	})

	t.Run("worker result error text is recorded", func(t *testing.T) {
		for _, msg := range []string{
			"xcodebuild failed\x00 with garbage",
			"xcodebuild failed: \xff\xfe",
			strings.Repeat("a", 3999) + "é and more", // truncated at 4000 bytes: inside "é"
		} {
			w := biRegister(t, e, "res", api.PlatformAndroid)
			R := biStartLive(t, e, w, api.PlatformAndroid, nil, false)
			res, err := e.worker.Upload(ctx, w.Token, api.Result{BuildID: R.ID, AttemptID: R.Job.AttemptID, LeaseToken: R.Job.LeaseToken,
				Success: false, ErrorMessage: msg, ErrorCode: "xcode\x00"})
			if err != nil || res.Status != api.StatusFailed {
				t.Errorf("result with error text %q: %+v %v", biClip([]byte(msg)), res, err)
				continue
			}
			b := e.build(R.ID)
			if b.ErrorMessage == nil || !utf8.ValidString(*b.ErrorMessage) || len(*b.ErrorMessage) > 4000 {
				t.Errorf("stored error message %v", b.ErrorMessage)
			}
		}
	})
}
