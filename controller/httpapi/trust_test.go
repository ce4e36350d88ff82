package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/store"
)

// newKey creates an API key of role and returns a client using it.
func (e *env) newKey(name, role string) (store.APIKey, *api.Client) {
	e.t.Helper()
	k, secret, err := e.store.CreateKey(context.Background(), name, role)
	if err != nil {
		e.t.Fatal(err)
	}
	return k, &api.Client{BaseURL: e.URL, APIKey: secret}
}

// TestWorkerIdentityBoundToKey: another worker key cannot take over a
// worker's id or use its token; the registering key goes on working; once
// that key is revoked the id is free.
func TestWorkerIdentityBoundToKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w := e.register("mac-a", api.Capabilities{})
	_, other := e.newKey("mallory", "worker")

	_, err := other.Register(ctx, api.RegisterRequest{ID: w.id, Name: "mac-a"})
	wantStatus(t, err, http.StatusForbidden)
	if !strings.Contains(err.Error(), "registered with another API key") {
		t.Fatalf("the 403 does not name the problem: %v", err)
	}
	_, err = other.Poll(ctx, w.token, 0)
	wantStatus(t, err, http.StatusUnauthorized)
	_, err = e.admin.Poll(ctx, w.token, 0) // not even an admin key: the token is the registering key's
	wantStatus(t, err, http.StatusUnauthorized)
	w.poll(0) // the rightful key still works, with the same token
	if ws, err := e.admin.ListWorkers(ctx); err != nil || len(ws.Workers) != 1 || ws.Workers[0].KeyID == "" {
		t.Fatalf("workers: %+v %v", ws, err)
	}
	// The same key re-registers its own id freely.
	if reg, err := e.worker.Register(ctx, api.RegisterRequest{ID: w.id, Name: "mac-a"}); err != nil || reg.Status != "re-registered" {
		t.Fatalf("re-register with the same key: %+v %v", reg, err)
	}
	// A revoked key's ids are free for the next key.
	ks, err := e.store.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range ks {
		if k.Name == "worker" {
			if err := e.store.RevokeKey(ctx, k.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if reg, err := other.Register(ctx, api.RegisterRequest{ID: w.id, Name: "mac-a"}); err != nil || reg.Status != "re-registered" {
		t.Fatalf("register a revoked key's worker id: %+v %v", reg, err)
	}
}

// TestStaleWorkerTokenCannotDisplaceCurrent: the previous worker token,
// presented while the new one may still be on its way (a long poll holds
// it), is answered as itself and never replaces the new one; only once the
// new one has gone unused past the delivery grace does it (the answer was
// lost), so a worker is never locked out.
func TestStaleWorkerTokenCannotDisplaceCurrent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		grace     time.Duration
		displaced bool
	}{{"new token may be in flight", time.Hour, false}, {"new token lost", store.Off, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(c *store.Config, _ *httpapi.Limits) {
				c.TokenRotateAfter, c.TokenTTL, c.TokenDeliveryGrace = store.Off, time.Hour, tc.grace
			})
			ctx := context.Background()
			w := e.register("w", api.Capabilities{})
			stale := w.token
			resp, err := e.worker.Poll(ctx, stale, 0)
			if err != nil {
				t.Fatal(err)
			}
			current := resp.AccessToken
			if current == stale {
				t.Fatal("token not rotated")
			}
			for range 3 {
				resp, err = e.worker.Poll(ctx, stale, 0)
				if err != nil {
					t.Fatalf("the previous token before the new one is used: %v", err)
				}
			}
			_, err = e.worker.Poll(ctx, current, 0)
			if tc.displaced {
				wantStatus(t, err, http.StatusUnauthorized)
				if resp.AccessToken == stale || resp.AccessToken == current {
					t.Fatalf("a lost new token was not replaced: %q", resp.AccessToken)
				}
				if _, err := e.worker.Poll(ctx, resp.AccessToken, 0); err != nil {
					t.Fatalf("the replacement token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("the new token after the stale one was presented: %v", err)
			}
			if resp.AccessToken != stale {
				t.Fatalf("the stale token was answered with %q, not itself", resp.AccessToken)
			}
			_, err = e.worker.Poll(ctx, stale, 0) // retired by the new one's first use
			wantStatus(t, err, http.StatusUnauthorized)
		})
	}
}

// TestKeyCapacityCapsClaims: the workers of a key with a capacity hold at
// most that many builds together, whatever each worker announces.
func TestKeyCapacityCapsClaims(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	k, owner := e.newKey("owner", "worker")
	if err := e.store.SetKeyCapacity(ctx, k.ID, 2); err != nil {
		t.Fatal(err)
	}
	var ws []*workerSession
	for _, name := range []string{"a", "b"} {
		reg, err := owner.Register(ctx, api.RegisterRequest{Name: name, Capabilities: api.Capabilities{MaxConcurrentBuilds: 4}})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, &workerSession{e: e, id: reg.ID, token: reg.AccessToken})
	}
	for range 4 {
		e.submit("android")
	}
	pollAs := func(w *workerSession) *api.Job {
		t.Helper()
		resp, err := owner.Poll(ctx, w.token, 0)
		if err != nil {
			t.Fatal(err)
		}
		w.keep(resp.TokenGrant)
		if j := resp.Job; j != nil { // acknowledged, as an agent does
			if _, err := owner.Heartbeat(ctx, w.token, api.HeartbeatRequest{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken}); err != nil {
				t.Fatal(err)
			}
		}
		return resp.Job
	}
	var held []*api.Job
	for _, w := range []*workerSession{ws[0], ws[1], ws[0], ws[1]} {
		if j := pollAs(w); j != nil {
			held = append(held, j)
		}
	}
	if len(held) != 2 {
		t.Fatalf("the key's workers hold %d builds, cap 2", len(held))
	}
	// Another key's worker is not capped by it.
	other := e.register("c", api.Capabilities{MaxConcurrentBuilds: 4})
	if j := other.poll(0); j == nil {
		t.Fatal("an uncapped key's worker got no build")
	} else {
		other.heartbeat(j)
	}
	// A build ends: room for one more.
	var holder *workerSession
	for _, w := range ws {
		if b := e.build(held[0].ID); b.WorkerID != nil && *b.WorkerID == w.id {
			holder = w
		}
	}
	r := api.Result{Success: true, BuildID: held[0].ID, AttemptID: held[0].AttemptID, LeaseToken: held[0].LeaseToken}
	if _, err := owner.Upload(ctx, holder.token, r); err != nil {
		t.Fatal(err)
	}
	if pollAs(ws[1]) == nil {
		t.Fatal("no build after one of the capped key's builds ended")
	}
	if pollAs(ws[0]) != nil {
		t.Fatal("a build beyond the cap")
	}
}

// TestReleaseAfterCredentialsIsCountedAndAudited: a worker that hands back
// an attempt whose VM fetched the signing credentials pays an attempt for
// it and leaves an audit event; the third such release within the window
// raises its needs-attention state, which an admin acknowledges.
func TestReleaseAfterCredentialsIsCountedAndAudited(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *store.Config, _ *httpapi.Limits) { c.MaxBackoff = store.Off })
	ctx := context.Background()
	w := e.register("mac", api.Capabilities{Platforms: []string{"ios"}})
	certs := certsZip(t, map[string]string{"dist.p12": "P12", "password.txt": "pw"})
	release := func(fetch bool) string {
		t.Helper()
		sub, err := e.developer.Submit(ctx, api.SubmitRequest{Platform: "ios", Source: bytes.NewReader(controllertest.Project(t, map[string]string{"n": randomID()})),
			Certs: bytes.NewReader(certs)})
		if err != nil {
			t.Fatal(err)
		}
		job, vmToken := e.startVM(w, sub.ID)
		if fetch {
			if _, err := (&api.Client{BaseURL: e.URL}).CertsSecure(ctx, sub.ID, vmToken); err != nil {
				t.Fatal(err)
			}
		}
		res, err := w.complete(job, api.Result{Success: false, ErrorCode: api.CodeReleased, ErrorMessage: "draining"})
		if err != nil || !res.Requeued {
			t.Fatalf("release: %+v %v", res, err)
		}
		if _, err := e.admin.Cancel(ctx, sub.ID); err != nil { // out of the way of the next build
			t.Fatal(err)
		}
		return sub.ID
	}
	attempts := func(id string) int { return e.build(id).Attempts }
	needsAttention := func() bool {
		t.Helper()
		ws, err := e.admin.ListWorkers(ctx)
		if err != nil || len(ws.Workers) != 1 {
			t.Fatalf("workers: %+v %v", ws, err)
		}
		return ws.Workers[0].NeedsAttention
	}
	if id := release(false); attempts(id) != 0 {
		t.Fatalf("a release before any fetch consumed an attempt: %d", attempts(id))
	}
	var fetched []string
	for i := range 3 {
		if needsAttention() {
			t.Fatalf("needs attention after %d releases", i)
		}
		id := release(true)
		fetched = append(fetched, id)
		if attempts(id) != 1 {
			t.Fatalf("a release after the certificates were fetched is not counted: %d attempts", attempts(id))
		}
	}
	if !needsAttention() {
		t.Fatal("three releases after fetching credentials did not raise needs-attention")
	}
	e.seal()
	var audited []string
	raised := 0
	for _, ev := range e.allEvents() {
		switch ev.EventType {
		case "worker.released_after_credentials":
			if ev.EntityID != w.id {
				t.Errorf("release event on %s, want the worker %s", ev.EntityID, w.id)
			}
			for _, id := range fetched {
				if bytes.Contains(ev.Payload, []byte(id)) {
					audited = append(audited, id)
				}
			}
		case "worker.needs_attention":
			raised++
		}
	}
	if !slices.Equal(audited, fetched) || raised != 1 {
		t.Fatalf("audited releases %v of %v; needs_attention events %d", audited, fetched, raised)
	}
	if wk, err := e.admin.AcknowledgeWorker(ctx, w.id); err != nil || wk.NeedsAttention {
		t.Fatalf("acknowledge: %+v %v", wk, err)
	}
	// Only releases after the acknowledgement count towards the next raise.
	release(true)
	if needsAttention() {
		t.Fatal("raised again by releases already acknowledged")
	}
	e.requireConsistentLog()
}

// TestSecretsLeaveOncePerAttempt: the certificates, the credentials and the
// spec with its secrets are each fetched once per attempt, then 410; the
// next attempt fetches them again.
func TestSecretsLeaveOncePerAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *store.Config, _ *httpapi.Limits) { c.MaxBackoff = store.Off })
	ctx := context.Background()
	vm := &api.Client{BaseURL: e.URL}
	w := e.register("mac", api.Capabilities{})

	certs := certsZip(t, map[string]string{"dist.p12": "P12", "password.txt": "pw"})
	sub, err := e.developer.Submit(ctx, api.SubmitRequest{Platform: "ios", Source: bytes.NewReader(controllertest.Project(t, map[string]string{"a": "b"})),
		Certs: bytes.NewReader(certs)})
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 2; attempt++ {
		job, vmToken := e.startVM(w, sub.ID)
		if _, err := vm.CertsSecure(ctx, sub.ID, vmToken); err != nil {
			t.Fatalf("attempt %d: first certificates fetch: %v", attempt, err)
		}
		_, err := vm.CertsSecure(ctx, sub.ID, vmToken)
		wantStatus(t, err, http.StatusGone)
		if !strings.Contains(err.Error(), "once per attempt") {
			t.Fatalf("the 410 does not say why: %v", err)
		}
		for range 2 { // nothing secret in this build's job: no once-only rule
			if _, err := vm.BuildJob(ctx, sub.ID, vmToken); err != nil {
				t.Fatalf("attempt %d: spec fetch without secrets: %v", attempt, err)
			}
		}
		if _, err := w.complete(job, api.Result{Success: false, Retryable: true, ErrorCode: "vm_boot", ErrorMessage: "try again"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.developer.Cancel(ctx, sub.ID); err != nil {
		t.Fatal(err)
	}

	// Credentials, and a job carrying a secret variable.
	e.setVar("trust-app", api.SetVariableRequest{Name: "SENTRY_TOKEN", Value: "s3cret-value", Visibility: api.VisibilitySecret, Environments: []string{"production"}})
	ks := testKeystore()
	sub, err = e.submitSpec(androidSpec("trust-app", "production"), &api.BuildCredentials{Android: ks})
	if err != nil {
		t.Fatal(err)
	}
	_, vmToken := e.startVM(w, sub.ID)
	if got, err := vm.BuildCredentials(ctx, sub.ID, vmToken); err != nil || !bytes.Equal(got.Android.Keystore, ks.Keystore) {
		t.Fatalf("first credentials fetch: %v", err)
	}
	_, err = vm.BuildCredentials(ctx, sub.ID, vmToken)
	wantStatus(t, err, http.StatusGone)
	if job, err := vm.BuildJob(ctx, sub.ID, vmToken); err != nil || len(job.Variables) != 1 || job.Variables[0].Value != "s3cret-value" {
		t.Fatalf("first fetch of a job with a secret: %+v %v", job, err)
	}
	_, err = vm.BuildJob(ctx, sub.ID, vmToken)
	wantStatus(t, err, http.StatusGone)
	requireNoSecretInEvents(t, e, "s3cret-value")
}

// TestBuildTokenExpiresAndDiesWithItsKey: a build token works for its build
// until its TTL ends or the key that submitted the build is revoked, and
// never creates a build.
func TestBuildTokenExpiresAndDiesWithItsKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *store.Config, _ *httpapi.Limits) { c.BuildTokenTTL = 2 * time.Hour })
	ctx := context.Background()
	k, dev := e.newKey("ci", "developer")
	submit := func() api.SubmitResponse {
		t.Helper()
		sub, err := dev.Submit(ctx, api.SubmitRequest{Platform: "android", Source: bytes.NewReader(controllertest.Project(t, map[string]string{"n": randomID()}))})
		if err != nil {
			t.Fatal(err)
		}
		return sub
	}
	a, b := submit(), submit()
	if d := a.AccessTokenExpiresAt.Sub(a.SubmittedAt); d < 2*time.Hour-time.Minute || d > 2*time.Hour+time.Minute {
		t.Fatalf("token expires %s after the submit, want the configured 2h", d)
	}
	tokenA := &api.Client{BaseURL: e.URL, BuildToken: a.AccessToken}
	tokenB := &api.Client{BaseURL: e.URL, BuildToken: b.AccessToken}
	if _, err := tokenA.GetBuild(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	// Cancelled builds can be retried, but not with a build token.
	if _, err := tokenA.Cancel(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	_, err := tokenA.Retry(ctx, a.ID)
	wantStatus(t, err, http.StatusForbidden)
	if !strings.Contains(err.Error(), "developer API key") {
		t.Fatalf("the 403 does not say what works: %v", err)
	}
	// Expiry: the clock passes the token's end.
	if _, err := e.store.Pool().Exec(ctx, `UPDATE builds SET token_expires_at = now() - interval '1 second' WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	_, err = tokenA.GetBuild(ctx, a.ID)
	wantStatus(t, err, http.StatusUnauthorized)
	if !strings.Contains(err.Error(), "expired") {
		t.Fatalf("the 401 does not say the token expired: %v", err)
	}
	if _, err := tokenB.GetBuild(ctx, b.ID); err != nil {
		t.Fatalf("another build's live token: %v", err)
	}
	// Revoking the key that submitted the build ends its tokens.
	if err := e.store.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	_, err = tokenB.GetBuild(ctx, b.ID)
	wantStatus(t, err, http.StatusUnauthorized)
	if !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("the 401 does not say the key was revoked: %v", err)
	}
	_, err = tokenB.ReadLogs(ctx, b.ID, 0)
	wantStatus(t, err, http.StatusUnauthorized)
	// Other developers' tokens live on.
	c, _ := e.submit("android")
	if _, err := (&api.Client{BaseURL: e.URL, BuildToken: c.AccessToken}).GetBuild(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
}

// jobValues fetches a build's job as its VM does and maps its variables
// to their values.
func (e *env) jobValues(buildID, vmToken string) map[string]string {
	e.t.Helper()
	j, err := (&api.Client{BaseURL: e.URL}).BuildJob(context.Background(), buildID, vmToken)
	if err != nil {
		e.t.Fatalf("the VM's job: %v", err)
	}
	vals := map[string]string{}
	for _, v := range j.Variables {
		vals[v.Name] = v.Value
	}
	return vals
}

// TestVariablesFixedAtClaim: what an attempt's VM reads of its project's
// variables is fixed when its worker claims the build and checked against
// the worker's pool. A worker of an untrusted pool claims a plain build; a
// secret set afterwards never reaches its VM, however often it fetches. A
// trusted worker's VM gets exactly the variables of its claim, not ones
// set or changed later. A worker whose pool loses its trust mid-build gets
// no sensitive values (403).
func TestVariablesFixedAtClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	vm := &api.Client{BaseURL: e.URL}
	e.setVar("app", api.SetVariableRequest{Name: "PUBLIC_URL", Value: "https://example.com", Visibility: api.VisibilityPlaintext,
		Environments: []string{"production", "preview"}})

	// The probe: a borrowed Mac holds a plain production build.
	borrowed := e.register("borrowed-mac", api.Capabilities{Pool: "community", VMDriver: "tart"})
	plain, err := e.submitSpec(androidSpec("app", "production"), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, borrowedVM := e.startVM(borrowed, plain.ID)
	want := map[string]string{"PUBLIC_URL": "https://example.com"}
	if got := e.jobValues(plain.ID, borrowedVM); !reflect.DeepEqual(got, want) {
		t.Fatalf("the borrowed Mac's job: %v, want %v", got, want)
	}
	e.setVar("app", api.SetVariableRequest{Name: "STORE_API_KEY", Value: "set-after-the-claim", Visibility: api.VisibilitySecret,
		Environments: []string{"production"}})
	e.setVar("app", api.SetVariableRequest{Name: "SENTRY_DSN", Value: "sensitive-after-the-claim", Visibility: api.VisibilitySensitive,
		Environments: []string{"production"}})
	for range 2 {
		if got := e.jobValues(plain.ID, borrowedVM); !reflect.DeepEqual(got, want) {
			t.Fatalf("the borrowed Mac's job after a secret was set: %v, want %v", got, want)
		}
	}

	// A trusted worker (the default pool) gets its claim's variables only.
	e.setVar("app", api.SetVariableRequest{Name: "SENTRY_DSN", Value: "sentry-at-the-claim", Visibility: api.VisibilitySensitive,
		Environments: []string{"preview"}})
	studio := e.register("studio-mac", api.Capabilities{VMDriver: "tart"})
	preview, err := e.submitSpec(androidSpec("app", "preview"), nil)
	if err != nil {
		t.Fatal(err)
	}
	previewJob, studioVM := e.startVM(studio, preview.ID)
	e.setVar("app", api.SetVariableRequest{Name: "SENTRY_DSN", Value: "sentry-rotated", Visibility: api.VisibilitySensitive,
		Environments: []string{"preview"}})
	e.setVar("app", api.SetVariableRequest{Name: "LATE_SECRET", Value: "late-secret", Visibility: api.VisibilitySecret,
		Environments: []string{"preview"}})
	e.setVar("app", api.SetVariableRequest{Name: "PUBLIC_URL", Value: "https://changed.example.com", Visibility: api.VisibilityPlaintext,
		Environments: []string{"preview"}})
	want = map[string]string{"PUBLIC_URL": "https://example.com", "SENTRY_DSN": "sentry-at-the-claim"}
	if got := e.jobValues(preview.ID, studioVM); !reflect.DeepEqual(got, want) {
		t.Fatalf("the trusted worker's job: %v, want the variables of its claim %v", got, want)
	}

	// A pool that loses its trust while its worker holds a sensitive job.
	if _, err := e.admin.SetPool(ctx, api.Pool{Name: "lent", Trusted: true}); err != nil {
		t.Fatal(err)
	}
	lent := e.register("lent-mac", api.Capabilities{Pool: "lent", VMDriver: "tart"})
	third, err := e.submitSpec(androidSpec("app", "preview"), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, lentVM := e.startVM(lent, third.ID)
	if _, err := e.admin.SetPool(ctx, api.Pool{Name: "lent", Trusted: false}); err != nil {
		t.Fatal(err)
	}
	_, err = vm.BuildJob(ctx, third.ID, lentVM)
	wantStatus(t, err, http.StatusForbidden)
	if !strings.Contains(err.Error(), "not trusted") {
		t.Fatalf("the 403 does not say why: %v", err)
	}

	// Once an attempt ended, the sweep deletes its copies; a live one keeps its.
	if n := biCount(t, e, `SELECT count(*) FROM attempt_variables WHERE attempt_id = $1`, previewJob.AttemptID); n != 2 {
		t.Fatalf("the live attempt holds %d variables, want its claim's 2", n)
	}
	if _, err := studio.complete(previewJob, api.Result{Success: true}); err != nil {
		t.Fatal(err)
	}
	e.sweep()
	if n := biCount(t, e, `SELECT count(*) FROM attempt_variables WHERE attempt_id = $1`, previewJob.AttemptID); n != 0 {
		t.Fatalf("the ended attempt keeps %d variables after a sweep", n)
	}
	if got := e.jobValues(plain.ID, borrowedVM); !reflect.DeepEqual(got, map[string]string{"PUBLIC_URL": "https://example.com"}) {
		t.Fatalf("the live attempt's job after the sweep: %v", got)
	}
}

// TestVariablesOfAnAttemptThePreviousReleaseClaimed: an attempt claimed by
// a replica of the previous release (during a rolling upgrade) has no
// variables fixed: its VM reads the project's variables now, and sensitive
// ones only while its worker's pool is trusted.
func TestVariablesOfAnAttemptThePreviousReleaseClaimed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.setVar("app", api.SetVariableRequest{Name: "PUBLIC_URL", Value: "https://example.com", Visibility: api.VisibilityPlaintext,
		Environments: []string{"production"}})
	oldClaim := func(w *workerSession) (string, string) {
		t.Helper()
		sub, err := e.submitSpec(androidSpec("app", "production"), nil)
		if err != nil {
			t.Fatal(err)
		}
		job, vmToken := e.startVM(w, sub.ID)
		// What the previous release's claim leaves: nothing fixed.
		if _, err := e.store.Pool().Exec(ctx, `WITH d AS (DELETE FROM attempt_variables WHERE attempt_id = $1)
			UPDATE build_attempts SET variables_fixed = false WHERE id = $1`, job.AttemptID); err != nil {
			t.Fatal(err)
		}
		return sub.ID, vmToken
	}
	borrowed := e.register("borrowed-mac", api.Capabilities{Pool: "community", VMDriver: "tart"})
	plain, borrowedVM := oldClaim(borrowed)
	studio := e.register("studio-mac", api.Capabilities{VMDriver: "tart"})
	trusted, studioVM := oldClaim(studio)
	e.setVar("app", api.SetVariableRequest{Name: "SENTRY_DSN", Value: "set-later", Visibility: api.VisibilitySensitive,
		Environments: []string{"production"}})

	want := map[string]string{"PUBLIC_URL": "https://example.com", "SENTRY_DSN": "set-later"}
	if got := e.jobValues(trusted, studioVM); !reflect.DeepEqual(got, want) {
		t.Fatalf("the trusted worker's job: %v, want the variables now %v", got, want)
	}
	_, err := (&api.Client{BaseURL: e.URL}).BuildJob(ctx, plain, borrowedVM)
	wantStatus(t, err, http.StatusForbidden)
}
