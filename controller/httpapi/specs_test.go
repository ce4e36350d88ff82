package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/internal/cachekey"
)

func ptr[T any](v T) *T { return &v }

// androidSpec is a spec as expo-build sends it for an Android build of
// project slug in environment env.
func androidSpec(slug, env string) *api.BuildSpec {
	return &api.BuildSpec{
		Version: api.SpecVersion, Platform: api.PlatformAndroid, ProfileName: "preview", Environment: env,
		Profile: api.BuildProfile{Distribution: "internal", Env: map[string]string{"API_URL": "https://staging.example.com"},
			Node: "20.11.0", Corepack: ptr(true), AutoIncrement: &api.AutoIncrement{Field: "versionCode"},
			GradleCommand: ":app:assembleRelease", BuildType: api.AndroidAPK, Environment: env},
		App: api.App{Name: "My App", Slug: slug, Version: "1.2.3", AndroidPackage: "com.example.myapp", AndroidVersionCode: 7,
			ConfigSource: "app.json"},
		Project: api.Project{AppDir: "apps/mobile", PackageManager: api.PackageManagerPNPM, Lockfile: "pnpm-lock.yaml", Workspace: true},
		Android: &api.AndroidBuild{GradleCommand: ":app:assembleRelease", BuildType: api.AndroidAPK,
			ApplicationArchivePaths: []string{"android/app/build/outputs/**/*.apk"}},
		Credentials: api.CredentialsInfo{Source: api.CredentialsNone},
		Message:     "release candidate",
	}
}

// iosSpec is a spec as expo-build sends it for a signed ad hoc iOS build
// of an app with a widget extension.
func iosSpec(slug, env string) *api.BuildSpec {
	return &api.BuildSpec{
		Version: api.SpecVersion, Platform: api.PlatformIOS, ProfileName: "preview", Environment: env,
		Profile: api.BuildProfile{Distribution: "internal", Environment: env},
		App:     api.App{Name: "My App", Slug: slug, Version: "1.2.3", IOSBundleID: "com.example.myapp", ConfigSource: "app.json"},
		Project: api.Project{PackageManager: api.PackageManagerNPM},
		IOS: &api.IOSBuild{Scheme: "MyApp", BuildConfiguration: "Release",
			Targets:                 []api.IOSTarget{{Name: "MyApp", BundleID: "com.example.myapp"}, {Name: "Widget", BundleID: "com.example.myapp.widget"}},
			ApplicationArchivePaths: []string{"ios/build/*.ipa"}},
		Credentials: api.CredentialsInfo{Source: api.CredentialsLocal, IOS: &api.IOSSigning{ExportMethod: api.ExportAdHoc, TeamID: "TEAM123456",
			Targets: []api.IOSTargetSigning{
				{Target: "MyApp", BundleID: "com.example.myapp", ProfileUUID: "9F2B3C4D-1111-2222-3333-444455556666", ProfileName: "MyApp Ad Hoc", ProfileType: api.ExportAdHoc, CertificateSHA1: strings.Repeat("AB", 20)},
				{Target: "Widget", BundleID: "com.example.myapp.widget", ProfileUUID: "9F2B3C4D-1111-2222-3333-444455557777", ProfileName: "Widget Ad Hoc", ProfileType: api.ExportAdHoc, CertificateSHA1: strings.Repeat("AB", 20)},
			}}},
	}
}

// testIOSCredentials are an app's and its widget's credentials with
// recognisable secrets.
func testIOSCredentials() map[string]api.IOSTargetCredentials {
	p12, pw := append([]byte("P12-BYTES-"), randomBytes(64)...), "p12-pass-"+randomID()
	return map[string]api.IOSTargetCredentials{
		"App":    {ProvisioningProfile: append([]byte("APP-PROFILE-"), randomBytes(32)...), Certificate: p12, CertificatePassword: pw},
		"Widget": {ProvisioningProfile: append([]byte("WIDGET-PROFILE-"), randomBytes(32)...), Certificate: p12, CertificatePassword: pw},
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// testKeystore is an Android keystore with recognisable secrets.
func testKeystore() *api.AndroidKeystore {
	return &api.AndroidKeystore{Keystore: append([]byte("KEYSTORE-BYTES-"), randomBytes(64)...), KeystorePassword: "store-pass-" + base64.RawURLEncoding.EncodeToString(randomBytes(9)),
		KeyAlias: "upload", KeyPassword: "key-pass-" + base64.RawURLEncoding.EncodeToString(randomBytes(9))}
}

func (e *env) submitSpec(spec *api.BuildSpec, creds *api.BuildCredentials) (api.SubmitResponse, error) {
	e.t.Helper()
	return e.developer.Submit(context.Background(), api.SubmitRequest{Platform: spec.Platform, Spec: spec, Credentials: creds,
		Source: bytes.NewReader(controllertest.Project(e.t, map[string]string{"package.json": `{"name":"app"}`, "nonce": randomID()}))})
}

func randomID() string { return base64.RawURLEncoding.EncodeToString(randomBytes(12)) }

// startVM claims the only pending build and exchanges its OTP: what the
// worker and the VM do.
func (e *env) startVM(w *workerSession, buildID string) (*api.Job, string) {
	e.t.Helper()
	job := w.poll(0)
	if job == nil || job.ID != buildID {
		e.t.Fatalf("poll: got %+v, want build %s", job, buildID)
	}
	if _, err := w.heartbeat(job); err != nil {
		e.t.Fatal(err)
	}
	auth, err := (&api.Client{BaseURL: e.URL}).VMAuth(context.Background(), buildID, job.OTP)
	if err != nil {
		e.t.Fatal(err)
	}
	return job, auth.VMToken
}

func (e *env) setVar(project string, req api.SetVariableRequest) {
	e.t.Helper()
	if _, err := e.developer.SetVariable(context.Background(), project, req); err != nil {
		e.t.Fatalf("set variable %s of %s: %v", req.Name, project, err)
	}
}

// TestSpecRoundTrip: the spec a submit sends is stored, returned by GET
// /api/builds/:id, and handed to the VM with its project's variables of its
// environment — never another environment's or another project's.
func TestSpecRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	vm := &api.Client{BaseURL: e.URL}

	e.setVar("my-app", api.SetVariableRequest{Name: "PUBLIC_URL", Value: "https://preview.example.com", Visibility: api.VisibilityPlaintext,
		Environments: []string{"preview"}})
	e.setVar("my-app", api.SetVariableRequest{Name: "PUBLIC_URL", Value: "https://example.com", Visibility: api.VisibilityPlaintext,
		Environments: []string{"production"}})
	e.setVar("my-app", api.SetVariableRequest{Name: "SENTRY_AUTH_TOKEN", Value: "sntrys_preview_secret", Visibility: api.VisibilitySecret,
		Environments: []string{"preview"}})
	e.setVar("my-app", api.SetVariableRequest{Name: "GOOGLE_SERVICES_JSON", Value: base64.StdEncoding.EncodeToString([]byte(`{"project_info":{}}`)),
		Visibility: api.VisibilitySensitive, Type: api.VariableFile}) // every standard environment
	e.setVar("other-app", api.SetVariableRequest{Name: "OTHER", Value: "not yours", Visibility: api.VisibilityPlaintext,
		Environments: []string{"preview"}})

	spec := androidSpec("my-app", "preview")
	sub, err := e.submitSpec(spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := e.build(sub.ID)
	if b.Profile != "preview" {
		t.Errorf("profile column %q, want the spec's profile_name", b.Profile)
	}
	// Stored as sent, but for its caches: the farm's, from its source.
	stored := *spec
	stored.Caches = controllertest.CacheEntries(t, *spec, controllertest.Project(t, map[string]string{"package.json": `{"name":"app"}`}))
	if !reflect.DeepEqual(b.Spec, &stored) {
		t.Fatalf("GET build spec:\n got %+v\nwant %+v", b.Spec, &stored)
	}
	// The build token reads it too (expo-build status).
	own, err := (&api.Client{BaseURL: e.URL, BuildToken: sub.AccessToken}).GetBuild(ctx, sub.ID)
	if err != nil || !reflect.DeepEqual(own.Spec, &stored) {
		t.Fatalf("GET build with its token: %+v %v", own.Spec, err)
	}

	w := e.register("mac", api.Capabilities{Platforms: []string{"android"}})
	job, vmToken := e.startVM(w, sub.ID)
	bj, err := vm.BuildJob(ctx, sub.ID, vmToken)
	if err != nil {
		t.Fatal(err)
	}
	// The VM's cache keys are its job's: bound to the build's cache domain
	// (preview has a secret).
	inVM := stored
	inVM.Caches = slices.Clone(stored.Caches)
	for i := range inVM.Caches {
		inVM.Caches[i].Key = cachekey.Qualify("environment:preview with secrets", inVM.Caches[i].Key)
	}
	if !reflect.DeepEqual(bj.Spec, &inVM) || !reflect.DeepEqual(job.Caches, inVM.Caches) {
		t.Fatalf("VM spec:\n got %+v\nwant %+v\njob's caches %+v", bj.Spec, &inVM, job.Caches)
	}
	got := map[string]string{}
	for _, v := range bj.Variables {
		if v.Project != "my-app" || v.Environment != "preview" {
			t.Errorf("the VM got a variable of %s/%s", v.Project, v.Environment)
		}
		got[v.Name+"/"+v.Visibility+"/"+v.Type] = v.Value
	}
	want := map[string]string{
		"PUBLIC_URL/plaintext/string":         "https://preview.example.com",
		"SENTRY_AUTH_TOKEN/secret/string":     "sntrys_preview_secret",
		"GOOGLE_SERVICES_JSON/sensitive/file": base64.StdEncoding.EncodeToString([]byte(`{"project_info":{}}`)),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("VM variables %v, want %v", got, want)
	}
	// Only the VM: not a developer's key.
	req, _ := http.NewRequest(http.MethodGet, e.URL+"/api/builds/"+sub.ID+"/spec", nil)
	req.Header.Set(api.HeaderAPIKey, e.adminKey)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("spec with an API key: %v %v", resp, err)
	}
	if _, err := w.complete(job, api.Result{Success: true}); err != nil {
		t.Fatal(err)
	}

	// A retry keeps the spec.
	re, err := e.developer.Retry(ctx, sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rb := e.build(re.ID); !reflect.DeepEqual(rb.Spec, &stored) || rb.Profile != "preview" {
		t.Fatalf("retry spec %+v profile %q", rb.Spec, rb.Profile)
	}
	if _, err := e.developer.Cancel(ctx, re.ID); err != nil {
		t.Fatal(err)
	}

	// A production build of the same project sees production's values.
	prod := androidSpec("my-app", "production")
	prod.ProfileName = "production"
	sub2, err := e.developer.Submit(ctx, api.SubmitRequest{Platform: "android", Profile: "store", Spec: prod,
		Source: bytes.NewReader(controllertest.Project(t, map[string]string{"a": "b"}))})
	if err != nil {
		t.Fatal(err)
	}
	if p := e.build(sub2.ID).Profile; p != "store" {
		t.Errorf("an explicit profile field gave %q, want it kept", p)
	}
	_, vm2 := e.startVM(w, sub2.ID)
	bj, err = vm.BuildJob(ctx, sub2.ID, vm2)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range bj.Variables {
		names = append(names, v.Name+"="+v.Value)
	}
	if !slices.Equal(names, []string{"GOOGLE_SERVICES_JSON=" + want["GOOGLE_SERVICES_JSON/sensitive/file"], "PUBLIC_URL=https://example.com"}) {
		t.Fatalf("production build variables %v", names)
	}
}

// TestRawSubmitHasNoSpec: a submit without a spec answers the VM with a
// null spec and an empty list, and GET shows no spec.
func TestRawSubmitHasNoSpec(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sub, _ := e.submit("android")
	if b := e.build(sub.ID); b.Spec != nil {
		t.Fatalf("raw submit has spec %+v", b.Spec)
	}
	w := e.register("mac", api.Capabilities{Platforms: []string{"android"}})
	_, vmToken := e.startVM(w, sub.ID)
	r := biSend(t, "GET", e.URL+"/api/builds/"+sub.ID+"/spec", nil, api.HeaderVMToken, vmToken)
	if r.Status != http.StatusOK || strings.TrimSpace(string(r.Body)) != `{"spec":null,"variables":[]}` {
		t.Fatalf("VM spec of a raw build: %d %s", r.Status, r.Body)
	}
	_, err := (&api.Client{BaseURL: e.URL}).BuildCredentials(context.Background(), sub.ID, vmToken)
	wantStatus(t, err, http.StatusNotFound)
}

func (e *env) credentialsFile(id string) string {
	return filepath.Join(e.dataDir, "files", "builds", id, "credentials.sealed")
}

// TestBuildCredentialsSealedServedAndDeleted: a local keystore is sealed at
// rest, reaches only the build's VM, and is gone when the build ends.
func TestBuildCredentialsSealedServedAndDeleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	ks := testKeystore()
	spec := androidSpec("signed-app", "production")
	spec.Credentials = api.CredentialsInfo{Source: api.CredentialsLocal, Android: &api.KeystoreInfo{Type: "JKS", KeyAlias: "upload",
		CertificateSHA256: strings.Repeat("ab", 32)}}
	sub, err := e.submitSpec(spec, &api.BuildCredentials{Android: ks})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := os.ReadFile(e.credentialsFile(sub.ID))
	if err != nil {
		t.Fatalf("sealed credentials missing: %v", err)
	}
	for _, secret := range [][]byte{ks.Keystore, []byte(base64.StdEncoding.EncodeToString(ks.Keystore)), []byte(ks.KeystorePassword), []byte(ks.KeyPassword)} {
		if bytes.Contains(sealed, secret) {
			t.Fatalf("the credentials file holds %q in the clear", secret)
		}
	}
	w := e.register("mac", api.Capabilities{Platforms: []string{"android"}})
	job, vmToken := e.startVM(w, sub.ID)
	got, err := (&api.Client{BaseURL: e.URL}).BuildCredentials(ctx, sub.ID, vmToken)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Android, ks) {
		t.Fatalf("VM credentials %+v, want %+v", got.Android, ks)
	}
	r := biSend(t, "GET", e.URL+"/api/builds/"+sub.ID+"/credentials", nil, api.HeaderAPIKey, e.adminKey)
	r.wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)

	if _, err := w.complete(job, api.Result{Success: true}); err != nil {
		t.Fatal(err)
	}
	e.reaper.Sweep(ctx)
	if _, err := os.Stat(e.credentialsFile(sub.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("credentials still on disk after the build ended: %v", err)
	}
	if n := biCount(t, e, `SELECT count(*) FROM builds WHERE id = $1 AND certs_deleted_at IS NOT NULL`, sub.ID); n != 1 {
		t.Fatal("the deletion is not recorded")
	}
	// Local credentials cannot come back: the retry says how to send them.
	_, err = e.developer.Retry(ctx, sub.ID)
	wantStatus(t, err, http.StatusConflict)
	if !strings.Contains(err.Error(), "expo-build build") {
		t.Fatalf("retry error does not say how to fix it: %v", err)
	}
	if n := biCount(t, e, `SELECT count(*) FROM builds`); n != 1 {
		t.Fatalf("a refused retry left %d builds", n)
	}
}

// TestIOSCredentialsSealedAndServed: an iOS build's per-target credentials
// are sealed at rest and reach its VM, with the spec, intact.
func TestIOSCredentialsSealedAndServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	creds := testIOSCredentials()
	spec := iosSpec("signed-ios-app", "preview")
	sub, err := e.submitSpec(spec, &api.BuildCredentials{IOS: creds})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := os.ReadFile(e.credentialsFile(sub.ID))
	if err != nil {
		t.Fatalf("sealed credentials missing: %v", err)
	}
	for _, c := range creds {
		for _, secret := range [][]byte{c.Certificate, []byte(base64.StdEncoding.EncodeToString(c.Certificate)), []byte(c.CertificatePassword)} {
			if bytes.Contains(sealed, secret) {
				t.Fatalf("the credentials file holds %q in the clear", secret)
			}
		}
	}
	w := e.register("mac", api.Capabilities{Platforms: []string{"ios"}})
	_, vmToken := e.startVM(w, sub.ID)
	vm := &api.Client{BaseURL: e.URL}
	got, err := vm.BuildCredentials(ctx, sub.ID, vmToken)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.IOS, creds) || got.Android != nil {
		t.Fatalf("VM credentials %+v, want %+v", got, creds)
	}
	job, err := vm.BuildJob(ctx, sub.ID, vmToken)
	if err != nil {
		t.Fatal(err)
	}
	if job.Spec == nil || !reflect.DeepEqual(job.Spec.IOS, spec.IOS) || !reflect.DeepEqual(job.Spec.Credentials.IOS, spec.Credentials.IOS) {
		t.Fatalf("VM spec %+v, want the submitted iOS settings %+v", job.Spec, spec.IOS)
	}
}

// TestRemoteCredentials: a remote build gets a sealed copy of the project's
// farm keystore when the fingerprint matches, and a 422 naming the project
// and the fix otherwise.
func TestRemoteCredentials(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	ks := testKeystore()
	fp := strings.Repeat("0f", 32)
	info := &api.KeystoreInfo{Type: "PKCS12", KeyAlias: "upload", CertificateSHA256: fp, Subject: "CN=My App"}
	c, err := e.developer.SetCredential(ctx, "farm-app", "android", "default", api.SetCredentialRequest{Android: ks, Info: info})
	if err != nil {
		t.Fatal(err)
	}
	if c.Project != "farm-app" || c.Android == nil || c.Android.CertificateSHA256 != fp || c.Android.Name != "default" || c.CreatedAt.IsZero() {
		t.Fatalf("set credential answer %+v", c)
	}
	r := biSend(t, "GET", e.URL+"/api/projects/farm-app/credentials", nil, api.HeaderAPIKey, e.devKey)
	var list api.CredentialList
	r.wantOK(t, http.StatusOK, &list)
	if len(list.Credentials) != 1 || list.Credentials[0].Android.CertificateSHA256 != fp || list.Credentials[0].Android.Subject != "CN=My App" {
		t.Fatalf("credential list %+v", list)
	}
	for _, secret := range []string{ks.KeystorePassword, ks.KeyPassword, base64.StdEncoding.EncodeToString(ks.Keystore)} {
		if bytes.Contains(r.Body, []byte(secret)) {
			t.Fatalf("the credential list shows a secret: %s", r.Body)
		}
	}
	if n := biCount(t, e, `SELECT count(*) FROM project_credentials WHERE position($1::bytea in secret_sealed) > 0
		OR position($2::bytea in secret_sealed) > 0`, []byte(ks.KeystorePassword), ks.Keystore[:20]); n != 0 {
		t.Fatal("the farm keystore is stored in the clear")
	}

	remote := func(slug, name, sha string) *api.BuildSpec {
		s := androidSpec(slug, "production")
		s.Credentials = api.CredentialsInfo{Source: api.CredentialsRemote, Android: &api.KeystoreInfo{Name: name, Type: "PKCS12",
			KeyAlias: "upload", CertificateSHA256: sha}}
		return s
	}
	sub, err := e.submitSpec(remote("farm-app", "", fp), nil)
	if err != nil {
		t.Fatal(err)
	}
	w := e.register("mac", api.Capabilities{Platforms: []string{"android"}})
	job, vmToken := e.startVM(w, sub.ID)
	got, err := (&api.Client{BaseURL: e.URL}).BuildCredentials(ctx, sub.ID, vmToken)
	if err != nil || !reflect.DeepEqual(got.Android, ks) {
		t.Fatalf("VM credentials of a remote build: %+v %v", got.Android, err)
	}
	if _, err := w.complete(job, api.Result{Success: true}); err != nil {
		t.Fatal(err)
	}
	e.reaper.Sweep(ctx)
	if _, err := os.Stat(e.credentialsFile(sub.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("credentials still on disk after the build ended: %v", err)
	}
	// A retry after that copies the farm keystore again.
	re, err := e.developer.Retry(ctx, sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, vm2 := e.startVM(w, re.ID)
	if got, err := (&api.Client{BaseURL: e.URL}).BuildCredentials(ctx, re.ID, vm2); err != nil || !reflect.DeepEqual(got.Android, ks) {
		t.Fatalf("VM credentials of the retry: %+v %v", got.Android, err)
	}

	before := biCount(t, e, `SELECT count(*) FROM builds`)
	for _, c := range []struct {
		spec  *api.BuildSpec
		creds *api.BuildCredentials
		want  []string
	}{
		{remote("farm-app", "", strings.Repeat("aa", 32)), nil, []string{"farm-app", fp, strings.Repeat("aa", 32), "expo-build credentials set --platform android", "re-run"}},
		{remote("farm-app", "release", fp), nil, []string{"farm-app", `"release"`, "expo-build credentials set --platform android"}},
		{remote("other-app", "", fp), nil, []string{"other-app", "expo-build credentials set --platform android"}},
		{remote("farm-app", "", fp), &api.BuildCredentials{Android: ks}, []string{"credentials", "remote"}},
	} {
		_, err := e.submitSpec(c.spec, c.creds)
		wantStatus(t, err, http.StatusUnprocessableEntity)
		for _, s := range c.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not name %q", err, s)
			}
		}
	}
	if n := biCount(t, e, `SELECT count(*) FROM builds`); n != before {
		t.Fatalf("refused submits left %d builds", n-before)
	}

	if err := e.developer.DeleteCredential(ctx, "farm-app", "android", "default"); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, e.developer.DeleteCredential(ctx, "farm-app", "android", "default"), http.StatusNotFound)
	_, err = e.submitSpec(remote("farm-app", "", fp), nil)
	wantStatus(t, err, http.StatusUnprocessableEntity)

	// The audit log names the credential by fingerprint, never its secrets.
	e.seal()
	var types []string
	for _, ev := range e.allEvents() {
		if ev.EntityType == "project" {
			types = append(types, ev.EventType)
		}
	}
	if !slices.Equal(types, []string{"project.credential_set", "project.credential_deleted"}) {
		t.Errorf("project events %v", types)
	}
	requireNoSecretInEvents(t, e, ks.KeystorePassword, ks.KeyPassword, base64.StdEncoding.EncodeToString(ks.Keystore))
	e.requireConsistentLog()
}

// requireNoSecretInEvents fails when any event's payload holds one of the secrets.
func requireNoSecretInEvents(t *testing.T, e *env, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if n := biCount(t, e, `SELECT count(*) FROM events WHERE strpos(payload::text, $1) > 0 OR strpos(event_type, $1) > 0`, s); n != 0 {
			t.Errorf("%d audit events hold the secret %q", n, s)
		}
	}
}

// TestVariables: create, replace, list and delete with each visibility and
// type; secret values never come back; values are sealed in the database
// and absent from the audit log.
func TestVariables(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const plain, sensitive, secret = "plain-value-1", "sensitive-value-2", "secret-value-3"
	file := base64.StdEncoding.EncodeToString([]byte("-----BEGIN FILE-----\x00\xff binary"))
	set := func(req api.SetVariableRequest) api.VariableList {
		t.Helper()
		out, err := e.developer.SetVariable(ctx, "vars-app", req)
		if err != nil {
			t.Fatalf("set %s: %v", req.Name, err)
		}
		return out
	}
	out := set(api.SetVariableRequest{Name: "PLAIN", Value: plain, Visibility: api.VisibilityPlaintext})
	var envs []string
	for _, v := range out.Variables {
		envs = append(envs, v.Environment)
		if v.Value != "" || v.Type != api.VariableString || v.Visibility != api.VisibilityPlaintext {
			t.Errorf("set answer %+v", v)
		}
	}
	if !slices.Equal(envs, []string{"development", "preview", "production"}) {
		t.Fatalf("default environments %v", envs)
	}
	set(api.SetVariableRequest{Name: "SENSITIVE", Value: sensitive, Visibility: api.VisibilitySensitive, Environments: []string{"preview", "staging-eu"}})
	set(api.SetVariableRequest{Name: "SECRET", Value: secret, Visibility: api.VisibilitySecret, Environments: []string{"preview"}})
	set(api.SetVariableRequest{Name: "CERT_FILE", Value: file, Visibility: api.VisibilitySecret, Type: api.VariableFile, Environments: []string{"preview"}})
	set(api.SetVariableRequest{Name: "PLAIN", Value: "elsewhere", Visibility: api.VisibilityPlaintext, Environments: []string{"preview"}})
	if _, err := e.developer.SetVariable(ctx, "other-app", api.SetVariableRequest{Name: "PLAIN", Value: "other project", Visibility: api.VisibilityPlaintext}); err != nil {
		t.Fatal(err)
	}

	list := func(env string) map[string]api.Variable {
		t.Helper()
		l, err := e.developer.ListVariables(ctx, "vars-app", env)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]api.Variable{}
		for _, v := range l.Variables {
			if v.Project != "vars-app" {
				t.Errorf("listed %+v", v)
			}
			m[v.Environment+"/"+v.Name] = v
		}
		return m
	}
	pv := list("preview")
	if len(pv) != 4 || pv["preview/PLAIN"].Value != "elsewhere" || pv["preview/SENSITIVE"].Value != sensitive ||
		pv["preview/SECRET"].Value != "" || pv["preview/SECRET"].Visibility != api.VisibilitySecret ||
		pv["preview/CERT_FILE"].Value != "" || pv["preview/CERT_FILE"].Type != api.VariableFile {
		t.Fatalf("preview variables %+v", pv)
	}
	all := list("")
	if len(all) != 7 || all["production/PLAIN"].Value != plain || all["staging-eu/SENSITIVE"].Value != sensitive {
		t.Fatalf("all variables %+v", all)
	}
	r := biSend(t, "GET", e.URL+"/api/projects/vars-app/env", nil, api.HeaderAPIKey, e.devKey)
	if bytes.Contains(r.Body, []byte(secret)) || bytes.Contains(r.Body, []byte(file)) {
		t.Fatalf("a list shows a secret value: %s", r.Body)
	}
	// The VM of a preview build gets the secret and the file.
	spec := androidSpec("vars-app", "preview")
	sub, err := e.submitSpec(spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, vmToken := e.startVM(e.register("mac", api.Capabilities{Platforms: []string{"android"}}), sub.ID)
	bj, err := (&api.Client{BaseURL: e.URL}).BuildJob(ctx, sub.ID, vmToken)
	if err != nil {
		t.Fatal(err)
	}
	vmVals := map[string]string{}
	for _, v := range bj.Variables {
		vmVals[v.Name] = v.Value
	}
	if !reflect.DeepEqual(vmVals, map[string]string{"PLAIN": "elsewhere", "SENSITIVE": sensitive, "SECRET": secret, "CERT_FILE": file}) {
		t.Fatalf("VM variables %v", vmVals)
	}

	// Sealed: no value in the clear in the table.
	for _, v := range []string{plain, sensitive, secret} {
		if n := biCount(t, e, `SELECT count(*) FROM project_variables WHERE position($1::bytea in value_sealed) > 0`, []byte(v)); n != 0 {
			t.Fatalf("%q is stored in the clear", v)
		}
	}

	// Delete from one environment, then from all; nothing left → 404.
	if err := e.developer.DeleteVariable(ctx, "vars-app", "PLAIN", "preview"); err != nil {
		t.Fatal(err)
	}
	if _, ok := list("")["production/PLAIN"]; !ok {
		t.Fatal("deleting from preview deleted production's")
	}
	if err := e.developer.DeleteVariable(ctx, "vars-app", "PLAIN", ""); err != nil {
		t.Fatal(err)
	}
	for k := range list("") {
		if strings.HasSuffix(k, "/PLAIN") {
			t.Fatalf("%s survived a delete from every environment", k)
		}
	}
	wantStatus(t, e.developer.DeleteVariable(ctx, "vars-app", "PLAIN", ""), http.StatusNotFound)
	wantStatus(t, e.developer.DeleteVariable(ctx, "vars-app", "SECRET", "production"), http.StatusNotFound)
	if l, err := e.developer.ListVariables(ctx, "other-app", ""); err != nil || len(l.Variables) != 3 {
		t.Fatalf("another project's variables changed: %+v %v", l, err)
	}
	// Empty project: an empty list, not null.
	r = biSend(t, "GET", e.URL+"/api/projects/nothing-here/env?environment=preview", nil, api.HeaderAPIKey, e.devKey)
	if r.Status != http.StatusOK || strings.TrimSpace(string(r.Body)) != `{"variables":[]}` {
		t.Fatalf("empty list: %d %s", r.Status, r.Body)
	}
	// Workers cannot touch variables.
	_, err = e.worker.ListVariables(ctx, "vars-app", "")
	wantStatus(t, err, http.StatusForbidden)

	// The audit log has names and visibilities, never values.
	e.seal()
	var set0 map[string]any
	var types []string
	for _, ev := range e.allEvents() {
		if ev.EntityType != "project" {
			continue
		}
		types = append(types, ev.EventType)
		if ev.EventType == "project.variable_set" && set0 == nil {
			json.Unmarshal(ev.Payload, &set0)
		}
	}
	if len(types) != 8 || types[0] != "project.variable_set" || types[len(types)-1] != "project.variable_deleted" {
		t.Errorf("project events %v", types)
	}
	if set0["name"] != "PLAIN" || set0["visibility"] != "plaintext" {
		t.Errorf("variable_set payload %v", set0)
	}
	requireNoSecretInEvents(t, e, plain, sensitive, secret, file, "elsewhere")
	e.requireConsistentLog()
}
