package httpapi_test

// Bad input: every request here is wrong in one way (credentials, JSON,
// multipart, sizes, names, ids, offsets, methods). Each case asserts the exact
// status and error code of docs/design.md's HTTP contract, and that the request
// changed nothing and left nothing behind: no rows, no files, no temporary
// files, no consumed credentials.
//
// This file holds the helpers the cases share (and fuzz_test.go uses); the
// cases live in badinput_<section>_test.go, one file per kind of bad input.

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
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
	src := controllertest.Project(tb, map[string]string{"package.json": `{"name":"app"}`, "app.json": `{"expo":{}}`, "nonce": store.NewID()})
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
