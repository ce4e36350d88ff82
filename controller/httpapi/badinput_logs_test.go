package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/freeagent-build/freeagent/api"
)

// Log offsets

func TestLogOffsets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.URL
	ctx := context.Background()
	w := biRegister(t, e, "mac", api.PlatformAndroid)
	R := biStartLive(t, e, w, api.PlatformAndroid, nil, true)
	appendAt := func(t *testing.T, offset string, data string) biReply {
		t.Helper()
		q := ""
		if offset != "\x00missing" {
			q = "?offset=" + offset
		}
		return biSend(t, "POST", u+"/api/builds/"+R.ID+"/logs"+q, []byte(data), api.HeaderVMToken, R.VM, "Content-Type", "application/octet-stream")
	}
	content := func(t *testing.T) string {
		t.Helper()
		c, err := e.developer.ReadLogs(ctx, R.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if c.Length != int64(len(c.Data)) {
			t.Errorf("X-Log-Length %d but %d bytes", c.Length, len(c.Data))
		}
		return string(c.Data)
	}
	var got api.LogAppendResponse
	appendAt(t, "0", "hello\n").wantOK(t, http.StatusOK, &got)
	if got.Length != 6 {
		t.Fatalf("length %d", got.Length)
	}

	t.Run("offset beyond the length", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, off := range []string{"7", "1000", "9223372036854775807"} {
			for _, data := range []string{"world\n", ""} {
				er := appendAt(t, off, data).wantError(t, http.StatusRequestedRangeNotSatisfiable, api.CodeOffsetAhead)
				if er.Length == nil || *er.Length != 6 {
					t.Errorf("offset %s: 416 body length %v, want 6", off, er.Length)
				}
			}
		}
		biUnchanged(t, e, before)
	})

	t.Run("resend of held bytes", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, c := range []struct{ off, data string }{{"0", "hello\n"}, {"0", "HELLO\n"}, {"2", "llo"}, {"6", ""}, {"0", ""}, {"5", "\n"}} {
			var r api.LogAppendResponse
			appendAt(t, c.off, c.data).wantOK(t, http.StatusOK, &r)
			if r.Length != 6 {
				t.Errorf("resend %q at %s: length %d, want 6", c.data, c.off, r.Length)
			}
		}
		if c := content(t); c != "hello\n" {
			t.Errorf("log after resends: %q", c)
		}
		biUnchanged(t, e, before)
		// A resend that runs past the end appends only the new tail.
		var r api.LogAppendResponse
		appendAt(t, "3", "lo\nworld\n").wantOK(t, http.StatusOK, &r)
		if c := content(t); r.Length != 12 || c != "hello\nworld\n" {
			t.Errorf("overlapping append: length %d, log %q", r.Length, c)
		}
	})

	t.Run("bad offset", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, off := range []string{"-1", "\x00missing", "", "abc", "1.5", "0x10", "12abc", "99999999999999999999", "-9223372036854775808", "%20"} {
			appendAt(t, off, "x").wantFieldError(t, http.StatusUnprocessableEntity, "offset")
		}
		for _, after := range []string{"-1", "abc", "1e3"} {
			biSend(t, "GET", u+"/api/builds/"+R.ID+"/logs?after="+after, nil, api.HeaderAPIKey, e.devKey).
				wantFieldError(t, http.StatusUnprocessableEntity, "after")
		}
		biUnchanged(t, e, before)
	})

	t.Run("reading past the end", func(t *testing.T) {
		c, err := e.developer.ReadLogs(ctx, R.ID, 1<<40)
		if err != nil || len(c.Data) != 0 || c.Length != 12 {
			t.Errorf("read past the end: %d bytes, length %d, %v", len(c.Data), c.Length, err)
		}
	})
}
