package httpapi_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
)

// Multipart: submit

func TestBadSubmit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.URL
	src := controllertest.Project(t, map[string]string{"package.json": `{"name":"app"}`})
	submit := func(t *testing.T, ctype string, body []byte, hdr ...string) biReply {
		t.Helper()
		return biSend(t, "POST", u+"/api/builds", body, append([]string{api.HeaderAPIKey, e.devKey, "Content-Type", ctype}, hdr...)...)
	}
	mp := func(parts ...biPart) []byte { return biMultipart(biBoundary, parts...) }
	ct := biMPType(biBoundary)
	// Nothing below creates a build: every case must leave the database
	// without builds and files/builds without a single file or directory.
	empty := func(t *testing.T) {
		t.Helper()
		if n := biCount(t, e, `SELECT count(*) FROM builds`); n != 0 {
			t.Errorf("%d builds rows, want none", n)
		}
		biEventually(t, 2*time.Second, func() string {
			if ents, _ := os.ReadDir(biBuildsDir(e)); len(ents) != 0 {
				return fmt.Sprintf("files/builds holds %v, want nothing", biFiles(t, biBuildsDir(e)))
			}
			return ""
		})
	}

	t.Run("malformed multipart", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, c := range []struct {
			ctype string
			body  []byte
		}{
			{ct, []byte("garbage, not multipart at all")},
			{ct, []byte("--" + biBoundary + "\r\ngarbage header line\r\n\r\nx")},
			{ct, []byte("--" + biBoundary + "\r\nContent-Disposition: form-data; name=\"platform\"\r\n\r\nandroid")}, // no closing boundary
			{biMPType("other-boundary"), mp(biField("platform", "android"), biFile("source", "s.tar.gz", src))},      // boundary never appears
			{"multipart/form-data", mp(biField("platform", "android"), biFile("source", "s.tar.gz", src))},           // no boundary
			{"application/json", []byte(`{"platform":"android"}`)},
			{"application/octet-stream", src},
			{"", mp(biField("platform", "android"), biFile("source", "s.tar.gz", src))},
			{"multipart/mixed; boundary=" + biBoundary + "; x=\"", mp(biField("platform", "android"))}, // unparsable media type
		} {
			submit(t, c.ctype, c.body).wantError(t, http.StatusBadRequest, api.CodeBadRequest)
		}
		empty(t)
		biUnchanged(t, e, before)
	})

	t.Run("truncated inside the file", func(t *testing.T) {
		before := biFingerprint(t, e)
		full := mp(biField("platform", "android"), biFile("source", "s.tar.gz", biGzipLike(4096)))
		for _, cut := range []int{len(full) - 5, len(full) - 40, len(full) / 2} {
			submit(t, ct, full[:cut]).wantError(t, http.StatusBadRequest, api.CodeBadRequest)
		}
		empty(t)
		biUnchanged(t, e, before)
	})

	t.Run("truncated inside a part header", func(t *testing.T) {
		before := biFingerprint(t, e)
		full := mp(biField("platform", "android"), biFile("source", "s.tar.gz", src))
		cut := bytes.Index(full, []byte("Content-Type: application/octet-stream")) + 20
		submit(t, ct, full[:cut]).wantError(t, http.StatusBadRequest, api.CodeBadRequest)
		empty(t)
		biUnchanged(t, e, before)
	})

	t.Run("invalid fields", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, c := range []struct {
			body  []byte
			field string
		}{
			{mp(biFile("source", "s.tar.gz", src)), "platform"},
			{mp(biFile("source", "s.tar.gz", src), biField("platform", "")), "platform"},
			{mp(biField("platform", "windows"), biFile("source", "s.tar.gz", src)), "platform"},
			{mp(biField("platform", "android"), biField("priority", "7"), biFile("source", "s.tar.gz", src)), "priority"},
			{mp(biField("platform", "android"), biField("priority", "-1"), biFile("source", "s.tar.gz", src)), "priority"},
			{mp(biField("platform", "android"), biField("priority", "high"), biFile("source", "s.tar.gz", src)), "priority"},
			{mp(biField("platform", "android"), biField("priority", "99999999999999999999999"), biFile("source", "s.tar.gz", src)), "priority"},
			{mp(biField("platform", "android"), biField("timeout_seconds", "5"), biFile("source", "s.tar.gz", src)), "timeout_seconds"},
			{mp(biField("platform", "android"), biField("profile", strings.Repeat("p", 101)), biFile("source", "s.tar.gz", src)), "profile"},
			{mp(biField("platform", "android"), biField("profile", strings.Repeat("p", 9000)), biFile("source", "s.tar.gz", src)), "profile"},
			{mp(biField("platform", "android")), "source"},
			{mp(biField("platform", "android"), biField("source", "not a file")), "source"},
			{mp(biField("platform", "android"), biFile("source", "s.tar.gz", []byte("plain text, neither gzip nor zip"))), "source"},
			{mp(biField("platform", "android"), biFile("source", "s.tar.gz", []byte{})), "source"},
			{mp(biField("platform", "android"), biFile("source", "s.tar.gz", []byte{0x1f})), "source"},
			{mp(biField("platform", "ios"), biFile("source", "s.tar.gz", src), biFile("certs", "c.zip", []byte("not a zip"))), "certs"},
			{mp(biField("platform", "ios"), biFile("source", "s.tar.gz", src), biFile("certs", "c.zip", biCertsZip(t, [][2]string{{"password.txt", "pw"}}))), ".p12"},
			{mp(biField("platform", "ios"), biFile("source", "s.tar.gz", src), biFile("certs", "c.zip", biCertsZip(t, [][2]string{{"a.p12", "x"}}))), "password.txt"},
			{mp(biField("platform", "ios"), biFile("source", "s.tar.gz", src), biFile("certs", "c.zip", biCertsZip(t, [][2]string{{"a.p12", "x"}, {"b.p12", "y"}, {"password.txt", "pw"}}))), ".p12"},
		} {
			submit(t, ct, c.body).wantFieldError(t, http.StatusUnprocessableEntity, c.field)
		}
		// Platform after the source: still validated, still nothing kept.
		submit(t, ct, mp(biFile("source", "s.tar.gz", src), biField("platform", "beos"))).wantFieldError(t, http.StatusUnprocessableEntity, "platform")
		// Idempotency-Key beyond 200 characters.
		submit(t, ct, mp(biField("platform", "android"), biFile("source", "s.tar.gz", src)), api.HeaderIdempotencyKey, strings.Repeat("k", 201)).
			wantFieldError(t, http.StatusUnprocessableEntity, "Idempotency-Key")
		// A declared checksum that does not match.
		submit(t, ct, mp(biField("platform", "android"), biFile("source", "s.tar.gz", src)), api.HeaderChecksum, strings.Repeat("0", 64)).
			wantError(t, http.StatusUnprocessableEntity, api.CodeChecksum)
		empty(t)
		biUnchanged(t, e, before)
	})

	t.Run("duplicate files", func(t *testing.T) {
		before := biFingerprint(t, e)
		submit(t, ct, mp(biField("platform", "android"), biFile("source", "a.tar.gz", src), biFile("source", "b.tar.gz", src))).
			wantError(t, http.StatusBadRequest, api.CodeBadRequest)
		certs := biValidCerts(t, "x")
		submit(t, ct, mp(biField("platform", "ios"), biFile("source", "a.tar.gz", src), biFile("certs", "c.zip", certs), biFile("certs", "d.zip", certs))).
			wantError(t, http.StatusBadRequest, api.CodeBadRequest)
		empty(t)
		biUnchanged(t, e, before)
	})

	t.Run("valid submit still works", func(t *testing.T) {
		var out api.SubmitResponse
		submit(t, ct, mp(biField("platform", " Android "), biField("unknown", "ignored"), biFile("other", "x.bin", []byte("ignored")),
			biFile("source", "s.tar.gz", src))).wantOK(t, http.StatusCreated, &out)
		if out.ID == "" || out.Status != api.StatusPending {
			t.Fatalf("submit answer %+v", out)
		}
		if got := biFiles(t, biBuildsDir(e)); !slices.Equal(got, []string{out.ID + "/source"}) {
			t.Errorf("files after a valid submit: %v", got)
		}
	})
}
