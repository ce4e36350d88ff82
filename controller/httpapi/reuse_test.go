package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs/s3blobs/s3test"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/store"
)

// reuseSource is project p's source archive: the same bytes at each call.
func (e *env) reuseSource(p string) []byte {
	return controllertest.Project(e.t, map[string]string{"package.json": `{"name":"` + p + `"}`, "App.tsx": "export default 1"})
}

// reuseSpec is an Android spec of project p declaring the source
// fingerprint of reuseSource(p).
func (e *env) reuseSpec(p string) *api.BuildSpec {
	s := androidSpec(p, "preview")
	s.SourceFingerprint = controllertest.SourceFingerprint(e.t, e.reuseSource(p))
	s.Credentials = api.CredentialsInfo{Source: api.CredentialsLocal, Android: &api.KeystoreInfo{Type: "JKS", KeyAlias: "upload",
		CertificateSHA256: cacheKey("upload certificate")}}
	return s
}

// buildOnce submits spec with the source of its project (reuseSource)
// and has a worker complete it with an artifact (ok), or fail it.
func (e *env) buildOnce(w *workerSession, spec *api.BuildSpec, ok bool) string {
	e.t.Helper()
	return e.buildFrom(w, spec, e.reuseSource(spec.BuildProject()), ok)
}

// buildFrom is buildOnce with the source archive source, whatever the
// spec declares.
func (e *env) buildFrom(w *workerSession, spec *api.BuildSpec, source []byte, ok bool) string {
	e.t.Helper()
	var creds *api.BuildCredentials
	if spec.Credentials.Android != nil {
		creds = &api.BuildCredentials{Android: testKeystore()}
	}
	req := api.SubmitRequest{Platform: spec.Platform, Spec: spec, Credentials: creds, Source: bytes.NewReader(source)}
	// As expo-build does: straight to the store when it takes direct
	// uploads (S3), else through the controller.
	sum := sha256.Sum256(source)
	ctx := context.Background()
	up, err := e.developer.StartSourceUpload(ctx, api.DirectUploadRequest{Name: "source.tar.gz", Size: int64(len(source)),
		SHA256: hex.EncodeToString(sum[:]), Project: spec.BuildProject()})
	if err != nil {
		e.t.Fatal(err)
	}
	if up.Direct {
		if err := api.SendDirect(ctx, nil, up, bytes.NewReader(source), int64(len(source))); err != nil {
			e.t.Fatal(err)
		}
		req.Source, req.SourceTicket = nil, up.Ticket
	}
	sub, err := e.developer.Submit(ctx, req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.complete(w, sub.ID, ok)
	return sub.ID
}

// complete has a worker complete build id with an artifact (ok), or fail it.
func (e *env) complete(w *workerSession, id string, ok bool) {
	e.t.Helper()
	job := w.poll(0)
	if job == nil || job.ID != id {
		e.t.Fatalf("poll: %+v, want %s", job, id)
	}
	r := api.Result{Success: ok, FileName: "app.apk", File: strings.NewReader("APK " + id)}
	if !ok {
		r = api.Result{ErrorCode: api.CodeBuildFailed, ErrorMessage: "gradle failed"}
	}
	if _, err := w.complete(job, r); err != nil {
		e.t.Fatal(err)
	}
}

// TestReusableBuild: POST /api/builds/reuse answers the newest completed
// build with the same project, platform, source fingerprint, profile and
// credentials whose artifacts are kept, and nothing else; it creates no
// build; a key sees only its projects.
func TestReusableBuild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w := e.register("w", api.Capabilities{})
	older := e.buildOnce(w, e.reuseSpec("app"), true)
	want := e.buildOnce(w, e.reuseSpec("app"), true)
	e.buildOnce(w, e.reuseSpec("app"), false) // failed: never reused
	var builds int
	if err := e.store.Pool().QueryRow(ctx, `SELECT count(*) FROM builds`).Scan(&builds); err != nil {
		t.Fatal(err)
	}

	b, err := e.developer.ReusableBuild(ctx, e.reuseSpec("app"))
	if err != nil || b.ID != want || b.Status != api.StatusCompleted || len(b.Artifacts) != 1 || b.Artifacts[0].Name != "app.apk" ||
		b.InstallURL == nil {
		t.Fatalf("reusable build: %+v %v; want %s (newer than %s) with its artifact and install link", b, err, want, older)
	}
	// Differences that change what a build makes.
	for _, c := range []struct {
		name   string
		change func(s *api.BuildSpec)
	}{
		{"another source", func(s *api.BuildSpec) { s.SourceFingerprint = cacheKey("another tree") }},
		{"another profile name", func(s *api.BuildSpec) { s.ProfileName = "production" }},
		{"another profile", func(s *api.BuildSpec) { s.Profile.Env = map[string]string{"API_URL": "https://example.com"} }},
		{"another gradle command in the profile", func(s *api.BuildSpec) { s.Profile.GradleCommand = ":app:bundleRelease" }},
		{"another keystore", func(s *api.BuildSpec) { s.Credentials.Android.CertificateSHA256 = cacheKey("another certificate") }},
		{"no credentials", func(s *api.BuildSpec) { s.Credentials = api.CredentialsInfo{Source: api.CredentialsNone} }},
		{"another project", func(s *api.BuildSpec) { s.ProjectName = "other" }},
		{"another platform", func(s *api.BuildSpec) {
			s.Platform, s.Android = api.PlatformIOS, nil
		}},
	} {
		s := e.reuseSpec("app")
		c.change(s)
		_, err := e.developer.ReusableBuild(ctx, s)
		wantStatus(t, err, http.StatusNotFound)
	}
	// What does not change the build: the message, the commit, caches.
	s := e.reuseSpec("app")
	s.Message, s.GitCommit = "again", "abc123"
	s.Caches = []api.CacheEntry{{Name: "npm", Key: cacheKey("npm"), Paths: []string{"node_modules"}}}
	if b, err := e.developer.ReusableBuild(ctx, s); err != nil || b.ID != want {
		t.Fatalf("with another message: %+v %v", b, err)
	}

	// Bad input.
	s = e.reuseSpec("app")
	s.SourceFingerprint = ""
	_, err = e.developer.ReusableBuild(ctx, s)
	wantStatus(t, err, http.StatusUnprocessableEntity)
	s.SourceFingerprint = "../etc"
	_, err = e.developer.ReusableBuild(ctx, s)
	wantStatus(t, err, http.StatusUnprocessableEntity)

	// Project-scoped: a key of another project may not look.
	other := e.projectKey("other-dev", "other")
	_, err = other.ReusableBuild(ctx, e.reuseSpec("app"))
	wantStatus(t, err, http.StatusForbidden)
	mine := e.projectKey("app-dev", "app")
	if b, err := mine.ReusableBuild(ctx, e.reuseSpec("app")); err != nil || b.ID != want {
		t.Fatalf("the project's key: %+v %v", b, err)
	}

	// Artifacts gone (the collector deleted them): the older build, then none.
	if _, err := e.store.Pool().Exec(ctx, `UPDATE builds SET artifacts_deleted_at = now() WHERE id = $1`, want); err != nil {
		t.Fatal(err)
	}
	if b, err := mine.ReusableBuild(ctx, e.reuseSpec("app")); err != nil || b.ID != older {
		t.Fatalf("after the newest's artifacts expired: %+v %v, want %s", b, err, older)
	}
	if _, err := e.store.Pool().Exec(ctx, `UPDATE builds SET artifacts_deleted_at = now() WHERE id = $1`, older); err != nil {
		t.Fatal(err)
	}
	_, err = mine.ReusableBuild(ctx, e.reuseSpec("app"))
	wantStatus(t, err, http.StatusNotFound)

	var after int
	if err := e.store.Pool().QueryRow(ctx, `SELECT count(*) FROM builds`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != builds {
		t.Fatalf("%d builds after the look-ups, %d before", after, builds)
	}
}

// TestReusableBuildPastRetention: a build that ended longer ago than
// --retain-artifacts is not offered even before the collector deletes its
// artifacts.
func TestReusableBuildPastRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *store.Config, _ *httpapi.Limits) { c.RetainArtifacts = time.Hour })
	ctx := context.Background()
	w := e.register("w", api.Capabilities{})
	id := e.buildOnce(w, e.reuseSpec("app"), true)
	if b, err := e.developer.ReusableBuild(ctx, e.reuseSpec("app")); err != nil || b.ID != id || b.ArtifactsExpireAt == nil {
		t.Fatalf("fresh: %+v %v", b, err)
	}
	if _, err := e.store.Pool().Exec(ctx, `UPDATE builds SET completed_at = now() - interval '61 minutes' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	_, err := e.developer.ReusableBuild(ctx, e.reuseSpec("app"))
	wantStatus(t, err, http.StatusNotFound)
}

// TestReuseMatchesVariables: a build is reused only while its project's
// variables of its environment are what its attempt was claimed with: the
// same values match; a rotated sensitive value, an added or a deleted
// variable do not; another environment's variables do not count; a value
// without a current keyed hash matches nothing.
func TestReuseMatchesVariables(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w := e.register("w", api.Capabilities{})
	set := func(name, value, visibility string) {
		e.setVar("app", api.SetVariableRequest{Name: name, Value: value, Visibility: visibility, Environments: []string{"preview"}})
	}
	set("SENTRY_AUTH_TOKEN", "sntrys_first", api.VisibilitySensitive)
	set("PUBLIC_URL", "https://example.com", api.VisibilityPlaintext)
	id := e.buildOnce(w, e.reuseSpec("app"), true)
	if b, err := e.developer.ReusableBuild(ctx, e.reuseSpec("app")); err != nil || b.ID != id {
		t.Fatalf("same variables: %+v %v, want %s", b, err, id)
	}
	set("SENTRY_AUTH_TOKEN", "sntrys_first", api.VisibilitySensitive) // set again, same value
	if b, err := e.developer.ReusableBuild(ctx, e.reuseSpec("app")); err != nil || b.ID != id {
		t.Fatalf("a value set again unchanged: %+v %v, want %s", b, err, id)
	}
	set("SENTRY_AUTH_TOKEN", "sntrys_rotated", api.VisibilitySensitive)
	_, err := e.developer.ReusableBuild(ctx, e.reuseSpec("app"))
	wantStatus(t, err, http.StatusNotFound)
	set("SENTRY_AUTH_TOKEN", "sntrys_first", api.VisibilitySensitive) // rotated back
	if b, err := e.developer.ReusableBuild(ctx, e.reuseSpec("app")); err != nil || b.ID != id {
		t.Fatalf("the value rotated back: %+v %v, want %s", b, err, id)
	}
	set("SENTRY_AUTH_TOKEN", "sntrys_first", api.VisibilitySecret) // another visibility
	_, err = e.developer.ReusableBuild(ctx, e.reuseSpec("app"))
	wantStatus(t, err, http.StatusNotFound)
	set("SENTRY_AUTH_TOKEN", "sntrys_first", api.VisibilitySensitive)
	set("EXTRA", "x", api.VisibilityPlaintext)
	_, err = e.developer.ReusableBuild(ctx, e.reuseSpec("app"))
	wantStatus(t, err, http.StatusNotFound)
	if err := e.developer.DeleteVariable(ctx, "app", "EXTRA", ""); err != nil {
		t.Fatal(err)
	}
	if b, err := e.developer.ReusableBuild(ctx, e.reuseSpec("app")); err != nil || b.ID != id {
		t.Fatalf("the added variable deleted again: %+v %v, want %s", b, err, id)
	}
	if err := e.developer.DeleteVariable(ctx, "app", "PUBLIC_URL", ""); err != nil {
		t.Fatal(err)
	}
	_, err = e.developer.ReusableBuild(ctx, e.reuseSpec("app"))
	wantStatus(t, err, http.StatusNotFound)
	// Another environment's variables are not the build's.
	e.setVar("app", api.SetVariableRequest{Name: "PUBLIC_URL", Value: "https://example.com", Visibility: api.VisibilityPlaintext,
		Environments: []string{"preview"}})
	e.setVar("app", api.SetVariableRequest{Name: "PROD_ONLY", Value: "prod-only-secret", Visibility: api.VisibilitySecret, Environments: []string{"production"}})
	if b, err := e.developer.ReusableBuild(ctx, e.reuseSpec("app")); err != nil || b.ID != id {
		t.Fatalf("after a production variable: %+v %v, want %s", b, err, id)
	}
	// A value the previous release replaced (during a rolling upgrade) has
	// no keyed hash of its own: nothing matches until it is set again.
	if _, err := e.store.Pool().Exec(ctx, `UPDATE project_variables SET value_sealed = value_sealed || '\x00'::bytea
		WHERE project = 'app' AND environment = 'preview' AND name = 'SENTRY_AUTH_TOKEN'`); err != nil {
		t.Fatal(err)
	}
	_, err = e.developer.ReusableBuild(ctx, e.reuseSpec("app"))
	wantStatus(t, err, http.StatusNotFound)
	set("SENTRY_AUTH_TOKEN", "sntrys_first", api.VisibilitySensitive)
	if b, err := e.developer.ReusableBuild(ctx, e.reuseSpec("app")); err != nil || b.ID != id {
		t.Fatalf("the value set again: %+v %v, want %s", b, err, id)
	}
}

// TestReuseComputesTheSourceFingerprint: reuse matches the source
// fingerprint the controller computed from the archive it received, never
// the one a spec declares. A build whose spec declares source A's
// fingerprint but that sent source B (whose build marked its artifact) is
// not offered for A, nor for B: the mismatch shows on the build and in its
// event, and the build is never reused. An honest build of A is reused; its
// retry keeps its fingerprint; a build stored before the controller
// computed them is not reused. Through the controller and straight to the
// store (S3) alike.
func TestReuseComputesTheSourceFingerprint(t *testing.T) {
	t.Parallel()
	bucket := s3test.NewBucket(t)
	for name, e := range map[string]*env{"streamed": newEnv(t), "direct": newEnvOn(t, &bucket)} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			w := e.register("w", api.Capabilities{})
			fpA := e.reuseSpec("app").SourceFingerprint
			sourceB := controllertest.Project(t, map[string]string{"package.json": `{"name":"app","scripts":{"postinstall":"sh mark.sh"}}`,
				"App.tsx": "export default 1", "mark.sh": "echo marked >> android/app/src/main/assets/marker"})
			fpB := controllertest.SourceFingerprint(t, sourceB)
			marked := e.buildFrom(w, e.reuseSpec("app"), sourceB, true)

			if b, err := e.developer.ReusableBuild(ctx, e.reuseSpec("app")); api.StatusOf(err) != http.StatusNotFound {
				t.Fatalf("reuse of source A: %s (%v), want 404: build %s sent source B", b.ID, err, marked)
			}
			specB := e.reuseSpec("app")
			specB.SourceFingerprint = fpB
			if b, err := e.developer.ReusableBuild(ctx, specB); api.StatusOf(err) != http.StatusNotFound {
				t.Fatalf("reuse of source B: %s (%v), want 404: a build whose spec lied is never reused", b.ID, err)
			}
			b, err := e.developer.GetBuild(ctx, marked)
			if err != nil || !b.SourceFingerprintMismatch || b.SourceFingerprint != fpB || b.Spec == nil || b.Spec.SourceFingerprint != fpA {
				t.Fatalf("the lying build: %v, mismatch %v, computed %s (want %s), declared %+v", err, b.SourceFingerprintMismatch,
					b.SourceFingerprint, fpB, b.Spec)
			}
			var detail map[string]any
			e.seal()
			for _, ev := range e.allEvents() {
				if ev.EntityID == marked && ev.EventType == "build.submitted" {
					if err := json.Unmarshal(ev.Payload, &detail); err != nil {
						t.Fatal(err)
					}
				}
			}
			if detail["source_fingerprint_mismatch"] != true || detail["declared_source_fingerprint"] != fpA || detail["source_fingerprint"] != fpB {
				t.Fatalf("build.submitted of the lying build: %v", detail)
			}

			honest := e.buildOnce(w, e.reuseSpec("app"), true)
			b, err = e.developer.ReusableBuild(ctx, e.reuseSpec("app"))
			if err != nil || b.ID != honest || b.SourceFingerprint != fpA || b.SourceFingerprintMismatch {
				t.Fatalf("reuse of source A: %s (%v), want the honest build %s", b.ID, err, honest)
			}
			// A retry (of a build without credentials, which a retry cannot copy) keeps its source and fingerprint.
			unsigned := e.reuseSpec("app")
			unsigned.Credentials = api.CredentialsInfo{Source: api.CredentialsNone}
			retry, err := e.developer.Retry(ctx, e.buildOnce(w, unsigned, true))
			if err != nil {
				t.Fatal(err)
			}
			if b, err := e.developer.GetBuild(ctx, retry.ID); err != nil || b.SourceFingerprint != fpA || b.SourceFingerprintMismatch {
				t.Fatalf("the retry: %v, computed %s, mismatch %v", err, b.SourceFingerprint, b.SourceFingerprintMismatch)
			}
			if _, err := e.developer.Cancel(ctx, retry.ID); err != nil {
				t.Fatal(err)
			}
			// Stored before the controller computed fingerprints: never reused.
			if _, err := e.store.Pool().Exec(ctx, `UPDATE builds SET source_fingerprint = NULL WHERE id = $1`, honest); err != nil {
				t.Fatal(err)
			}
			_, err = e.developer.ReusableBuild(ctx, e.reuseSpec("app"))
			wantStatus(t, err, http.StatusNotFound)
		})
	}
}
