package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

// These tests hold `expo-build build`'s resolution (eas.json, app config,
// workspace and package manager, credentials) to what the controller
// stores and what the build's VM receives, on a real controller, with
// keystores made by the real keytool.

// testKeystore is a JKS upload keystore made by keytool for this test
// binary, and what keytool itself says of it.
type testKeystore struct {
	data                   []byte
	storePw, alias, keyPw  string
	sha256, subject, owner string
}

var keystoreOnce struct {
	sync.Once
	ks  testKeystore
	err error
}

var (
	keytoolSHA256 = regexp.MustCompile(`(?m)^\s*SHA256:\s*([0-9A-F:]+)\s*$`)
	keytoolOwner  = regexp.MustCompile(`(?m)^Owner:\s*(.+)$`)
)

// uploadKeystore returns the test binary's JKS, made once (a JVM start
// costs about a second). It fails the test when keytool is missing.
func uploadKeystore(t *testing.T) testKeystore {
	t.Helper()
	keytool := testtool.Path(t, "keytool")
	keystoreOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cli-keystore")
		if err != nil {
			keystoreOnce.err = err
			return
		}
		defer os.RemoveAll(dir)
		ks := testKeystore{storePw: "store-Pw-1", alias: "upload", keyPw: "key-Pw-22"}
		file := filepath.Join(dir, "upload.jks")
		run := func(args ...string) string {
			out, err := exec.Command(keytool, args...).CombinedOutput()
			if err != nil && keystoreOnce.err == nil {
				keystoreOnce.err = fmt.Errorf("keytool %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return string(out)
		}
		run("-genkeypair", "-keystore", file, "-storetype", "JKS", "-storepass", ks.storePw, "-keypass", ks.keyPw,
			"-alias", ks.alias, "-keyalg", "RSA", "-keysize", "2048", "-validity", "10000", "-dname", "CN=Upload Key, O=Acme Inc, C=US")
		out := run("-list", "-v", "-keystore", file, "-storepass", ks.storePw, "-alias", ks.alias)
		if keystoreOnce.err != nil {
			return
		}
		m, o := keytoolSHA256.FindStringSubmatch(out), keytoolOwner.FindStringSubmatch(out)
		if m == nil || o == nil {
			keystoreOnce.err = fmt.Errorf("keytool -list -v printed no SHA256/Owner line:\n%s", out)
			return
		}
		ks.sha256 = strings.ToLower(strings.ReplaceAll(m[1], ":", ""))
		ks.owner = strings.TrimSpace(o[1])
		if ks.data, err = os.ReadFile(file); err != nil {
			keystoreOnce.err = err
		}
		keystoreOnce.ks = ks
	})
	if keystoreOnce.err != nil {
		t.Fatal(keystoreOnce.err)
	}
	return keystoreOnce.ks
}

// credentialsFile is a credentials.json for an Android keystore.
func credentialsFile(path, storePw, alias, keyPw string) string {
	b, _ := json.Marshal(map[string]any{"android": map[string]any{"keystore": map[string]string{
		"keystorePath": path, "keystorePassword": storePw, "keyAlias": alias, "keyPassword": keyPw}}})
	return string(b)
}

// appJSON is an app.json with a full Android and iOS identity.
func appJSON(slug string) string {
	return `{"expo":{"name":"Demo App","slug":"` + slug + `","version":"1.2.3",
		"android":{"package":"com.example.demo","versionCode":42},
		"ios":{"bundleIdentifier":"com.example.demo.ios","buildNumber":"7"}}}`
}

// dev is a developer's API client on the controller.
func (e *env) dev() *api.Client { return &api.Client{BaseURL: e.URL, APIKey: e.devKey} }

// build is build id as the controller stores it.
func (e *env) build(t *testing.T, id string) api.Build {
	t.Helper()
	b, err := e.dev().GetBuild(context.Background(), id)
	if err != nil {
		t.Fatalf("get build %s: %v", id, err)
	}
	return b
}

// storedSpec is the spec stored with build id.
func (e *env) storedSpec(t *testing.T, id string) api.BuildSpec {
	t.Helper()
	b := e.build(t, id)
	if b.Spec == nil {
		t.Fatalf("build %s was stored without a spec", id)
	}
	return *b.Spec
}

// buildCount is how many builds the controller has.
func (e *env) buildCount(t *testing.T) int {
	t.Helper()
	list, err := e.admin.ListBuilds(context.Background(), api.ListOptions{Limit: 100})
	if err != nil {
		t.Fatalf("list builds: %v", err)
	}
	return len(list.Builds)
}

// queuedID is the id of the build a one-platform build --no-wait --json queued.
func queuedID(t *testing.T, r result) string {
	t.Helper()
	builds := jsonOf[[]map[string]any](t, r)
	if len(builds) != 1 {
		t.Fatalf("build --json printed %d builds, want 1\n%s", len(builds), r)
	}
	id, _ := builds[0]["id"].(string)
	if id == "" {
		t.Fatalf("build --json printed no id\n%s", r)
	}
	return id
}

// vmView is what a build's VM receives: the /spec answer, the
// /credentials answer (nil for a build that has none) and the files of
// the source archive.
type vmView struct {
	job   api.BuildJob
	creds *api.BuildCredentials
	files map[string]string
}

// claimAsVM claims the next job, checks it is build id, and fetches what
// its VM would.
func (w *testWorker) claimAsVM(t *testing.T, id string) (*api.Job, vmView) {
	t.Helper()
	j := w.claim()
	if j.ID != id {
		t.Fatalf("claimed build %s, want %s", j.ID, id)
	}
	v := w.vm(j)
	ctx := context.Background()
	var view vmView
	var err error
	if view.job, err = v.c.BuildJob(ctx, id, v.token); err != nil {
		t.Fatalf("GET /api/builds/%s/spec as the VM: %v", id, err)
	}
	switch creds, err := v.c.BuildCredentials(ctx, id, v.token); {
	case err == nil:
		view.creds = &creds
	case api.StatusOf(err) == http.StatusNotFound:
	default:
		t.Fatalf("GET /api/builds/%s/credentials as the VM: %v", id, err)
	}
	resp, err := v.c.Source(ctx, id, v.token, "")
	if err != nil {
		t.Fatalf("GET /api/builds/%s/source as the VM: %v", id, err)
	}
	defer resp.Body.Close()
	archive, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	view.files = untar(t, archive)
	return j, view
}

// sameJSON fails unless got marshals to the JSON document want.
func sameJSON(t *testing.T, what string, got any, want string) {
	t.Helper()
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad expectation %s: %v", what, want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, b, want)
	}
}

// noSubmit fails when a POST /api/builds went through the proxy.
func noSubmit(t *testing.T, p *faultProxy, what string) {
	t.Helper()
	for _, r := range p.log() {
		if r.Method == http.MethodPost && strings.HasPrefix(r.Path, "/api/builds") {
			t.Errorf("%s: %s %s was sent", what, r.Method, r.Path)
		}
	}
}

// easJSON5 is eas.json written as JSON5 (comments, trailing commas, an
// unquoted key), as EAS reads it.
const easJSON5 = `// Build profiles: production extends base.
{
  build: {
    /* shared by the store builds */
    "base": {
      "env": {"A": "from-base", "B": "from-base"},
      "channel": "main",
      "android": {"buildType": "app-bundle"},
    },
    "production": {
      "extends": "base",
      "env": {"B": "from-production", "C": "from-production"},
      "android": {"image": "latest"},
      "ios": {"buildConfiguration": "Release", "simulator": true},
    },
    "apk": {"extends": "production", "android": {"buildType": "apk"}},
    "internal": {"distribution": "internal"},
    "dev": {"developmentClient": true, "distribution": "internal"},
  },
}
`

// TestSubmitResolvesEASProfile: the spec stored with a build is the
// eas.json profile resolved for the platform (extends, env merged, the
// platform section over the common keys, EAS's defaults), its
// environment, the app's identity from app.json and the Gradle command
// the profile implies.
func TestSubmitResolvesEASProfile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := project(t, map[string]string{"app.json": appJSON("demo-app"), "eas.json": easJSON5})
	wantApp := api.App{Name: "Demo App", Slug: "demo-app", Version: "1.2.3", AndroidPackage: "com.example.demo",
		AndroidVersionCode: 42, IOSBundleID: "com.example.demo.ios", IOSBuildNumber: "7", ConfigSource: "app.json"}
	const storeProfile = `"env":{"A":"from-base","B":"from-production","C":"from-production"},"channel":"main","image":"latest",
		"distribution":"store","credentialsSource":"remote"`
	cases := []struct {
		profile, wantProfile, environment, gradle, buildType string
	}{
		{"production", `{` + storeProfile + `,"buildType":"app-bundle"}`, "production", ":app:bundleRelease", "app-bundle"},
		{"apk", `{` + storeProfile + `,"buildType":"apk"}`, "production", ":app:assembleRelease", "apk"},
		{"internal", `{"distribution":"internal","credentialsSource":"remote"}`, "preview", ":app:assembleRelease", "apk"},
		{"dev", `{"developmentClient":true,"distribution":"internal","credentialsSource":"remote"}`, "development", ":app:assembleDebug", "apk"},
	}
	for _, c := range cases {
		r := e.mustRun(0, nil, "build", "--no-wait", dir, "--profile", c.profile, "--platform", "android", "--json")
		if !strings.Contains(r.stderr, "debug key") {
			t.Errorf("%s: no warning that the build is signed with the debug key:\n%s", c.profile, r)
		}
		id := queuedID(t, r)
		b := e.build(t, id)
		if b.Profile != c.profile || b.Platform != api.PlatformAndroid {
			t.Errorf("%s: build profile %q platform %q", c.profile, b.Profile, b.Platform)
		}
		spec := e.storedSpec(t, id)
		sameJSON(t, c.profile+": spec.profile", spec.Profile, c.wantProfile)
		if spec.Version != api.SpecVersion || spec.Platform != api.PlatformAndroid || spec.ProfileName != c.profile {
			t.Errorf("%s: version %d platform %q profile_name %q", c.profile, spec.Version, spec.Platform, spec.ProfileName)
		}
		if spec.Environment != c.environment {
			t.Errorf("%s: environment %q, want %q", c.profile, spec.Environment, c.environment)
		}
		if !reflect.DeepEqual(spec.App, wantApp) {
			t.Errorf("%s: app %+v, want %+v", c.profile, spec.App, wantApp)
		}
		sameJSON(t, c.profile+": spec.android", spec.Android, `{"gradle_command":"`+c.gradle+`","build_type":"`+c.buildType+
			`","application_archive_paths":["android/app/build/outputs/**/*.{apk,aab}"]}`)
		sameJSON(t, c.profile+": spec.project", spec.Project, `{"app_dir":"","package_manager":"npm"}`)
		sameJSON(t, c.profile+": spec.credentials", spec.Credentials, `{"source":"none"}`)
		if spec.Message != "" || spec.GitCommit != "" {
			t.Errorf("%s: message %q git commit %q", c.profile, spec.Message, spec.GitCommit)
		}
	}

	// The iOS side of production: the ios section, not the android one.
	id := queuedID(t, e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "ios", "--json"))
	spec := e.storedSpec(t, id)
	sameJSON(t, "ios production", spec.Profile, `{"env":{"A":"from-base","B":"from-production","C":"from-production"},"channel":"main",
		"buildConfiguration":"Release","simulator":true,"distribution":"store","credentialsSource":"remote"}`)
	if spec.ProfileName != "production" || spec.Android != nil || spec.Environment != "production" {
		t.Errorf("ios spec: profile %q android %+v environment %q", spec.ProfileName, spec.Android, spec.Environment)
	}
	// Before prebuild the app config decides: the scheme is the sanitized
	// app name, and a simulator build signs nothing.
	sameJSON(t, "ios build", spec.IOS, `{"scheme":"DemoApp","build_configuration":"Release","simulator":true,
		"application_archive_paths":["ios/build/Build/Products/*simulator/*.app"]}`)
	sameJSON(t, "ios credentials", spec.Credentials, `{"source":"none"}`)
}

// TestLocalCredentials: with credentialsSource "local" the keystore of
// credentials.json travels sealed to the VM, the spec names its
// certificate as keytool does, and neither credentials.json nor the
// keystore is in the source archive, though nothing ignores them. A
// credentials.json that does not open its keystore fails the submit
// before anything is uploaded.
func TestLocalCredentials(t *testing.T) {
	t.Parallel()
	ks := uploadKeystore(t)
	e := newEnv(t)
	files := func(creds string) map[string]string {
		return map[string]string{
			"app.json":         appJSON("signed-app"),
			"eas.json":         `{"build":{"production":{"credentialsSource":"local","env":{"APP_ENV":"prod"}}}}`,
			"credentials.json": creds,
			"keys/upload.jks":  string(ks.data),
			"keys/README.md":   "how the keys were made",
			".gitignore":       "node_modules/\n",
		}
	}
	dir := project(t, files(credentialsFile("keys/upload.jks", ks.storePw, ks.alias, ks.keyPw)))
	r := e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "android", "--json")
	for _, secret := range []string{ks.storePw, ks.keyPw} {
		if strings.Contains(r.stdout+r.stderr, secret) {
			t.Errorf("submit printed a keystore password\n%s", r)
		}
	}
	id := queuedID(t, r)
	spec := e.storedSpec(t, id)
	sameJSON(t, "profile", spec.Profile, `{"env":{"APP_ENV":"prod"},"credentialsSource":"local","distribution":"store"}`)
	if spec.Credentials.Source != api.CredentialsLocal || spec.Credentials.Android == nil {
		t.Fatalf("credentials %+v", spec.Credentials)
	}
	if k := spec.Credentials.Android; k.CertificateSHA256 != ks.sha256 || k.Type != "JKS" || k.KeyAlias != ks.alias || k.Name != "" {
		t.Errorf("keystore info %+v; keytool says SHA-256 %s", k, ks.sha256)
	}
	if got, want := spec.Credentials.Android.Subject, strings.ReplaceAll(ks.owner, ", ", ","); got != want {
		t.Errorf("subject %q, keytool's owner %q", got, want)
	}
	if spec.Android == nil || spec.Android.GradleCommand != ":app:bundleRelease" {
		t.Errorf("android %+v", spec.Android)
	}
	human := e.mustRun(0, nil, "status", id)
	if want := `local keystore, key "upload", certificate SHA-256 ` + ks.sha256; !strings.Contains(human.stdout, want) {
		t.Errorf("status lacks %q:\n%s", want, human.stdout)
	}

	w := e.worker("android")
	job, vm := w.claimAsVM(t, id)
	if vm.job.Spec == nil || vm.job.Spec.Credentials.Android == nil || vm.job.Spec.Credentials.Android.CertificateSHA256 != ks.sha256 {
		t.Errorf("the VM's spec: %+v", vm.job.Spec)
	}
	if vm.creds == nil || vm.creds.Android == nil {
		t.Fatal("the VM got no Android keystore")
	}
	if a := vm.creds.Android; !bytes.Equal(a.Keystore, ks.data) || a.KeystorePassword != ks.storePw || a.KeyAlias != ks.alias || a.KeyPassword != ks.keyPw {
		t.Errorf("the VM's keystore: %d bytes (want %d), store password %q, alias %q, key password %q",
			len(a.Keystore), len(ks.data), a.KeystorePassword, a.KeyAlias, a.KeyPassword)
	}
	for _, want := range []string{"app.json", "eas.json", "package.json", ".gitignore", "keys/README.md"} {
		if _, ok := vm.files[want]; !ok {
			t.Errorf("%s is missing from the source archive", want)
		}
	}
	for name, body := range vm.files {
		if name == "credentials.json" || strings.HasSuffix(name, ".jks") || body == string(ks.data) || strings.Contains(body, ks.storePw) {
			t.Errorf("%s left the machine in the source archive", name)
		}
	}
	w.finish(job, false, "", nil)

	// Broken credentials: exit 2 naming the file and the field, no build.
	before := e.buildCount(t)
	p := e.proxy()
	bad := []struct {
		name  string
		files map[string]string
		field string
	}{
		{"wrong keystore password", files(credentialsFile("keys/upload.jks", "not-the-password", ks.alias, ks.keyPw)), "android.keystore.keystorePassword"},
		{"wrong key password", files(credentialsFile("keys/upload.jks", ks.storePw, ks.alias, "not-the-key-password")), "android.keystore.keyPassword"},
		{"missing alias", files(credentialsFile("keys/upload.jks", ks.storePw, "no-such-alias", ks.keyPw)), "android.keystore.keyAlias"},
		{"missing keystore file", files(credentialsFile("keys/gone.jks", ks.storePw, ks.alias, ks.keyPw)), "android.keystore.keystorePath"},
	}
	for _, c := range bad {
		r := e.run(map[string]string{"EXPO_CONTROLLER_URL": p.URL}, "build", "--no-wait", project(t, c.files), "--platform", "android")
		if r.code != ExitUsage {
			t.Errorf("%s: want exit %d\n%s", c.name, ExitUsage, r)
			continue
		}
		for _, want := range []string{"credentials.json", c.field} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%s: stderr lacks %q\n%s", c.name, want, r)
			}
		}
		noSubmit(t, p, c.name)
	}
	if n := e.buildCount(t); n != before {
		t.Errorf("%d builds after the refused submits, want %d", n, before)
	}
}

// TestBadEASJSON: every eas.json problem is a usage error (exit 2) that
// says what is wrong, and nothing is uploaded.
func TestBadEASJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.proxy()
	cases := []struct {
		name, easJSON, profile string
		want                   []string
	}{
		{"unknown profile", `{"build":{"production":{},"preview":{"distribution":"internal"}}}`, "staging",
			[]string{`no build profile "staging"`, `"production"`, `"preview"`}},
		{"extends cycle", `{"build":{"production":{"extends":"a"},"a":{"extends":"b"},"b":{"extends":"a"}}}`, "",
			[]string{`"extends"`, "cycle", "production → a → b → a"}},
		{"missing parent", `{"build":{"production":{"extends":"base"}}}`, "",
			[]string{`"production" extends "base", which does not exist`}},
		{"syntax error", "{\n  \"build\": {\n    \"production\": {}\n    \"preview\": {}\n  }\n}\n", "",
			[]string{"eas.json:4:5"}},
		{"unknown key", `{"build":{"production":{"distrbution":"store"}}}`, "",
			[]string{"build.production.distrbution", "is not allowed"}},
		{"resourceClass large", `{"build":{"production":{"resourceClass":"large"}}}`, "",
			[]string{`resourceClass "large"`, "8 CPU cores", "no online android worker"}},
		{"autoIncrement version with the remote source", `{"cli":{"appVersionSource":"remote"},"build":{"production":{"android":{"autoIncrement":"version"}}}}`, "",
			[]string{`{"autoIncrement": "version"} is not supported when app version source is set to remote`}},
		{"unknown version source", `{"cli":{"appVersionSource":"server"},"build":{"production":{}}}`, "",
			[]string{"appVersionSource"}},
		{"custom build config", `{"build":{"production":{"config":"x.yml"}}}`, "",
			[]string{"config: custom build YAML", "cannot apply"}},
	}
	for _, c := range cases {
		dir := project(t, map[string]string{"eas.json": c.easJSON})
		args := []string{"build", "--no-wait", dir, "--platform", "android"}
		if c.profile != "" {
			args = append(args, "--profile", c.profile)
		}
		r := e.run(map[string]string{"EXPO_CONTROLLER_URL": p.URL}, args...)
		if r.code != ExitUsage {
			t.Errorf("%s: want exit %d\n%s", c.name, ExitUsage, r)
			continue
		}
		for _, w := range append(c.want, "eas.json") {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s: stderr lacks %q\n%s", c.name, w, r)
			}
		}
		noSubmit(t, p, c.name)
	}
	if n := e.buildCount(t); n != 0 {
		t.Errorf("%d builds were made", n)
	}
}

// TestSubmitAllMessageAndStatus: --platform all makes one build per
// platform, each with its own spec; --message is kept in the spec; status
// shows what was decided.
func TestSubmitAllMessageAndStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := project(t, map[string]string{"app.json": appJSON("both"),
		"eas.json": `{"build":{"production":{"env":{"API":"https://api"},"android":{"buildType":"apk"},"ios":{"simulator":true}}}}`})
	r := e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "all", "--message", "hello", "--json")
	type queuedBuild struct {
		ID       string `json:"id"`
		Platform string `json:"platform"`
	}
	builds := jsonOf[[]queuedBuild](t, r)
	if len(builds) != 2 || builds[0].ID == builds[1].ID {
		t.Fatalf("--platform all: %s", r)
	}
	ids := map[string]string{}
	for _, b := range builds {
		b.Platform = strings.ToLower(b.Platform) // EAS's ANDROID, IOS
		ids[b.Platform] = b.ID
		if e.build(t, b.ID).Platform != b.Platform {
			t.Errorf("build %s is not %s", b.ID, b.Platform)
		}
	}
	android, ios := e.storedSpec(t, ids["android"]), e.storedSpec(t, ids["ios"])
	sameJSON(t, "android profile", android.Profile, `{"env":{"API":"https://api"},"buildType":"apk","distribution":"store","credentialsSource":"remote"}`)
	sameJSON(t, "ios profile", ios.Profile, `{"env":{"API":"https://api"},"simulator":true,"distribution":"store","credentialsSource":"remote"}`)
	if android.Platform != "android" || android.Android == nil || android.Android.GradleCommand != ":app:assembleRelease" {
		t.Errorf("android spec: %+v", android)
	}
	if ios.Platform != "ios" || ios.Android != nil || ios.Credentials.Source != api.CredentialsNone {
		t.Errorf("ios spec: %+v", ios)
	}
	if android.Message != "hello" || ios.Message != "hello" {
		t.Errorf("messages %q and %q, want hello", android.Message, ios.Message)
	}

	human := e.mustRun(0, nil, "status", ids["android"])
	for _, want := range []string{
		"Message", "hello",
		"Demo App (both 1.2.3, com.example.demo)",
		"production · store distribution · environment production",
		"gradlew :app:assembleRelease (apk)",
		"npm (no lockfile",
		"Signing", "none",
		"Env", "API",
	} {
		if !strings.Contains(human.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, human.stdout)
		}
	}
	if strings.Contains(human.stdout, "https://api") {
		t.Errorf("status shows the profile's env values:\n%s", human.stdout)
	}
	if h := e.mustRun(0, nil, "status", ids["ios"]); strings.Contains(h.stdout, "gradlew") || !strings.Contains(h.stdout, "hello") {
		t.Errorf("ios status:\n%s", h.stdout)
	}
	js := e.mustRun(0, nil, "status", ids["ios"], "--json")
	b := jsonOf[api.Build](t, js)
	if b.Spec == nil || b.Spec.Platform != "ios" || b.Spec.Message != "hello" || b.Spec.App.IOSBundleID != "com.example.demo.ios" {
		t.Errorf("status --json spec: %+v", b.Spec)
	}
	if raw := jsonOf[map[string]json.RawMessage](t, js); len(raw["spec"]) == 0 {
		t.Errorf("status --json has no spec: %s", js.stdout)
	}
}

// monorepo writes a workspace with the app at apps/mobile and a package at
// packages/shared; root holds the root's files (and overrides).
func monorepo(t *testing.T, root map[string]string) string {
	t.Helper()
	files := map[string]string{
		"apps/mobile/package.json":     `{"name":"mobile","dependencies":{"shared":"*"}}`,
		"apps/mobile/app.json":         appJSON("mobile"),
		"apps/mobile/App.tsx":          "export default function App() {}",
		"packages/shared/package.json": `{"name":"shared"}`,
		"packages/shared/index.js":     "module.exports = 1",
	}
	for k, v := range root {
		files[k] = v
	}
	dir := project(t, files)
	if _, ok := root["app.json"]; !ok {
		os.Remove(filepath.Join(dir, "app.json")) // project() adds one at the root
	}
	return dir
}

const yarnWorkspaceRoot = `{"name":"mono","private":true,"workspaces":["apps/*","packages/*"]}`

// TestWorkspaceMonorepos: an app inside a Yarn or pnpm workspace is packed
// from the workspace root, with the app's place and the root's package
// manager in the spec; a root whose lockfiles contradict each other is
// refused.
func TestWorkspaceMonorepos(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.worker("android")
	cases := []struct {
		name, manager, lockfile string
		root                    map[string]string
	}{
		{"yarn", "yarn", "yarn.lock", map[string]string{
			"package.json": yarnWorkspaceRoot,
			"yarn.lock":    "# THIS IS AN AUTOGENERATED FILE. DO NOT EDIT THIS FILE DIRECTLY.\n# yarn lockfile v1\n",
		}},
		{"pnpm", "pnpm", "pnpm-lock.yaml", map[string]string{
			"package.json":        `{"name":"mono","private":true}`,
			"pnpm-workspace.yaml": "packages:\n  - 'apps/*'\n  - 'packages/*'\n",
			"pnpm-lock.yaml":      "lockfileVersion: '9.0'\n",
		}},
	}
	for _, c := range cases {
		root := monorepo(t, c.root)
		id := queuedID(t, e.mustRun(0, nil, "build", "--no-wait", filepath.Join(root, "apps", "mobile"), "--platform", "android", "--json"))
		spec := e.storedSpec(t, id)
		p := spec.Project
		if p.AppDir != "apps/mobile" || p.PackageManager != c.manager || p.Lockfile != c.lockfile || !p.Workspace || p.YarnBerry {
			t.Errorf("%s: project %+v", c.name, p)
		}
		if spec.App.Slug != "mobile" {
			t.Errorf("%s: the app config was not read in the app: %+v", c.name, spec.App)
		}
		job, vm := w.claimAsVM(t, id)
		for _, want := range []string{"package.json", c.lockfile, "apps/mobile/app.json", "apps/mobile/package.json", "apps/mobile/App.tsx",
			"packages/shared/package.json", "packages/shared/index.js"} {
			if _, ok := vm.files[want]; !ok {
				t.Errorf("%s: %s is missing from the source archive (%d files)", c.name, want, len(vm.files))
			}
		}
		if c.name == "pnpm" {
			if _, ok := vm.files["pnpm-workspace.yaml"]; !ok {
				t.Errorf("pnpm: pnpm-workspace.yaml is missing from the source archive")
			}
		}
		if _, ok := vm.files["app.json"]; ok {
			t.Errorf("%s: app.json at the archive root: the app was not placed at apps/mobile", c.name)
		}
		if vm.job.Spec == nil || vm.job.Spec.Project != p {
			t.Errorf("%s: the VM's spec project: %+v", c.name, vm.job.Spec)
		}
		w.finish(job, false, "", nil)
	}

	// Two managers' lockfiles and no packageManager: refused, naming both.
	p := e.proxy()
	root := monorepo(t, map[string]string{
		"package.json":      yarnWorkspaceRoot,
		"yarn.lock":         "# yarn lockfile v1\n",
		"package-lock.json": `{"lockfileVersion":3}`,
	})
	r := e.run(map[string]string{"EXPO_CONTROLLER_URL": p.URL}, "build", "--no-wait", filepath.Join(root, "apps", "mobile"), "--platform", "android")
	if r.code != ExitUsage {
		t.Fatalf("mixed lockfiles: want exit %d\n%s", ExitUsage, r)
	}
	for _, want := range []string{"yarn.lock", "package-lock.json", "packageManager"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("mixed lockfiles: stderr lacks %q\n%s", want, r)
		}
	}
	noSubmit(t, p, "mixed lockfiles")
}

// TestWorkspaceCredentialsStayHome: in a workspace the archive is the
// workspace root, so credentials.json and its keystore stay out of it
// wherever they are in it: in the app, or beside it in the workspace.
func TestWorkspaceCredentialsStayHome(t *testing.T) {
	t.Parallel()
	ks := uploadKeystore(t)
	e := newEnv(t)
	w := e.worker("android")
	cases := []struct {
		name, keystorePath string
		// keystore is the keystore's place from the workspace root.
		keystore string
	}{
		{"keystore in the app", "keys/upload.jks", "apps/mobile/keys/upload.jks"},
		{"keystore beside the app", "../../secrets/upload.jks", "secrets/upload.jks"},
	}
	for _, c := range cases {
		root := monorepo(t, map[string]string{
			"package.json":                 yarnWorkspaceRoot,
			"yarn.lock":                    "# yarn lockfile v1\n",
			"apps/mobile/eas.json":         `{"build":{"production":{"credentialsSource":"local"}}}`,
			"apps/mobile/credentials.json": credentialsFile(c.keystorePath, ks.storePw, ks.alias, ks.keyPw),
			c.keystore:                     string(ks.data),
		})
		id := queuedID(t, e.mustRun(0, nil, "build", "--no-wait", filepath.Join(root, "apps", "mobile"), "--platform", "android", "--json"))
		spec := e.storedSpec(t, id)
		if k := spec.Credentials.Android; spec.Credentials.Source != api.CredentialsLocal || k == nil || k.CertificateSHA256 != ks.sha256 {
			t.Errorf("%s: credentials %+v", c.name, spec.Credentials)
		}
		job, vm := w.claimAsVM(t, id)
		if _, ok := vm.files["apps/mobile/app.json"]; !ok {
			t.Fatalf("%s: the archive is not the workspace: %d files", c.name, len(vm.files))
		}
		for name, body := range vm.files {
			if name == "apps/mobile/credentials.json" || name == c.keystore || body == string(ks.data) {
				t.Errorf("%s: %s left the machine in the source archive", c.name, name)
			}
		}
		if vm.creds == nil || vm.creds.Android == nil || !bytes.Equal(vm.creds.Android.Keystore, ks.data) {
			t.Errorf("%s: the VM did not get the keystore", c.name)
		}
		w.finish(job, false, "", nil)
	}
}

// TestDynamicConfigSeesFarmVariables: app.config.js is evaluated (by the
// project's own expo CLI; here a stand-in printing what its environment
// holds) with the farm's plaintext and sensitive variables of the build's
// environment under the profile's env, never with secret ones.
func TestDynamicConfigSeesFarmVariables(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := project(t, map[string]string{
		"app.json":      "",
		"app.config.js": "module.exports = () => ({})",
		"eas.json":      `{"build":{"production":{"env":{"FROM_PROFILE":"p"}}}}`,
		// A stand-in for `expo config --json --type public` (@expo/cli does not install here).
		"node_modules/.bin/expo": `#!/bin/sh
printf '{"name":"n-%s-%s","slug":"dyn","version":"1.0.0","android":{"package":"com.example.%s"}}' "${SECRET_X:-nosecret}" "${FROM_PROFILE:-none}" "${APP_VARIANT:-none}"
`,
	})
	os.Remove(filepath.Join(dir, "app.json"))
	os.Chmod(filepath.Join(dir, "node_modules/.bin/expo"), 0o755)
	e.mustRunApp(t, stdin("previewapp\n"), 0, "env", "set", "APP_VARIANT", "--visibility", "sensitive", "--environment", "production", "--project", "dyn")
	e.mustRunApp(t, stdin("hidden-value\n"), 0, "env", "set", "SECRET_X", "--visibility", "secret", "--environment", "production", "--project", "dyn")
	e.mustRunApp(t, stdin("p-from-farm\n"), 0, "env", "set", "FROM_PROFILE", "--visibility", "plaintext", "--environment", "production", "--project", "dyn")
	r := e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "android", "--json")
	spec := e.storedSpec(t, queuedID(t, r))
	if spec.App.AndroidPackage != "com.example.previewapp" || spec.App.Name != "n-nosecret-p" || spec.App.ConfigSource != "expo config" {
		t.Fatalf("app %+v: want the farm's APP_VARIANT, the profile's FROM_PROFILE over the farm's, no secret", spec.App)
	}
	if !strings.Contains(r.stderr, "APP_VARIANT") {
		t.Errorf("the farm's variables used are not named:\n%s", r.stderr)
	}
}

// TestAndroidPackageNeededUnlessCustomBuild: expo prebuild needs
// android.package, so an Android submit without one is refused before any
// upload, unless the project builds itself with a freeagent:build script.
func TestAndroidPackageNeededUnlessCustomBuild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	app := `{"expo":{"name":"x","slug":"x"}}`
	r := e.mustRun(ExitUsage, nil, "build", "--no-wait", project(t, map[string]string{"app.json": app}), "--platform", "android")
	if !strings.Contains(r.stderr, "android.package") || e.buildCount(t) != 0 {
		t.Fatalf("no android.package: %s", r)
	}
	custom := project(t, map[string]string{"app.json": app, "package.json": `{"name":"x","scripts":{"freeagent:build":"true"}}`})
	e.mustRun(0, nil, "build", "--no-wait", custom, "--platform", "android", "--json")
}
