package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/store"
)

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
	newSource := controllertest.Project(t, map[string]string{"package.json": "{}"})
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
