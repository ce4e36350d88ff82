package httpapi_test

// Bad input: every request here is wrong in one way (credentials, JSON,
// multipart, sizes, names, ids, offsets, methods). Each case asserts the exact
// status and error code of docs/design.md's HTTP contract, and that the request
// changed nothing and left nothing behind: no rows, no files, no temporary
// files, no consumed credentials.

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/freeagent-build/freeagent/controller/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/store"
)

// ---------------------------------------------------------------------------
// Plain HTTP helpers (shared with fuzz_test.go; all take testing.TB).

// biReply is one raw HTTP answer.
type biReply struct {
	Status int
	Header http.Header
	Body   []byte
}

// biClient never follows redirects, so a test sees exactly what the server
// answered.
var biClient = &http.Client{
	Timeout:       60 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// biSend makes one request. hdr holds header name/value pairs; a pair with an
// empty value is not sent. A nil body sends no body.
func biSend(tb testing.TB, method, u string, body []byte, hdr ...string) biReply {
	tb.Helper()
	r, err := biTrySend(method, u, body, hdr...)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, u, err)
	}
	return r
}

func biTrySend(method, u string, body []byte, hdr ...string) (biReply, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		return biReply{}, err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] != "" {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := biClient.Do(req)
	if err != nil {
		return biReply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return biReply{}, fmt.Errorf("read answer: %w", err)
	}
	return biReply{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

func biClip(b []byte) string {
	if len(b) > 400 {
		return fmt.Sprintf("%q… (%d bytes)", b[:400], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// errorObject decodes an error answer, reporting a body that is not the
// contract's {"error", "code"} object.
func (r biReply) errorObject(tb testing.TB) (api.ErrorResponse, bool) {
	tb.Helper()
	var er api.ErrorResponse
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		tb.Errorf("HTTP %d answer has Content-Type %q, want application/json: %s", r.Status, ct, biClip(r.Body))
		return er, false
	}
	if err := json.Unmarshal(r.Body, &er); err != nil || er.Error == "" || er.Code == "" {
		tb.Errorf("HTTP %d answer is not an error object {error, code}: %s", r.Status, biClip(r.Body))
		return er, false
	}
	return er, true
}

// wantError asserts the status and (when not "") the error code.
func (r biReply) wantError(tb testing.TB, status int, code string) api.ErrorResponse {
	tb.Helper()
	if r.Status != status {
		tb.Errorf("want HTTP %d %s, got %d: %s", status, code, r.Status, biClip(r.Body))
		return api.ErrorResponse{}
	}
	er, ok := r.errorObject(tb)
	if ok && code != "" && er.Code != code {
		tb.Errorf("want code %q, got %q (%s)", code, er.Code, er.Error)
	}
	return er
}

// wantFieldError asserts a 400/422 whose message names the field.
func (r biReply) wantFieldError(tb testing.TB, status int, field string) {
	tb.Helper()
	code := api.CodeInvalidField
	if status == http.StatusBadRequest {
		code = api.CodeBadRequest
	}
	er := r.wantError(tb, status, code)
	if er.Error != "" && !strings.Contains(er.Error, field) {
		tb.Errorf("error message does not name the field %q: %q", field, er.Error)
	}
}

func (r biReply) wantOK(tb testing.TB, status int, out any) {
	tb.Helper()
	if r.Status != status {
		tb.Fatalf("want HTTP %d, got %d: %s", status, r.Status, biClip(r.Body))
	}
	if out != nil {
		if err := json.Unmarshal(r.Body, out); err != nil {
			tb.Fatalf("decode HTTP %d answer: %v: %s", r.Status, err, biClip(r.Body))
		}
	}
}

// ---------------------------------------------------------------------------
// Multipart bodies built by hand, so they can be wrong on purpose.

const biBoundary = "fa-test-boundary-7Hq2"

type biPart struct {
	name, filename string
	file           bool
	data           []byte
	disposition    string // raw Content-Disposition value; overrides name and filename
}

func biField(name, value string) biPart { return biPart{name: name, data: []byte(value)} }

func biFile(name, filename string, data []byte) biPart {
	return biPart{name: name, filename: filename, file: true, data: data}
}

var biQuote = strings.NewReplacer("\\", "\\\\", `"`, "\\\"")

func biMultipart(boundary string, parts ...biPart) []byte {
	var b bytes.Buffer
	for _, p := range parts {
		fmt.Fprintf(&b, "--%s\r\n", boundary)
		disp := p.disposition
		if disp == "" {
			disp = `form-data; name="` + biQuote.Replace(p.name) + `"`
			if p.file {
				disp += `; filename="` + biQuote.Replace(p.filename) + `"`
			}
		}
		fmt.Fprintf(&b, "Content-Disposition: %s\r\n", disp)
		if p.file {
			b.WriteString("Content-Type: application/octet-stream\r\n")
		}
		b.WriteString("\r\n")
		b.Write(p.data)
		b.WriteString("\r\n")
	}
	fmt.Fprintf(&b, "--%s--\r\n", boundary)
	return b.Bytes()
}

func biMPType(boundary string) string { return "multipart/form-data; boundary=" + boundary }

// biGzipLike is n bytes that pass the controller's archive sniffing as a
// tar.gz (it only looks at the magic number).
func biGzipLike(n int) []byte {
	b := bytes.Repeat([]byte("freeagent-source."), n/17+1)[:n]
	b[0], b[1] = 0x1f, 0x8b
	return b
}

// biCertsZip builds a certificates zip from name → content.
func biCertsZip(tb testing.TB, entries [][2]string) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, en := range entries {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: en[0], Method: zip.Deflate})
		if err != nil {
			tb.Fatal(err)
		}
		w.Write([]byte(en[1]))
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func biValidCerts(tb testing.TB, secret string) []byte {
	return biCertsZip(tb, [][2]string{{"dist.p12", "P12-" + secret}, {"password.txt", "pw-" + secret + "\n"}, {"app.mobileprovision", "PROFILE-" + secret}})
}

// ---------------------------------------------------------------------------
// Workers and live builds through the typed client.

type biWorker struct{ ID, Token string }

func (w *biWorker) keep(g api.TokenGrant) {
	if g.AccessToken != "" {
		w.Token = g.AccessToken
	}
}

func biRegister(tb testing.TB, e *env, name string, platforms ...string) *biWorker {
	tb.Helper()
	resp, err := e.worker.Register(context.Background(), api.RegisterRequest{Name: name,
		Capabilities: api.Capabilities{Platforms: platforms, MaxConcurrentBuilds: 1}})
	if err != nil {
		tb.Fatalf("register %s: %v", name, err)
	}
	return &biWorker{ID: resp.ID, Token: resp.AccessToken}
}

func biSubmit(tb testing.TB, e *env, platform string, certs []byte) (api.SubmitResponse, []byte) {
	tb.Helper()
	src := project(tb, map[string]string{"package.json": `{"name":"app"}`, "app.json": `{"expo":{}}`, "nonce": store.NewID()})
	req := api.SubmitRequest{Platform: platform, Source: bytes.NewReader(src)}
	if certs != nil {
		req.Certs = bytes.NewReader(certs)
	}
	resp, err := e.developer.Submit(context.Background(), req)
	if err != nil {
		tb.Fatalf("submit: %v", err)
	}
	return resp, src
}

// biClaim polls once (no wait) and acknowledges the job with a heartbeat.
func biClaim(tb testing.TB, e *env, w *biWorker) *api.Job {
	tb.Helper()
	ctx := context.Background()
	resp, err := e.worker.Poll(ctx, w.Token, 0)
	if err != nil {
		tb.Fatalf("poll: %v", err)
	}
	w.keep(resp.TokenGrant)
	if resp.Job == nil {
		tb.Fatal("poll: no job")
	}
	hb, err := e.worker.Heartbeat(ctx, w.Token, api.HeartbeatRequest{BuildID: resp.Job.ID, AttemptID: resp.Job.AttemptID, LeaseToken: resp.Job.LeaseToken})
	if err != nil {
		tb.Fatalf("heartbeat: %v", err)
	}
	w.keep(hb.TokenGrant)
	return resp.Job
}

// biLive is a build claimed by a worker, acknowledged, and (with a VM
// token) authenticated by its VM.
type biLive struct {
	ID, Token string // build id and build token
	Src       []byte
	W         *biWorker
	Job       *api.Job
	VM        string // VM token, "" when the OTP was not exchanged
}

func biStartLive(tb testing.TB, e *env, w *biWorker, platform string, certs []byte, vmAuth bool) *biLive {
	tb.Helper()
	sub, src := biSubmit(tb, e, platform, certs)
	job := biClaim(tb, e, w)
	if job.ID != sub.ID {
		tb.Fatalf("worker claimed %s, want the build just submitted (%s)", job.ID, sub.ID)
	}
	lb := &biLive{ID: sub.ID, Token: sub.AccessToken, Src: src, W: w, Job: job}
	if vmAuth {
		auth, err := (&api.Client{BaseURL: e.URL}).VMAuth(context.Background(), sub.ID, job.OTP)
		if err != nil {
			tb.Fatalf("vm auth: %v", err)
		}
		lb.VM = auth.VMToken
	}
	return lb
}

// biResultBody is a worker result as a multipart body.
func biResultBody(j *api.Job, success bool, extra ...biPart) []byte {
	parts := []biPart{biField("build_id", j.ID), biField("attempt_id", j.AttemptID), biField("lease_token", j.LeaseToken),
		biField("success", fmt.Sprint(success))}
	return biMultipart(biBoundary, append(parts, extra...)...)
}

func biHeartbeatBody(j *api.Job) []byte {
	b, _ := json.Marshal(api.HeartbeatRequest{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken})
	return b
}

// ---------------------------------------------------------------------------
// State: what the database and the file store hold.

// biFiles lists every non-directory entry below root, relative, sorted.
func biFiles(tb testing.TB, root string) []string {
	tb.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("walk %s: %v", root, err)
	}
	slices.Sort(out)
	return out
}

func biBuildsDir(e *env) string { return filepath.Join(e.dataDir, "files", "builds") }

func biQueryString(tb testing.TB, e *env, sql string, args ...any) string {
	tb.Helper()
	var s *string
	if err := e.store.Pool().QueryRow(context.Background(), sql, args...).Scan(&s); err != nil {
		tb.Fatalf("query %q: %v", sql, err)
	}
	if s == nil {
		return ""
	}
	return *s
}

func biCount(tb testing.TB, e *env, sql string, args ...any) int {
	tb.Helper()
	var n int
	if err := e.store.Pool().QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		tb.Fatalf("query %q: %v", sql, err)
	}
	return n
}

// biFingerprint summarises everything a request could change: builds,
// attempts (with their OTP/VM-token state), artifacts, logs, workers, API
// keys and every file under the data directory. Columns that every
// authenticated request touches (last_seen_at, tokens) are left out.
func biFingerprint(tb testing.TB, e *env) string {
	tb.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT string_agg(concat_ws(':', id, status, cancel_requested, log_length, attempt_id, attempts, phase, progress,
			error_code, worker_id, has_certs, certs_deleted_at IS NULL), E'\n' ORDER BY id) FROM builds`,
		`SELECT string_agg(concat_ws(':', id, build_id, status, otp_hash IS NULL, vm_token_hash IS NULL, encode(lease_token_hash, 'hex'),
			result IS NULL), E'\n' ORDER BY id) FROM build_attempts`,
		`SELECT string_agg(concat_ws(':', build_id, name, size, sha256), E'\n' ORDER BY build_id, name) FROM artifacts`,
		`SELECT string_agg(concat_ws(':', build_id, byte_offset, encode(sha256(data), 'hex')), E'\n' ORDER BY build_id, byte_offset) FROM build_logs`,
		`SELECT string_agg(concat_ws(':', id, status, instance_id, builds_completed, builds_failed), E'\n' ORDER BY id) FROM workers`,
		`SELECT string_agg(concat_ws(':', id, role, revoked_at IS NULL), E'\n' ORDER BY id) FROM api_keys`,
	} {
		b.WriteString(biQueryString(tb, e, q))
		b.WriteString("\n--\n")
	}
	b.WriteString(strings.Join(biFiles(tb, e.dataDir), "\n"))
	return b.String()
}

// biUnchanged fails the test when the state differs from before.
func biUnchanged(tb testing.TB, e *env, before string) {
	tb.Helper()
	if after := biFingerprint(tb, e); after != before {
		tb.Errorf("the request changed state:\n--- before\n%s\n--- after\n%s", before, after)
	}
}

// biOrphanDirs lists directories under files/builds that belong to no build.
func biOrphanDirs(tb testing.TB, e *env) []string {
	tb.Helper()
	ents, err := os.ReadDir(biBuildsDir(e))
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, en := range ents {
		if biCount(tb, e, `SELECT count(*) FROM builds WHERE id = $1`, en.Name()) == 0 {
			out = append(out, en.Name())
		}
	}
	return out
}

// biEventually retries check (which returns "" when satisfied) for up to d.
func biEventually(tb testing.TB, d time.Duration, check func() string) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			tb.Errorf("after %v: %s", d, msg)
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------------
// Credentials

func TestBadCredentials(t *testing.T) {
	t.Parallel()
	e := newEnv(t, noRateLimits)
	ctx := context.Background()
	vmc := &api.Client{BaseURL: e.URL}

	wA := biRegister(t, e, "worker-a", api.PlatformAndroid)
	A := biStartLive(t, e, wA, api.PlatformAndroid, nil, true)
	wB := biRegister(t, e, "worker-b", api.PlatformIOS)
	B := biStartLive(t, e, wB, api.PlatformIOS, biValidCerts(t, "B-SECRET-CERT"), true)
	if _, err := vmc.AppendLog(ctx, B.ID, B.VM, 0, []byte("B-SECRET-LOG\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := vmc.UploadArtifact(ctx, B.ID, B.VM, "b.ipa", strings.NewReader("B-SECRET-ARTIFACT"), ""); err != nil {
		t.Fatal(err)
	}
	// C is claimed and acknowledged, its OTP not yet exchanged.
	wC := biRegister(t, e, "worker-c", api.PlatformAndroid)
	C := biStartLive(t, e, wC, api.PlatformAndroid, nil, false)
	u := e.URL
	noSecretOfB := func(t *testing.T, r biReply) {
		t.Helper()
		for _, s := range []string{"B-SECRET", string(B.Src[:20])} {
			if bytes.Contains(r.Body, []byte(s)) {
				t.Errorf("answer carries build B's data %q: %s", s, biClip(r.Body))
			}
		}
	}

	// Every endpoint that needs an API key, with a request that would succeed with the right one.
	type call struct {
		method, path string
		body         []byte
		hdr          []string
	}
	workerCalls := func(w *biWorker, j *api.Job) []call {
		return []call{
			{"POST", "/api/workers/register", []byte(`{"name":"intruder"}`), []string{"Content-Type", "application/json"}},
			{"GET", "/api/workers/poll?wait=0", nil, []string{api.HeaderWorkerToken, w.Token}},
			{"POST", "/api/workers/heartbeat", biHeartbeatBody(j), []string{api.HeaderWorkerToken, w.Token, "Content-Type", "application/json"}},
			{"POST", "/api/workers/upload", biResultBody(j, false), []string{api.HeaderWorkerToken, w.Token, "Content-Type", biMPType(biBoundary)}},
			{"POST", "/api/workers/unregister", []byte(`{}`), []string{api.HeaderWorkerToken, w.Token}},
			{"GET", "/api/builds/" + j.ID + "/source", nil, []string{api.HeaderWorkerToken, w.Token}},
		}
	}
	newSource := project(t, map[string]string{"package.json": "{}"})
	developerCalls := []call{
		{"POST", "/api/builds", biMultipart(biBoundary, biField("platform", "android"), biFile("source", "s.tar.gz", newSource)),
			[]string{"Content-Type", biMPType(biBoundary)}},
		{"GET", "/api/builds", nil, nil},
		{"GET", "/api/builds/" + B.ID, nil, nil},
		{"GET", "/api/builds/" + B.ID + "/logs", nil, nil},
		{"GET", "/api/builds/" + B.ID + "/artifacts/b.ipa", nil, nil},
		{"POST", "/api/builds/" + B.ID + "/cancel", nil, nil},
		{"POST", "/api/builds/" + B.ID + "/retry", nil, nil},
		{"GET", "/api/workers", nil, nil},
	}
	do := func(t *testing.T, c call, extra ...string) biReply {
		t.Helper()
		return biSend(t, c.method, u+c.path, c.body, append(slices.Clone(c.hdr), extra...)...)
	}

	t.Run("missing API key", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, c := range append(workerCalls(wA, A.Job), developerCalls...) {
			r := do(t, c)
			r.wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
			noSecretOfB(t, r)
		}
		biUnchanged(t, e, before)
	})

	t.Run("unknown API key", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, key := range []string{"fak_" + strings.Repeat("A", 43), "garbage", e.devKey + "x", strings.Repeat("k", 5000)} {
			for _, c := range append(workerCalls(wA, A.Job), developerCalls...) {
				r := do(t, c, api.HeaderAPIKey, key)
				r.wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
				noSecretOfB(t, r)
			}
		}
		biUnchanged(t, e, before)
	})

	t.Run("revoked API key", func(t *testing.T) {
		dk, dev, err := e.store.CreateKey(ctx, "dev-to-revoke", api.RoleDeveloper)
		if err != nil {
			t.Fatal(err)
		}
		wk, wrk, err := e.store.CreateKey(ctx, "worker-to-revoke", api.RoleWorker)
		if err != nil {
			t.Fatal(err)
		}
		// Both work (and are cached) before the revocation.
		biSend(t, "GET", u+"/api/builds", nil, api.HeaderAPIKey, dev).wantOK(t, http.StatusOK, nil)
		// A worker token works only with the key that registered it.
		reg, err := (&api.Client{BaseURL: u, APIKey: wrk}).Register(ctx, api.RegisterRequest{Name: "to-revoke", Capabilities: api.Capabilities{Platforms: []string{"ios"}}})
		if err != nil {
			t.Fatal(err)
		}
		biSend(t, "GET", u+"/api/workers/poll?wait=0", nil, api.HeaderAPIKey, wrk, api.HeaderWorkerToken, reg.AccessToken).wantOK(t, http.StatusOK, nil)
		for _, id := range []string{dk.ID, wk.ID} {
			if err := e.store.RevokeKey(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(10 * time.Millisecond) // past the env's key-cache TTL (1 ns)
		before := biFingerprint(t, e)
		for _, c := range developerCalls {
			r := do(t, c, api.HeaderAPIKey, dev)
			r.wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
			noSecretOfB(t, r)
		}
		for _, c := range workerCalls(wA, A.Job) {
			do(t, c, api.HeaderAPIKey, wrk).wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
		}
		biSend(t, "GET", u+"/api/workers/poll?wait=0", nil, api.HeaderAPIKey, wrk, api.HeaderWorkerToken, reg.AccessToken).wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
		biUnchanged(t, e, before)
	})

	t.Run("developer key on worker endpoints", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, c := range workerCalls(wA, A.Job) {
			if strings.HasSuffix(c.path, "/source") {
				continue // the source endpoint takes a worker token only with a worker/admin key; below
			}
			do(t, c, api.HeaderAPIKey, e.devKey).wantError(t, http.StatusForbidden, api.CodeForbidden)
		}
		r := biSend(t, "GET", u+"/api/builds/"+A.ID+"/source", nil, api.HeaderAPIKey, e.devKey, api.HeaderWorkerToken, wA.Token)
		r.wantError(t, http.StatusForbidden, api.CodeForbidden)
		biUnchanged(t, e, before)
	})

	t.Run("worker key on developer endpoints", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, c := range developerCalls {
			r := do(t, c, api.HeaderAPIKey, e.workKey)
			r.wantError(t, http.StatusForbidden, api.CodeForbidden)
			noSecretOfB(t, r)
		}
		biUnchanged(t, e, before)
	})

	t.Run("build token of another build", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, c := range developerCalls[2:7] { // B's GET, logs, artifact, cancel, retry
			r := do(t, c, api.HeaderBuildToken, A.Token)
			r.wantError(t, http.StatusForbidden, api.CodeForbidden)
			noSecretOfB(t, r)
		}
		biUnchanged(t, e, before)
	})

	t.Run("build token where it has no place", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, tok := range []string{"fbt_" + strings.Repeat("x", 43), "garbage"} {
			for _, c := range developerCalls[2:7] {
				r := do(t, c, api.HeaderBuildToken, tok)
				r.wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
				noSecretOfB(t, r)
			}
		}
		// B's own token is no API key: not for the list, submit, workers.
		for _, c := range []call{developerCalls[0], developerCalls[1], developerCalls[7]} {
			r := do(t, c, api.HeaderBuildToken, B.Token)
			r.wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
		}
		for _, c := range workerCalls(wA, A.Job) {
			do(t, c, api.HeaderBuildToken, A.Token).wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
		}
		biUnchanged(t, e, before)
	})

	t.Run("missing or garbage worker token", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, tok := range []string{"", "garbage", "fwt_" + strings.Repeat("A", 43), wA.Token + "x", B.VM, A.Token} {
			for _, c := range workerCalls(wA, A.Job)[1:] {
				c.hdr = slices.Clone(c.hdr)
				for i := 0; i+1 < len(c.hdr); i += 2 {
					if c.hdr[i] == api.HeaderWorkerToken {
						c.hdr[i+1] = tok
					}
				}
				do(t, c, api.HeaderAPIKey, e.workKey).wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
			}
		}
		biUnchanged(t, e, before)
	})

	t.Run("worker token of another worker", func(t *testing.T) {
		before := biFingerprint(t, e)
		// wB presents A's lease: not its attempt.
		r := biSend(t, "POST", u+"/api/workers/heartbeat", biHeartbeatBody(A.Job), api.HeaderAPIKey, e.workKey, api.HeaderWorkerToken, wB.Token)
		r.wantError(t, http.StatusConflict, api.CodeLeaseLost)
		r = biSend(t, "POST", u+"/api/workers/upload", biResultBody(A.Job, true, biFile("result", "evil.apk", []byte("EVIL"))),
			api.HeaderAPIKey, e.workKey, api.HeaderWorkerToken, wB.Token, "Content-Type", biMPType(biBoundary))
		r.wantError(t, http.StatusConflict, api.CodeLeaseLost)
		// The source of a build the worker does not hold.
		r = biSend(t, "GET", u+"/api/builds/"+B.ID+"/source", nil, api.HeaderAPIKey, e.workKey, api.HeaderWorkerToken, wA.Token)
		r.wantError(t, http.StatusForbidden, api.CodeForbidden)
		noSecretOfB(t, r)
		biUnchanged(t, e, before)
	})

	t.Run("VM token of another build", func(t *testing.T) {
		before := biFingerprint(t, e)
		vm := []string{api.HeaderVMToken, A.VM}
		r := biSend(t, "GET", u+"/api/builds/"+B.ID+"/source", nil, vm...)
		r.wantError(t, http.StatusForbidden, api.CodeForbidden)
		noSecretOfB(t, r)
		r = biSend(t, "GET", u+"/api/builds/"+B.ID+"/certs-secure", nil, vm...)
		r.wantError(t, http.StatusForbidden, api.CodeForbidden)
		noSecretOfB(t, r)
		r = biSend(t, "POST", u+"/api/builds/"+B.ID+"/logs?offset=13", []byte("injected\n"), append(vm, "Content-Type", "application/octet-stream")...)
		r.wantError(t, http.StatusForbidden, api.CodeForbidden)
		r = biSend(t, "POST", u+"/api/builds/"+B.ID+"/artifacts", biMultipart(biBoundary, biFile("artifact", "evil.ipa", []byte("EVIL"))),
			append(vm, "Content-Type", biMPType(biBoundary))...)
		r.wantError(t, http.StatusForbidden, api.CodeForbidden)
		// A VM token is not a developer credential either.
		for _, c := range developerCalls {
			do(t, c, vm...).wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
		}
		biUnchanged(t, e, before)
	})

	t.Run("missing or garbage VM token", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, tok := range []string{"", "garbage", "fvt_" + strings.Repeat("A", 43), B.Token, C.Job.OTP, C.Job.LeaseToken} {
			vm := []string{api.HeaderVMToken, tok}
			biSend(t, "GET", u+"/api/builds/"+B.ID+"/certs-secure", nil, vm...).wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
			biSend(t, "POST", u+"/api/builds/"+B.ID+"/logs?offset=13", []byte("x"), vm...).wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
			biSend(t, "POST", u+"/api/builds/"+B.ID+"/artifacts", biMultipart(biBoundary, biFile("artifact", "x", []byte("x"))),
				append(vm, "Content-Type", biMPType(biBoundary))...).wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
			if tok != "" { // without a VM token the source endpoint asks for a worker's credentials: also 401
				biSend(t, "GET", u+"/api/builds/"+B.ID+"/source", nil, vm...).wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
			}
		}
		biSend(t, "GET", u+"/api/builds/"+B.ID+"/source", nil).wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
		biUnchanged(t, e, before)
	})

	t.Run("OTP of another build, malformed, missing", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, h := range [][]string{
			{api.HeaderOTP, C.Job.OTP, api.HeaderBuildID, B.ID},
			{api.HeaderOTP, C.Job.OTP, api.HeaderBuildID, store.NewID()},
			{api.HeaderOTP, C.Job.OTP, api.HeaderBuildID, "../" + C.ID},
			{api.HeaderOTP, C.Job.OTP},
			{api.HeaderBuildID, C.ID},
			{api.HeaderOTP, "fot_" + strings.Repeat("A", 43), api.HeaderBuildID, C.ID},
			{api.HeaderOTP, C.Job.LeaseToken, api.HeaderBuildID, C.ID},
		} {
			biSend(t, "POST", u+"/api/vm/auth", nil, h...).wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
		}
		biUnchanged(t, e, before)
		// None of that consumed C's OTP.
		if _, err := vmc.VMAuth(ctx, C.ID, C.Job.OTP); err != nil {
			t.Fatalf("C's OTP after the failed attempts: %v", err)
		}
	})

	t.Run("reused OTP", func(t *testing.T) {
		before := biFingerprint(t, e)
		for _, lb := range []*biLive{A, B, C} { // all three were exchanged once already
			biSend(t, "POST", u+"/api/vm/auth", nil, api.HeaderOTP, lb.Job.OTP, api.HeaderBuildID, lb.ID).
				wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
		}
		biUnchanged(t, e, before)
	})

	t.Run("VM token after the attempt ended", func(t *testing.T) {
		auth, err := vmc.VMAuth(ctx, C.ID, C.Job.OTP)
		if api.StatusOf(err) != http.StatusUnauthorized {
			t.Fatalf("third use of C's OTP: %+v %v", auth, err)
		}
		// A fresh build D, VM authenticated, then ended by its worker.
		wD := biRegister(t, e, "worker-d", api.PlatformAndroid)
		D := biStartLive(t, e, wD, api.PlatformAndroid, nil, true)
		if _, err := e.worker.Upload(ctx, wD.Token, api.Result{BuildID: D.ID, AttemptID: D.Job.AttemptID, LeaseToken: D.Job.LeaseToken,
			Success: false, ErrorMessage: "compile failed"}); err != nil {
			t.Fatal(err)
		}
		before := biFingerprint(t, e)
		vm := []string{api.HeaderVMToken, D.VM}
		biSend(t, "GET", u+"/api/builds/"+D.ID+"/source", nil, vm...).wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
		biSend(t, "GET", u+"/api/builds/"+D.ID+"/certs-secure", nil, vm...).wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
		biSend(t, "POST", u+"/api/builds/"+D.ID+"/logs?offset=0", []byte("late\n"), vm...).wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
		biSend(t, "POST", u+"/api/builds/"+D.ID+"/artifacts", biMultipart(biBoundary, biFile("artifact", "late.apk", []byte("late"))),
			append(vm, "Content-Type", biMPType(biBoundary))...).wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
		// And the ended attempt's OTP is dead too.
		biSend(t, "POST", u+"/api/vm/auth", nil, api.HeaderOTP, D.Job.OTP, api.HeaderBuildID, D.ID).wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
		biUnchanged(t, e, before)
	})

	t.Run("worker token after unregister", func(t *testing.T) {
		wE := biRegister(t, e, "worker-e", api.PlatformAndroid)
		if _, err := e.worker.Unregister(ctx, wE.Token); err != nil {
			t.Fatal(err)
		}
		before := biFingerprint(t, e)
		biSend(t, "GET", u+"/api/workers/poll?wait=0", nil, api.HeaderAPIKey, e.workKey, api.HeaderWorkerToken, wE.Token).
			wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
		biUnchanged(t, e, before)
	})

	// After all of it, A and B are untouched and their rightful owners still
	// work (B's artifact shows once its attempt ends the build).
	if b := e.build(B.ID); b.Status != api.StatusBuilding || b.CancelRequested || b.LogLength != 13 || len(b.Artifacts) != 0 {
		t.Errorf("build B after the attacks: %+v", b)
	}
	if _, err := (&api.Client{BaseURL: u, BuildToken: B.Token}).GetBuild(ctx, B.ID); err != nil {
		t.Errorf("B's own token: %v", err)
	}
	if _, err := vmc.CertsSecure(ctx, B.ID, B.VM); err != nil {
		t.Errorf("B's own VM token: %v", err)
	}
}

// ---------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------
// Multipart: submit

func TestBadSubmit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.URL
	src := project(t, map[string]string{"package.json": `{"name":"app"}`})
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

// ---------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------
// Truncated uploads over a raw connection

// biSendTruncated writes a request whose Content-Length announces body but
// sends only its first half. With abrupt it then resets the connection;
// otherwise it half-closes and returns the answer.
func biSendTruncated(t *testing.T, e *env, path string, body []byte, abrupt bool, hdr ...string) (status int, answer []byte) {
	t.Helper()
	pu, err := url.Parse(e.URL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", pu.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var head bytes.Buffer
	fmt.Fprintf(&head, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", path, pu.Host, len(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		fmt.Fprintf(&head, "%s: %s\r\n", hdr[i], hdr[i+1])
	}
	head.WriteString("\r\n")
	if _, err := conn.Write(append(head.Bytes(), body[:len(body)/2]...)); err != nil {
		t.Fatal(err)
	}
	tc := conn.(*net.TCPConn)
	if abrupt {
		time.Sleep(100 * time.Millisecond) // let the server start on the body
		tc.SetLinger(0)                    // close with a reset
		tc.Close()
		return 0, nil
	}
	tc.CloseWrite()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read the answer to a truncated request: %v", err)
	}
	defer resp.Body.Close()
	answer, _ = io.ReadAll(resp.Body)
	return resp.StatusCode, answer
}

func TestTruncatedUploads(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	big := biGzipLike(200 << 10)

	t.Run("submit", func(t *testing.T) {
		body := biMultipart(biBoundary, biField("platform", "android"), biFile("source", "s.tar.gz", big))
		for _, abrupt := range []bool{false, true} {
			status, answer := biSendTruncated(t, e, "/api/builds", body, abrupt, api.HeaderAPIKey, e.devKey, "Content-Type", biMPType(biBoundary))
			if !abrupt {
				biReply{Status: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: answer}.
					wantError(t, http.StatusBadRequest, api.CodeBadRequest)
			}
			biEventually(t, 3*time.Second, func() string {
				if n := biCount(t, e, `SELECT count(*) FROM builds`); n != 0 {
					return fmt.Sprintf("%d builds rows after a truncated submit", n)
				}
				if ents, _ := os.ReadDir(biBuildsDir(e)); len(ents) != 0 {
					return fmt.Sprintf("left under files/builds: %v (dirs %d)", biFiles(t, biBuildsDir(e)), len(ents))
				}
				return ""
			})
		}
	})

	t.Run("worker result", func(t *testing.T) {
		w := biRegister(t, e, "mac", api.PlatformAndroid)
		R := biStartLive(t, e, w, api.PlatformAndroid, nil, false)
		body := biResultBody(R.Job, true, biFile("result", "app.apk", big))
		want := []string{R.ID + "/source"}
		for _, abrupt := range []bool{false, true} {
			status, answer := biSendTruncated(t, e, "/api/workers/upload", body, abrupt,
				api.HeaderAPIKey, e.workKey, api.HeaderWorkerToken, w.Token, "Content-Type", biMPType(biBoundary))
			if !abrupt {
				biReply{Status: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: answer}.
					wantError(t, http.StatusBadRequest, api.CodeBadRequest)
			}
			biEventually(t, 3*time.Second, func() string {
				if got := biFiles(t, biBuildsDir(e)); !slices.Equal(got, want) {
					return fmt.Sprintf("files after a truncated result upload: %v, want %v", got, want)
				}
				return ""
			})
			if b := e.build(R.ID); b.Status != api.StatusBuilding || len(b.Artifacts) != 0 {
				t.Errorf("build after a truncated result upload: %s %v", b.Status, b.Artifacts)
			}
			if n := biCount(t, e, `SELECT count(*) FROM artifacts`); n != 0 {
				t.Errorf("%d artifact rows", n)
			}
		}
		// The worker's next, complete upload still goes through.
		res, err := e.worker.Upload(context.Background(), w.Token, api.Result{BuildID: R.ID, AttemptID: R.Job.AttemptID,
			LeaseToken: R.Job.LeaseToken, Success: true, FileName: "app.apk", File: bytes.NewReader(big)})
		if err != nil || res.Status != api.StatusCompleted {
			t.Fatalf("complete upload after truncated ones: %+v %v", res, err)
		}
	})

	t.Run("VM artifact", func(t *testing.T) {
		w := biRegister(t, e, "mac-2", api.PlatformIOS)
		R := biStartLive(t, e, w, api.PlatformIOS, nil, true)
		before := biFiles(t, biBuildsDir(e))
		body := biMultipart(biBoundary, biFile("artifact", "app.ipa", big))
		for _, abrupt := range []bool{false, true} {
			status, answer := biSendTruncated(t, e, "/api/builds/"+R.ID+"/artifacts", body, abrupt, api.HeaderVMToken, R.VM, "Content-Type", biMPType(biBoundary))
			if !abrupt {
				biReply{Status: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: answer}.
					wantError(t, http.StatusBadRequest, api.CodeBadRequest)
			}
			biEventually(t, 3*time.Second, func() string {
				if got := biFiles(t, biBuildsDir(e)); !slices.Equal(got, before) {
					return fmt.Sprintf("files after a truncated artifact upload: %v, want %v", got, before)
				}
				return ""
			})
			if n := biCount(t, e, `SELECT count(*) FROM artifacts WHERE build_id = $1`, R.ID); n != 0 {
				t.Errorf("%d artifact rows", n)
			}
		}
	})
}

// ---------------------------------------------------------------------------
// Size limits

func TestOversizedBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(_ *store.Config, l *httpapi.Limits) {
		l.Source, l.Certs, l.Artifact, l.JSONBody, l.LogChunk, l.LogTotal = 64<<10, 8<<10, 64<<10, 4<<10, 1<<10, 4<<10
		l.Credentials = 4 << 10
	})
	u := e.URL
	ct := biMPType(biBoundary)
	src := project(t, map[string]string{"package.json": "{}"})

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

// ---------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------
// Methods, paths and query parameters

func TestWrongMethodsAndPaths(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.URL
	sub, _ := biSubmit(t, e, api.PlatformAndroid, nil)
	before := biFingerprint(t, e)
	for _, c := range []struct{ method, path string }{
		{"DELETE", "/api/builds"},
		{"PUT", "/api/builds"},
		{"PATCH", "/api/builds/" + sub.ID},
		{"DELETE", "/api/builds/" + sub.ID},
		{"GET", "/api/builds/" + sub.ID + "/cancel"},
		{"GET", "/api/builds/" + sub.ID + "/retry"},
		{"PUT", "/api/builds/" + sub.ID + "/logs"},
		{"GET", "/api/builds/" + sub.ID + "/artifacts"},
		{"DELETE", "/api/builds/" + sub.ID + "/artifacts/x"},
		{"GET", "/api/workers/register"},
		{"POST", "/api/workers/poll"},
		{"GET", "/api/workers/heartbeat"},
		{"GET", "/api/vm/auth"},
		{"GET", "/api"},
		{"GET", "/api/"},
		{"GET", "/api/builds/" + sub.ID + "/nope"},
		{"GET", "/api/builds/" + sub.ID + "/artifacts/a/b"},
		{"POST", "/api/workers/register/extra"},
	} {
		r := biSend(t, c.method, u+c.path, nil, api.HeaderAPIKey, e.adminKey)
		switch r.Status {
		case http.StatusNotFound:
			r.wantError(t, http.StatusNotFound, api.CodeNotFound)
		case http.StatusMethodNotAllowed:
		default:
			t.Errorf("%s %s: want 404 or 405, got %d: %s", c.method, c.path, r.Status, biClip(r.Body))
		}
	}
	// Outside /api/ the paths are the dashboard's: a page saying so.
	for _, c := range []struct{ method, path string }{{"POST", "/health"}, {"GET", "/nope"}} {
		r := biSend(t, c.method, u+c.path, nil, api.HeaderAPIKey, e.adminKey)
		if r.Status != http.StatusNotFound || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
			t.Errorf("%s %s: want the dashboard's 404 page, got %d %s: %s", c.method, c.path, r.Status, r.Header.Get("Content-Type"), biClip(r.Body))
		}
	}
	biUnchanged(t, e, before)
}

func TestBadQueryParameters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.URL
	w := biRegister(t, e, "mac", api.PlatformAndroid)
	before := biFingerprint(t, e)
	for _, c := range []struct{ query, field string }{
		{"limit=0", "limit"}, {"limit=201", "limit"}, {"limit=abc", "limit"}, {"limit=-5", "limit"},
		{"status=bogus", "status"}, {"status=PENDING", "status"}, {"platform=windows", "platform"},
		{"cursor=garbage!", "cursor"}, {"cursor=" + url.QueryEscape("Z2FyYmFnZQ"), "cursor"},
	} {
		biSend(t, "GET", u+"/api/builds?"+c.query, nil, api.HeaderAPIKey, e.devKey).wantFieldError(t, http.StatusUnprocessableEntity, c.field)
	}
	for _, wait := range []string{"-1", "abc", "1.5", "99999999999999999999"} {
		biSend(t, "GET", u+"/api/workers/poll?wait="+wait, nil, api.HeaderAPIKey, e.workKey, api.HeaderWorkerToken, w.Token).
			wantFieldError(t, http.StatusUnprocessableEntity, "wait")
	}
	biUnchanged(t, e, before)
}

// ---------------------------------------------------------------------------
// Text that Postgres cannot store: NUL bytes and invalid UTF-8 reaching a
// text or jsonb column. The contract answers bad fields with 400/422 naming
// the field; a worker's free-text error report must still be recorded.

func TestUnstorableText(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.URL
	ctx := context.Background()
	ct := biMPType(biBoundary)
	src := project(t, map[string]string{"package.json": "{}"})

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

// ---------------------------------------------------------------------------
// Build specs, build credentials, project variables and farm credentials

func TestBadSpecAndCredentials(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.URL
	src := project(t, map[string]string{"package.json": `{"name":"app"}`})
	ct := biMPType(biBoundary)
	submit := func(t *testing.T, parts ...biPart) biReply {
		t.Helper()
		return biSend(t, "POST", u+"/api/builds", biMultipart(biBoundary, append(parts, biFile("source", "s.tar.gz", src))...),
			api.HeaderAPIKey, e.devKey, "Content-Type", ct)
	}
	specJSON := func(edit func(*api.BuildSpec)) string {
		s := androidSpec("good-app", "preview")
		edit(s)
		b, _ := json.Marshal(s)
		return string(b)
	}
	credsJSON := func(edit func(*api.AndroidKeystore)) []byte {
		k := testKeystore()
		edit(k)
		b, _ := json.Marshal(api.BuildCredentials{Android: k})
		return b
	}
	iosSpecJSON := func(edit func(*api.BuildSpec)) string {
		s := iosSpec("good-app", "preview")
		edit(s)
		b, _ := json.Marshal(s)
		return string(b)
	}
	iosCredsJSON := func(edit func(map[string]api.IOSTargetCredentials)) []byte {
		m := testIOSCredentials()
		edit(m)
		b, _ := json.Marshal(api.BuildCredentials{IOS: m})
		return b
	}
	android := biField("platform", "android")
	ios := biField("platform", "ios")
	before := biFingerprint(t, e)
	for _, c := range []struct {
		name   string
		parts  []biPart
		status int
		field  string
	}{
		{"spec not JSON", []biPart{android, biField("spec", "{not json")}, 400, "spec"},
		{"spec wrong type", []biPart{android, biField("spec", `{"version":"1"}`)}, 422, "version"},
		{"spec autoIncrement", []biPart{android, biField("spec", `{"version":1,"profile":{"autoIncrement":3}}`)}, 422, "autoIncrement"},
		{"spec version", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.Version = 2 }))}, 422, "version 2"},
		{"spec version 0", []biPart{android, biField("spec", `{}`)}, 422, "version 0"},
		{"spec platform", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.Platform = "ios" }))}, 422, "platform"},
		{"spec platform last", []biPart{biField("spec", specJSON(func(s *api.BuildSpec) {})), biField("platform", "ios")}, 422, "platform"},
		{"empty slug", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.App.Slug = "" }))}, 422, "app.slug"},
		{"bad slug", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.App.Slug = "my app/../x" }))}, 422, "app.slug"},
		{"long slug", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.App.Slug = strings.Repeat("a", 129) }))}, 422, "app.slug"},
		{"no environment", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.Environment = "" }))}, 422, "environment"},
		{"short environment", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.Environment = "qa" }))}, 422, "environment"},
		{"upper environment", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.Environment = "Production" }))}, 422, "environment"},
		{"long profile", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.ProfileName = strings.Repeat("p", 101) }))}, 422, "profile_name"},
		{"credentials source", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.Credentials.Source = "cloud" }))}, 422, "credentials.source"},
		{"remote without fingerprint", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.Credentials.Source = "remote" }))}, 422, "certificate_sha256"},
		{"bad fingerprint", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) {
			s.Credentials = api.CredentialsInfo{Source: "remote", Android: &api.KeystoreInfo{CertificateSHA256: "AB:CD"}}
		}))}, 422, "certificate_sha256"},
		{"bad credential name", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) {
			s.Credentials = api.CredentialsInfo{Source: "remote", Android: &api.KeystoreInfo{Name: "../x", CertificateSHA256: strings.Repeat("a", 64)}}
		}))}, 422, "credentials.android.name"},
		{"NUL in spec", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.Message = "a\x00b" }))}, 422, "NUL"},
		{"two specs", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) {})), biField("spec", specJSON(func(s *api.BuildSpec) {}))}, 400, "spec"},
		{"credentials not JSON", []biPart{android, biFile("credentials", "c.json", []byte("nope"))}, 400, "credentials"},
		{"credentials empty", []biPart{android, biFile("credentials", "c.json", []byte(`{}`))}, 422, "credentials"},
		{"no keystore bytes", []biPart{android, biFile("credentials", "c.json", credsJSON(func(k *api.AndroidKeystore) { k.Keystore = nil }))}, 422, "keystore"},
		{"no keystore password", []biPart{android, biFile("credentials", "c.json", credsJSON(func(k *api.AndroidKeystore) { k.KeystorePassword = "" }))}, 422, "keystore_password"},
		{"no alias", []biPart{android, biFile("credentials", "c.json", credsJSON(func(k *api.AndroidKeystore) { k.KeyAlias = "" }))}, 422, "key_alias"},
		{"no key password", []biPart{android, biFile("credentials", "c.json", credsJSON(func(k *api.AndroidKeystore) { k.KeyPassword = "" }))}, 422, "key_password"},
		{"keystore not base64", []biPart{android, biFile("credentials", "c.json", []byte(`{"android":{"keystore":"!!!","keystore_password":"a","key_alias":"b","key_password":"c"}}`))}, 400, "credentials"},
		{"credentials for iOS", []biPart{biField("platform", "ios"), biFile("credentials", "c.json", credsJSON(func(*api.AndroidKeystore) {}))}, 422, "ios"},
		{"iOS credentials for Android", []biPart{android, biFile("credentials", "c.json", iosCredsJSON(func(map[string]api.IOSTargetCredentials) {}))}, 422, "android"},
		{"both platforms' credentials", []biPart{android, biFile("credentials", "c.json", func() []byte {
			b, _ := json.Marshal(api.BuildCredentials{Android: testKeystore(), IOS: testIOSCredentials()})
			return b
		}())}, 422, "both"},
		{"iOS target without profile", []biPart{ios, biFile("credentials", "c.json", iosCredsJSON(func(m map[string]api.IOSTargetCredentials) {
			t := m["App"]
			t.ProvisioningProfile = nil
			m["App"] = t
		}))}, 422, "ios.App.provisioning_profile"},
		{"iOS target without certificate", []biPart{ios, biFile("credentials", "c.json", iosCredsJSON(func(m map[string]api.IOSTargetCredentials) {
			t := m["Widget"]
			t.Certificate = nil
			m["Widget"] = t
		}))}, 422, "ios.Widget.certificate"},
		{"iOS target name with slash", []biPart{ios, biFile("credentials", "c.json", iosCredsJSON(func(m map[string]api.IOSTargetCredentials) {
			m["../App"] = m["App"]
		}))}, 422, "../App"},
		{"iOS credentials and certs zip", []biPart{ios, biFile("credentials", "c.json", iosCredsJSON(func(map[string]api.IOSTargetCredentials) {})),
			biFile("certs", "certs.zip", biValidCerts(t, "zip"))}, 422, "certs"},
		{"iOS spec on Android", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.IOS = &api.IOSBuild{Scheme: "App"} }))}, 422, "ios"},
		{"iOS export method", []biPart{ios, biField("spec", iosSpecJSON(func(s *api.BuildSpec) { s.Credentials.IOS.ExportMethod = "store" }))}, 422, "export_method"},
		{"iOS target without bundle id", []biPart{ios, biField("spec", iosSpecJSON(func(s *api.BuildSpec) { s.IOS.Targets[1].BundleID = "" }))}, 422, "targets[1]"},
		{"two credentials", []biPart{android, biFile("credentials", "a.json", credsJSON(func(*api.AndroidKeystore) {})), biFile("credentials", "b.json", credsJSON(func(*api.AndroidKeystore) {}))}, 400, "credentials"},
	} {
		t.Run(c.name, func(t *testing.T) { submit(t, c.parts...).wantFieldError(t, c.status, c.field) })
	}
	if n := biCount(t, e, `SELECT count(*) FROM builds`); n != 0 {
		t.Errorf("%d builds rows, want none", n)
	}
	biEventually(t, 2*time.Second, func() string {
		if ents, _ := os.ReadDir(biBuildsDir(e)); len(ents) != 0 {
			return fmt.Sprintf("files/builds holds %v, want nothing", biFiles(t, biBuildsDir(e)))
		}
		return ""
	})
	biUnchanged(t, e, before)

	// The valid forms still work, and leave a sealed credentials file.
	var out api.SubmitResponse
	submit(t, android, biField("spec", specJSON(func(*api.BuildSpec) {})), biFile("credentials", "c.json", credsJSON(func(*api.AndroidKeystore) {}))).
		wantOK(t, http.StatusCreated, &out)
	if got := biFiles(t, biBuildsDir(e)); !slices.Equal(got, []string{out.ID + "/credentials.sealed", out.ID + "/source"}) {
		t.Errorf("files after a valid submit: %v", got)
	}
	submit(t, ios, biField("spec", iosSpecJSON(func(*api.BuildSpec) {})), biFile("credentials", "c.json", iosCredsJSON(func(map[string]api.IOSTargetCredentials) {}))).
		wantOK(t, http.StatusCreated, &out)
}

func TestBadProjectRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.URL + "/api/projects/"
	send := func(t *testing.T, method, path string, body any, key string) biReply {
		t.Helper()
		var b []byte
		if body != nil {
			if raw, ok := body.(string); ok {
				b = []byte(raw)
			} else {
				b, _ = json.Marshal(body)
			}
		}
		return biSend(t, method, u+path, b, api.HeaderAPIKey, key, "Content-Type", "application/json")
	}
	file := func(n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfe}, n)) }
	ok := api.SetVariableRequest{Name: "API_URL", Value: "https://x", Visibility: "plaintext"}
	edit := func(f func(*api.SetVariableRequest)) api.SetVariableRequest {
		r := ok
		f(&r)
		return r
	}
	ks := testKeystore()
	info := &api.KeystoreInfo{Type: "JKS", KeyAlias: "upload", CertificateSHA256: strings.Repeat("c", 64)}
	cred := func(f func(*api.AndroidKeystore, *api.KeystoreInfo)) api.SetCredentialRequest {
		k, i := *ks, *info
		f(&k, &i)
		return api.SetCredentialRequest{Android: &k, Info: &i}
	}
	before := biFingerprint(t, e)
	for _, c := range []struct {
		name, method, path string
		body               any
		status             int
		field              string
	}{
		{"bad project", "POST", "my%20app/env", ok, 422, "project"},
		{"long project", "POST", strings.Repeat("p", 129) + "/env", ok, 422, "project"},
		{"not JSON", "POST", "app/env", "{", 400, "JSON"},
		{"no name", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Name = "" }), 422, "name"},
		{"name with dash", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Name = "API-URL" }), 422, "name"},
		{"name with digit first", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Name = "1API" }), 422, "name"},
		{"long name", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Name = strings.Repeat("N", 129) }), 422, "name"},
		{"EAS_BUILD name", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Name = "EAS_BUILD_PROFILE" }), 422, "EAS_BUILD"},
		{"FREEAGENT_ name", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Name = "FREEAGENT_PLATFORM" }), 422, "FREEAGENT_"},
		{"visibility", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Visibility = "public" }), 422, "visibility"},
		{"no visibility", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Visibility = "" }), 422, "visibility"},
		{"type", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Type = "json" }), 422, "type"},
		{"long string", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Value = strings.Repeat("v", 32<<10+1) }), 422, "value"},
		{"NUL string", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Value = "a\x00b" }), 422, "value"},
		{"file not base64", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Type, r.Value = "file", "not base64!" }), 422, "value"},
		{"large file", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Type, r.Value = "file", file(256<<10+1) }), 422, "value"},
		{"bad environment", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Environments = []string{"preview", "Prod"} }), 422, "environments"},
		{"short environment", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Environments = []string{"qa"} }), 422, "environments"},
		{"list bad environment", "GET", "app/env?environment=x", nil, 422, "environment"},
		{"list bad project", "GET", "a.b/env", nil, 422, "project"},
		{"delete bad name", "DELETE", "app/env/1X", nil, 422, "variable"},
		{"delete bad environment", "DELETE", "app/env/API_URL?environment=PROD", nil, 422, "environment"},
		{"credential platform", "PUT", "app/credentials/windows/default", cred(func(*api.AndroidKeystore, *api.KeystoreInfo) {}), 422, "platform"},
		{"credential ios", "PUT", "app/credentials/ios/default", cred(func(*api.AndroidKeystore, *api.KeystoreInfo) {}), 422, "iOS"},
		{"credential name", "PUT", "app/credentials/android/a%20b", cred(func(*api.AndroidKeystore, *api.KeystoreInfo) {}), 422, "credential name"},
		{"credential not JSON", "PUT", "app/credentials/android/default", "[", 400, "JSON"},
		{"credential no android", "PUT", "app/credentials/android/default", api.SetCredentialRequest{Info: info}, 422, "android"},
		{"credential no info", "PUT", "app/credentials/android/default", api.SetCredentialRequest{Android: ks}, 422, "info"},
		{"credential empty keystore", "PUT", "app/credentials/android/default", cred(func(k *api.AndroidKeystore, _ *api.KeystoreInfo) { k.Keystore = nil }), 422, "android.keystore"},
		{"credential no password", "PUT", "app/credentials/android/default", cred(func(k *api.AndroidKeystore, _ *api.KeystoreInfo) { k.KeystorePassword = "" }), 422, "keystore_password"},
		{"credential no key password", "PUT", "app/credentials/android/default", cred(func(k *api.AndroidKeystore, _ *api.KeystoreInfo) { k.KeyPassword = "" }), 422, "key_password"},
		{"credential type", "PUT", "app/credentials/android/default", cred(func(_ *api.AndroidKeystore, i *api.KeystoreInfo) { i.Type = "BKS" }), 422, "info.type"},
		{"credential sha", "PUT", "app/credentials/android/default", cred(func(_ *api.AndroidKeystore, i *api.KeystoreInfo) { i.CertificateSHA256 = "ABC" }), 422, "certificate_sha256"},
		{"credential alias mismatch", "PUT", "app/credentials/android/default", cred(func(_ *api.AndroidKeystore, i *api.KeystoreInfo) { i.KeyAlias = "other" }), 422, "key_alias"},
	} {
		t.Run(c.name, func(t *testing.T) { send(t, c.method, c.path, c.body, e.devKey).wantFieldError(t, c.status, c.field) })
	}
	send(t, "DELETE", "app/env/API_URL", nil, e.devKey).wantError(t, http.StatusNotFound, api.CodeNotFound)
	send(t, "DELETE", "app/credentials/android/default", nil, e.devKey).wantError(t, http.StatusNotFound, api.CodeNotFound)
	// Workers and missing keys are refused.
	send(t, "POST", "app/env", ok, e.workKey).wantError(t, http.StatusForbidden, api.CodeForbidden)
	send(t, "PUT", "app/credentials/android/default", cred(func(*api.AndroidKeystore, *api.KeystoreInfo) {}), "").wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
	for _, table := range []string{"project_variables", "project_credentials"} {
		if n := biCount(t, e, `SELECT count(*) FROM `+table); n != 0 {
			t.Errorf("refused requests left %d rows in %s", n, table)
		}
	}
	if n := biCount(t, e, `SELECT count(*) FROM events WHERE entity_type = 'project'`); n != 0 {
		t.Errorf("refused requests left %d audit events", n)
	}
	biUnchanged(t, e, before)
	// The limits themselves are allowed.
	send(t, "POST", "app/env", edit(func(r *api.SetVariableRequest) {
		r.Name, r.Value = strings.Repeat("N", 128), strings.Repeat("v", 32<<10)
	}), e.devKey).
		wantOK(t, http.StatusCreated, nil)
	send(t, "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Type, r.Value = "file", file(256<<10) }), e.devKey).wantOK(t, http.StatusCreated, nil)
}
