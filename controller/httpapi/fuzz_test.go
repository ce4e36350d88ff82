package httpapi_test

// Fuzz targets for the request parsers. Each Fuzz function starts ONE real
// controller on a fresh database before f.Fuzz and sends every input through
// the real handlers. Every target asserts: never a 5xx, never a handler
// panic, a 4xx is the contract's JSON {"error", "code"} object, and the
// invariants of its endpoint (nothing left behind, nothing written outside
// the build's directory, log semantics).
//
// Request bodies that need the ids of a live attempt carry the placeholders
// $BUILD, $ATTEMPT and $LEASE, replaced before sending, so a saved failing
// input reproduces on any database.
//
//	go test -run XXX -fuzz FuzzSubmitMultipart -fuzztime 20s ./controller/httpapi/
//
// Every execution costs a few database round trips, so the engine's
// minimisation of a new interesting input (up to -fuzzminimizetime, 60 s by
// default) can stall a short run; -fuzzminimizetime 2s keeps it moving.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/serve"
	"github.com/freeagent-build/freeagent/controller/store"
)

// fzEnv is the env of harness_test.go, started from a *testing.F (newEnv
// takes a *testing.T), with the controller's error log captured so a 500 can
// be classified and a panic seen.
type fzEnv struct {
	*env
	errs *fzErrLog
}

// fzErrLog keeps the controller's error-level log entries.
type fzErrLog struct {
	mu   sync.Mutex
	msgs []string
}

func (h *fzErrLog) Levels() []logrus.Level {
	return []logrus.Level{logrus.PanicLevel, logrus.FatalLevel, logrus.ErrorLevel}
}

func (h *fzErrLog) Fire(en *logrus.Entry) error {
	msg := en.Message
	for _, k := range []string{logrus.ErrorKey, "panic", "path"} {
		if v, ok := en.Data[k]; ok {
			msg += fmt.Sprintf(" %s=%v", k, v)
		}
	}
	h.mu.Lock()
	h.msgs = append(h.msgs, msg)
	h.mu.Unlock()
	return nil
}

func (h *fzErrLog) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.msgs
	h.msgs = nil
	return m
}

func fzNewEnv(f *testing.F, opts ...envOption) *fzEnv {
	f.Helper()
	e := &env{cfg: store.DefaultConfig(), limits: httpapi.DefaultLimits()}
	e.limits.PollBackstop, e.limits.PollRecheck = 200*time.Millisecond, 200*time.Millisecond
	// A fuzz run sends thousands of requests a second with one key: the
	// rate limits would answer most of them 429 instead of parsing them.
	e.limits.RatePerKey, e.limits.RatePerWorker, e.limits.AuthFailuresPerIP = httpapi.Off, httpapi.Off, httpapi.Off
	// A fuzz run outlives the default token and lease lifetimes.
	e.cfg.TokenTTL, e.cfg.TokenRotateAfter, e.cfg.LeaseTTL = 48*time.Hour, 24*time.Hour, 48*time.Hour
	for _, o := range opts {
		o(&e.cfg, &e.limits)
	}
	errs := &fzErrLog{}
	log := logrus.New()
	log.SetOutput(io.Discard)
	log.SetLevel(logrus.WarnLevel)
	log.AddHook(errs)
	c := controllertest.Start(f, controllertest.Logger(log), byHand,
		controllertest.Configure(func(c *serve.Config) { c.Store, c.Limits = e.cfg, e.limits }))
	e.c, e.dsn, e.dataDir = c, c.DSN, c.DataDir
	e.adminKey, e.admin = c.AdminKey, c.Admin
	e.devKey, e.developer = c.DeveloperKey, c.Developer
	e.workKey, e.worker = c.WorkerKey, c.Worker
	e.adopt()
	return &fzEnv{env: e, errs: errs}
}

// check asserts what holds for every answer and returns the decoded error
// object of a 4xx.
func (fe *fzEnv) check(t *testing.T, r biReply, allowed ...int) api.ErrorResponse {
	t.Helper()
	errs := fe.errs.take()
	for _, m := range errs {
		if strings.Contains(m, "panicked") {
			t.Fatalf("handler panicked (HTTP %d): %s", r.Status, m)
		}
	}
	if r.Status >= 500 {
		t.Fatalf("HTTP %d: %s\ncontroller log: %q", r.Status, biClip(r.Body), errs)
	}
	if !slices.Contains(allowed, r.Status) {
		t.Fatalf("unexpected HTTP %d (allowed %v): %s", r.Status, allowed, biClip(r.Body))
	}
	var er api.ErrorResponse
	if r.Status >= 400 {
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Fatalf("HTTP %d with Content-Type %q: %s", r.Status, ct, biClip(r.Body))
		}
		if err := json.Unmarshal(r.Body, &er); err != nil || er.Error == "" || er.Code == "" {
			t.Fatalf("HTTP %d answer is not an error object: %s", r.Status, biClip(r.Body))
		}
	}
	return er
}

func (fe *fzEnv) send(t *testing.T, method, path string, body []byte, hdr ...string) biReply {
	t.Helper()
	fe.errs.take()
	r, err := biTrySend(method, fe.URL+path, body, hdr...)
	if err != nil {
		if strings.Contains(err.Error(), "invalid header field") {
			t.Skip("the HTTP client refuses to send this header")
		}
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// fzLeaks lists what the file store holds that it should not: directories of
// no build, temporary upload files, artifact files without a record, and
// artifact records without a file.
func fzLeaks(tb testing.TB, e *env) []string {
	tb.Helper()
	ctx := context.Background()
	builds := map[string]bool{}
	artifacts := map[string]bool{} // the file of each record, "<build>/attempts/<attempt>/artifact-<name>"
	for q, set := range map[string]map[string]bool{
		`SELECT id FROM builds`: builds,
		`SELECT build_id || '/' || CASE attempt_id WHEN '' THEN '' ELSE 'attempts/' || attempt_id || '/' END || 'artifact-' || name FROM artifacts`: artifacts,
	} {
		rows, err := e.store.Pool().Query(ctx, q)
		if err != nil {
			tb.Fatal(err)
		}
		for rows.Next() {
			var v string
			rows.Scan(&v)
			set[v] = true
		}
		rows.Close()
	}
	var out []string
	ents, err := os.ReadDir(biBuildsDir(e))
	if err != nil {
		tb.Fatal(err)
	}
	for _, d := range ents {
		id := d.Name()
		files := biFiles(tb, filepath.Join(biBuildsDir(e), id))
		if !builds[id] {
			out = append(out, "dir of no build: "+id+" "+fmt.Sprint(files))
			continue
		}
		for _, f := range files {
			switch {
			case f == blobs.SourceFile || f == blobs.CertsFile || f == blobs.CredentialsFile:
			case artifacts[id+"/"+f]:
			case strings.HasPrefix(f, blobs.AttemptsDir+"/") || strings.HasPrefix(f, blobs.ArtifactPrefix):
				out = append(out, "file without a record: "+id+"/"+f)
			default:
				out = append(out, "stray file: "+id+"/"+f)
			}
		}
	}
	for a := range artifacts {
		if _, err := os.Stat(filepath.Join(biBuildsDir(e), filepath.FromSlash(a))); err != nil {
			out = append(out, "record without a file: "+a)
		}
	}
	slices.Sort(out)
	return out
}

// fzPlaceholders replaces $BUILD, $ATTEMPT and $LEASE with a job's values.
func fzPlaceholders(b []byte, j *api.Job) []byte {
	b = bytes.ReplaceAll(b, []byte("$BUILD"), []byte(j.ID))
	b = bytes.ReplaceAll(b, []byte("$ATTEMPT"), []byte(j.AttemptID))
	return bytes.ReplaceAll(b, []byte("$LEASE"), []byte(j.LeaseToken))
}

const fzBoundary = "XyZzY"

func fzMultipart(parts ...biPart) []byte { return biMultipart(fzBoundary, parts...) }

// ---------------------------------------------------------------------------

func FuzzRegisterJSON(f *testing.F) {
	fe := fzNewEnv(f)
	for _, s := range []string{
		`{"name":"mac-mini","capabilities":{"platforms":["ios","android"],"max_concurrent_builds":2,"cpu_cores":8,"memory_gb":16,"xcode_version":"16.1","tart_version":"2.0","labels":{"rack":"a"}}}`,
		`{"id":"fixed-worker-1","name":"again"}`,
		`{"name":"x","unknown":[1,{"a":null}]}`,
		``, `{`, `null`, `[]`, `"x"`, `{"name":5}`, `{"name":""}`,
		`{"name":"x","id":"../../etc"}`,
		`{"name":"x","capabilities":{"platforms":["windows"]}}`,
		`{"name":"x","capabilities":{"max_concurrent_builds":1e400}}`,
		`{"name":"x","capabilities":{"labels":{"k":"\ud800"}}}`,
		`{"name":"a\u0000b"}`, // the NUL bug class
		`{"name":"x"} trailing`,
		"{\"name\":\"\xff\xfe\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := fe.send(t, "POST", "/api/workers/register", body, api.HeaderAPIKey, fe.workKey, "Content-Type", "application/json")
		fe.check(t, r, http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity)
		if r.Status == http.StatusOK {
			var reg api.RegisterResponse
			if err := json.Unmarshal(r.Body, &reg); err != nil || reg.ID == "" || reg.AccessToken == "" ||
				(reg.Status != "registered" && reg.Status != "re-registered") {
				t.Fatalf("register answer %s (%v)", biClip(r.Body), err)
			}
			// The new worker's token works.
			p := fe.send(t, "GET", "/api/workers/poll?wait=0", nil, api.HeaderAPIKey, fe.workKey, api.HeaderWorkerToken, reg.AccessToken)
			fe.check(t, p, http.StatusOK)
		}
	})
}

func FuzzHeartbeatJSON(f *testing.F) {
	fe := fzNewEnv(f)
	w := biRegister(f, fe.env, "hb", api.PlatformAndroid)
	R := biStartLive(f, fe.env, w, api.PlatformAndroid, nil, false)
	for _, s := range []string{
		`{"build_id":"$BUILD","attempt_id":"$ATTEMPT","lease_token":"$LEASE"}`,
		`{"build_id":"$BUILD","attempt_id":"$ATTEMPT","lease_token":"$LEASE","phase":"npm ci","progress":42}`,
		`{"build_id":"$BUILD","attempt_id":"$ATTEMPT","lease_token":"$LEASE","progress":101}`,
		`{"build_id":"$BUILD","attempt_id":"$ATTEMPT","lease_token":"flt_nope"}`,
		`{"build_id":"$BUILD","attempt_id":"$ATTEMPT"}`,
		`{"build_id":"$BUILD","attempt_id":"$ATTEMPT","lease_token":"$LEASE","phase":"a\u0000b"}`, // the NUL bug class
		`{"build_id":1}`, `{}`, `null`, ``, `{`, `[{}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := fe.send(t, "POST", "/api/workers/heartbeat", fzPlaceholders(body, R.Job), api.HeaderAPIKey, fe.workKey,
			api.HeaderWorkerToken, w.Token, "Content-Type", "application/json")
		fe.check(t, r, http.StatusOK, http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity)
		if r.Status == http.StatusOK {
			var hb api.HeartbeatResponse
			if err := json.Unmarshal(r.Body, &hb); err != nil || hb.LeaseExpiresAt.IsZero() {
				t.Fatalf("heartbeat answer %s (%v)", biClip(r.Body), err)
			}
			w.keep(hb.TokenGrant)
		}
		// A heartbeat never ends a build nor moves it to another attempt.
		if got := biQueryString(t, fe.env, `SELECT status || ':' || attempt_id FROM builds WHERE id = $1`, R.ID); got != "building:"+R.Job.AttemptID {
			t.Fatalf("build after a heartbeat: %s", got)
		}
	})
}

func FuzzSubmitMultipart(f *testing.F) {
	fe := fzNewEnv(f, func(_ *store.Config, l *httpapi.Limits) { l.Source, l.Certs, l.JSONBody = 256<<10, 16<<10, 16<<10 })
	src := controllertest.Project(f, map[string]string{"package.json": `{"name":"app"}`, "app.json": "{}"})
	certs := biValidCerts(f, "fuzz")
	valid := fzMultipart(biField("platform", "android"), biField("profile", "release"), biField("priority", "1"),
		biFile("source", "app.tar.gz", src))
	for _, seed := range []struct {
		body     []byte
		boundary string
	}{
		{valid, fzBoundary},
		{fzMultipart(biField("platform", "ios"), biFile("source", "app.zip", []byte("PK\x03\x04rest")), biFile("certs", "c.zip", certs)), fzBoundary},
		{fzMultipart(biField("platform", "android"), biField("timeout_seconds", "600"), biField("base_image", "img"), biFile("source", "a.tgz", src)), fzBoundary},
		{valid, "other"},
		{valid[:len(valid)/2], fzBoundary},
		{valid[:120], fzBoundary},
		{fzMultipart(biFile("source", "app.tar.gz", src)), fzBoundary},
		{fzMultipart(biField("platform", "android"), biFile("source", "x", []byte("not an archive"))), fzBoundary},
		{fzMultipart(biField("platform", "android"), biField("priority", "9"), biFile("source", "x", src)), fzBoundary},
		{fzMultipart(biField("platform", "ios"), biFile("source", "x", src), biFile("certs", "c.zip", []byte("PK garbage"))), fzBoundary},
		{fzMultipart(biField("platform", "android"), biField("profile", "a\x00b"), biFile("source", "x", src)), fzBoundary}, // the NUL bug class
		{[]byte("garbage"), fzBoundary},
		{nil, ""},
	} {
		f.Add(seed.body, seed.boundary)
	}
	f.Fuzz(func(t *testing.T, body []byte, boundary string) {
		r := fe.send(t, "POST", "/api/builds", body, api.HeaderAPIKey, fe.devKey, "Content-Type", "multipart/form-data; boundary="+boundary)
		fe.check(t, r, http.StatusCreated, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity)
		if r.Status == http.StatusCreated {
			var sub api.SubmitResponse
			if err := json.Unmarshal(r.Body, &sub); err != nil || !store.ValidID(sub.ID) || sub.AccessToken == "" || sub.Status != api.StatusPending {
				t.Fatalf("submit answer %s (%v)", biClip(r.Body), err)
			}
			if _, err := os.Stat(filepath.Join(biBuildsDir(fe.env), sub.ID, blobs.SourceFile)); err != nil {
				t.Fatalf("accepted build has no source file: %v", err)
			}
			// Forget it, so the next input starts from an empty store.
			if _, err := fe.store.Pool().Exec(context.Background(), `DELETE FROM builds WHERE id = $1`, sub.ID); err != nil {
				t.Fatal(err)
			}
			os.RemoveAll(filepath.Join(biBuildsDir(fe.env), sub.ID))
		}
		if n := biCount(t, fe.env, `SELECT count(*) FROM builds`); n != 0 {
			t.Fatalf("%d builds rows after a refused submit", n)
		}
		if ents, _ := os.ReadDir(biBuildsDir(fe.env)); len(ents) != 0 {
			t.Fatalf("left under files/builds: %v", biFiles(t, biBuildsDir(fe.env)))
		}
	})
}

func FuzzWorkerUploadMultipart(f *testing.F) {
	fe := fzNewEnv(f, func(_ *store.Config, l *httpapi.Limits) { l.Artifact, l.JSONBody = 256<<10, 16<<10 })
	w := biRegister(f, fe.env, "up", api.PlatformAndroid)
	cur := biStartLive(f, fe.env, w, api.PlatformAndroid, nil, false).Job
	// next gives the worker a fresh acknowledged job once the current one ended.
	next := func(tb testing.TB) *api.Job {
		biSubmit(tb, fe.env, api.PlatformAndroid, nil)
		return biClaim(tb, fe.env, w)
	}
	ids := []biPart{biField("build_id", "$BUILD"), biField("attempt_id", "$ATTEMPT"), biField("lease_token", "$LEASE")}
	with := func(parts ...biPart) []byte { return fzMultipart(append(slices.Clone(ids), parts...)...) }
	for _, seed := range []struct {
		body     []byte
		boundary string
	}{
		{with(biField("success", "true"), biFile("result", "app.apk", []byte("APK bytes"))), fzBoundary},
		{with(biField("success", "false"), biField("error_message", "gradle failed"), biField("error_code", "build_failed")), fzBoundary},
		{with(biField("success", "false"), biField("retryable", "true"), biField("error_message", "VM did not boot")), fzBoundary},
		{with(biField("success", "false"), biField("error_code", "released")), fzBoundary},
		{with(biField("success", "true")), fzBoundary},
		{with(biField("success", "maybe")), fzBoundary},
		{with(biField("success", "true"), biFile("result", "..", []byte("x"))), fzBoundary},
		{with(biField("success", "true"), biFile("result", "a.apk", []byte("x")), biFile("result", "b.apk", []byte("y"))), fzBoundary},
		{fzMultipart(biFile("result", "app.apk", []byte("x")), biField("build_id", "$BUILD")), fzBoundary},
		{fzMultipart(biField("build_id", "../../x"), biField("success", "true"), biFile("result", "app.apk", []byte("x"))), fzBoundary},
		{fzMultipart(biField("build_id", "$BUILD"), biField("attempt_id", "$ATTEMPT"), biField("lease_token", "flt_stale"),
			biField("success", "true"), biFile("result", "app.apk", []byte("x"))), fzBoundary},
		// A well-formed id of no build, with a file: the empty-directory bug.
		{fzMultipart(biField("build_id", "06h0000000000000000000000a"), biField("attempt_id", "$ATTEMPT"), biField("lease_token", "$LEASE"),
			biField("success", "true"), biFile("result", "app.apk", []byte("x"))), fzBoundary},
		{with(biField("success", "false"), biField("error_message", "bad\x00byte")), fzBoundary}, // the NUL bug class
		{with(biField("success", "true"), biFile("result", "app.apk", []byte("APK")))[:150], fzBoundary},
		{[]byte("garbage"), fzBoundary},
		{with(biField("success", "true")), "wrong"},
	} {
		f.Add(seed.body, seed.boundary)
	}
	f.Fuzz(func(t *testing.T, body []byte, boundary string) {
		r := fe.send(t, "POST", "/api/workers/upload", fzPlaceholders(body, cur), api.HeaderAPIKey, fe.workKey, api.HeaderWorkerToken, w.Token,
			"Content-Type", "multipart/form-data; boundary="+boundary)
		fe.check(t, r, http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusConflict,
			http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity)
		state := biQueryString(t, fe.env, `SELECT status || ':' || COALESCE(attempt_id, '') FROM builds WHERE id = $1`, cur.ID)
		if r.Status == http.StatusOK {
			var res api.ResultResponse
			if err := json.Unmarshal(r.Body, &res); err != nil || res.BuildID != cur.ID || res.Status == "" {
				t.Fatalf("result answer %s (%v)", biClip(r.Body), err)
			}
			if state == "building:"+cur.AttemptID {
				t.Fatalf("a result was accepted but the build is still on its attempt: %s", biClip(r.Body))
			}
		} else if state != "building:"+cur.AttemptID {
			t.Fatalf("a refused result (HTTP %d) moved the build to %s", r.Status, state)
		}
		if l := fzLeaks(t, fe.env); len(l) > 0 {
			var other []string
			for _, s := range l {
				if !strings.HasPrefix(s, "dir of no build: ") || !strings.HasSuffix(s, " []") {
					other = append(other, s)
				}
			}
			if len(other) > 0 {
				t.Fatalf("left behind: %q", other)
			}
			t.Fatalf("left behind: %q", l)
		}
		if r.Status == http.StatusOK {
			// Forget the finished build (its state was checked), then take the next job.
			if _, err := fe.store.Pool().Exec(context.Background(), `DELETE FROM builds WHERE id = $1`, cur.ID); err != nil {
				t.Fatal(err)
			}
			os.RemoveAll(filepath.Join(biBuildsDir(fe.env), cur.ID))
			cur = next(t)
		}
	})
}

func FuzzLogAppend(f *testing.F) {
	const chunk, total = 2 << 10, 64 << 10 // small, so inputs (and their minimisation) stay cheap
	fe := fzNewEnv(f, func(_ *store.Config, l *httpapi.Limits) { l.LogChunk, l.LogTotal = chunk, total })
	w := biRegister(f, fe.env, "log", api.PlatformAndroid)
	R := biStartLive(f, fe.env, w, api.PlatformAndroid, nil, true)
	// A log near its limit is swapped for a new build's, so appends stay possible.
	rotate := func(t *testing.T) {
		if _, err := fe.worker.Upload(context.Background(), w.Token, api.Result{BuildID: R.ID, AttemptID: R.Job.AttemptID,
			LeaseToken: R.Job.LeaseToken, Success: false}); err != nil {
			t.Fatal(err)
		}
		R = biStartLive(t, fe.env, w, api.PlatformAndroid, nil, true)
	}
	for _, seed := range []struct {
		offset string
		data   []byte
	}{
		{"0", []byte("npm ci\n")}, {"0", []byte("npm ci\nexpo prebuild\n")}, {"3", []byte("")}, {"999", []byte("x")},
		{"-1", []byte("x")}, {"", []byte("x")}, {"abc", nil}, {"+0", []byte("y")}, {"9223372036854775807", []byte("z")},
		{"0", bytes.Repeat([]byte("big"), 1000)}, {"0x10", []byte("x")}, {" 1", []byte("x")}, {"0", []byte("\x00\xff binary")},
	} {
		f.Add(seed.offset, seed.data)
	}
	f.Fuzz(func(t *testing.T, offset string, data []byte) {
		length := func() int64 {
			n, _ := strconv.ParseInt(biQueryString(t, fe.env, `SELECT log_length::text FROM builds WHERE id = $1`, R.ID), 10, 64)
			return n
		}
		if length() > total/2 {
			rotate(t)
		}
		before := length()
		r := fe.send(t, "POST", "/api/builds/"+R.ID+"/logs?offset="+url.QueryEscape(offset), data, api.HeaderVMToken, R.VM,
			"Content-Type", "application/octet-stream")
		er := fe.check(t, r, http.StatusOK, http.StatusRequestEntityTooLarge, http.StatusRequestedRangeNotSatisfiable, http.StatusUnprocessableEntity)
		after := length()
		off, perr := strconv.ParseInt(offset, 10, 64)
		validOff := perr == nil && off >= 0
		switch r.Status {
		case http.StatusOK:
			var out api.LogAppendResponse
			if err := json.Unmarshal(r.Body, &out); err != nil {
				t.Fatalf("append answer %s: %v", biClip(r.Body), err)
			}
			if !validOff || off > before {
				t.Fatalf("offset %q accepted on a log of %d bytes", offset, before)
			}
			want := max(before, off+int64(len(data)))
			if out.Length != want || after != want {
				t.Fatalf("append %d bytes at %d to %d: answer %d, stored %d, want %d", len(data), off, before, out.Length, after, want)
			}
			if want > before { // the new tail is the sent bytes
				got, err := fe.developer.ReadLogs(context.Background(), R.ID, before)
				if err != nil || !bytes.Equal(got.Data, data[before-off:]) {
					t.Fatalf("stored tail differs from the sent bytes (%v)", err)
				}
			}
		case http.StatusRequestedRangeNotSatisfiable:
			if !validOff || off <= before || er.Length == nil || *er.Length != before || er.Code != api.CodeOffsetAhead {
				t.Fatalf("416 for offset %q on a log of %d: %s", offset, before, biClip(r.Body))
			}
		case http.StatusUnprocessableEntity:
			if validOff {
				t.Fatalf("valid offset %q refused: %s", offset, biClip(r.Body))
			}
		case http.StatusRequestEntityTooLarge:
			if len(data) <= chunk && (!validOff || off+int64(len(data)) <= total) {
				t.Fatalf("413 for %d bytes at %q: %s", len(data), offset, biClip(r.Body))
			}
		}
		if r.Status != http.StatusOK && after != before {
			t.Fatalf("a refused append (HTTP %d) changed the log length %d → %d", r.Status, before, after)
		}
	})
}

func FuzzArtifactName(f *testing.F) {
	fe := fzNewEnv(f)
	w := biRegister(f, fe.env, "art", api.PlatformIOS)
	R := biStartLive(f, fe.env, w, api.PlatformIOS, biValidCerts(f, "fuzz"), true)
	buildDir := filepath.Join(biBuildsDir(fe.env), R.ID)
	if _, err := os.Stat(filepath.Join(buildDir, blobs.CertsFile)); err != nil {
		f.Fatal(err)
	}
	baseline := biFiles(f, fe.dataDir)
	for _, s := range []string{
		"app.ipa", "../../etc/passwd", "/etc/passwd", "..\\..\\evil.exe", "..", ".", "", "a/..", "a/../", "/", "   ",
		"x\x00y", "a\x7fb", "\xff\xfe", "a\r\nX-Evil: 1", `quote"name`, "back\\slash", strings.Repeat("n", 300),
		"ünïcödé.ipa", ".upload-123", "..%2F..%2Fx", "source", "certs.sealed", // stored with the artifact prefix like any name
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		content := []byte("artifact:" + name)
		body := biMultipart(fzBoundary, biPart{file: true, data: content,
			disposition: `form-data; name="artifact"; filename="` + biQuote.Replace(name) + `"`})
		r := fe.send(t, "POST", "/api/builds/"+R.ID+"/artifacts", body, api.HeaderVMToken, R.VM, "Content-Type", biMPType(fzBoundary))
		fe.check(t, r, http.StatusCreated, http.StatusBadRequest, http.StatusUnprocessableEntity)
		files := biFiles(t, fe.dataDir)
		if r.Status != http.StatusCreated {
			if !slices.Equal(files, baseline) {
				t.Fatalf("a refused upload of %q changed the files:\n got %v\nwant %v", name, files, baseline)
			}
			return
		}
		var art api.Artifact
		if err := json.Unmarshal(r.Body, &art); err != nil {
			t.Fatalf("upload answer %s: %v", biClip(r.Body), err)
		}
		n := art.Name
		if n == "" || n == "." || n == ".." || strings.ContainsAny(n, `/\`) || len(n) > 255 || !utf8.ValidString(n) ||
			strings.IndexFunc(n, unicode.IsControl) >= 0 {
			t.Fatalf("name %q stored as unsafe name %q", name, n)
		}
		stored := "files/builds/" + R.ID + "/" + blobs.AttemptsDir + "/" + R.Job.AttemptID + "/" + blobs.ArtifactPrefix + n
		want := slices.Clone(baseline)
		if !slices.Contains(want, stored) {
			want = append(want, stored)
			slices.Sort(want)
		}
		if !slices.Equal(files, want) {
			t.Fatalf("upload of %q (stored as %q) changed other files:\n got %v\nwant %v", name, n, files, want)
		}
		if b, err := os.ReadFile(filepath.Join(fe.dataDir, filepath.FromSlash(stored))); err != nil || !bytes.Equal(b, content) {
			t.Fatalf("stored %s: %q %v", stored, b, err)
		}
		if src, _ := os.ReadFile(filepath.Join(buildDir, blobs.SourceFile)); !bytes.Equal(src, R.Src) {
			t.Fatalf("upload of %q replaced the build's source", name)
		}
		// Forget it, so the file tree stays at its baseline.
		os.Remove(filepath.Join(fe.dataDir, filepath.FromSlash(stored)))
		if _, err := fe.store.Pool().Exec(context.Background(), `DELETE FROM artifacts WHERE build_id = $1 AND name = $2`, R.ID, n); err != nil {
			t.Fatal(err)
		}
	})
}
