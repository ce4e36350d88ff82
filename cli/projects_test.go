package cli

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
)

// stdin gives expo-build a piped standard input.
func stdin(s string) func(*App) {
	return func(a *App) { a.Stdin = strings.NewReader(s) }
}

// mustRunApp is runApp that fails the test unless expo-build exits with want.
func (e *env) mustRunApp(t *testing.T, adjust func(*App), want int, args ...string) result {
	t.Helper()
	r := e.runApp(adjust, nil, args...)
	if r.code != want {
		t.Fatalf("expo-build %s: want exit %d\n%s", strings.Join(args, " "), want, r)
	}
	return r
}

// TestEnvVariables: env set reads the value from standard input and never
// prints it; env list shows plaintext values and hides secret ones;
// env delete removes; a file variable reaches the VM as its content; the
// build's VM gets the variables of its environment only; bad input fails
// before any request.
func TestEnvVariables(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const secret = "s3cr3t-Value-9f1c"
	const proj = "env-app"
	r := e.mustRunApp(t, stdin(secret+"\n"), 0, "env", "set", "API_SECRET", "--visibility", "secret", "--environment", "production", "--project", proj)
	if strings.Contains(r.stdout+r.stderr, secret) {
		t.Fatalf("env set echoed the secret value\n%s", r)
	}
	if !strings.Contains(r.stdout, "API_SECRET") || !strings.Contains(r.stdout, "production") || !strings.Contains(r.stdout, proj) {
		t.Errorf("env set does not say what it set:\n%s", r)
	}
	// Again, as JSON, into two environments: still never printed.
	r = e.mustRunApp(t, stdin(secret), 0, "env", "set", "API_SECRET", "--visibility", "secret", "--environment", "production",
		"--environment", "development", "--project", proj, "--json")
	if strings.Contains(r.stdout+r.stderr, secret) {
		t.Fatalf("env set --json echoed the secret value\n%s", r)
	}
	if set := jsonOf[api.VariableList](t, r); len(set.Variables) != 2 {
		t.Errorf("env set into two environments: %+v", set)
	}
	e.mustRunApp(t, stdin("https://example.com/api\n"), 0, "env", "set", "PUBLIC_URL", "--visibility", "plaintext", "--environment", "production", "--project", proj)
	e.mustRunApp(t, stdin("preview-only"), 0, "env", "set", "PREVIEW_ONLY", "--visibility", "plaintext", "--environment", "preview", "--project", proj)
	file := filepath.Join(t.TempDir(), "google-services.json")
	content := []byte("{\"project_info\":{\"project_id\":\"demo\"}}\n\x00\xff")
	if err := os.WriteFile(file, content, 0o600); err != nil {
		t.Fatal(err)
	}
	e.mustRunApp(t, nil, 0, "env", "set", "GOOGLE_SERVICES_JSON", "--type", "file", "--value-file", file, "--visibility", "sensitive",
		"--environment", "production", "--project", proj)

	list := e.mustRunApp(t, nil, 0, "env", "list", "--environment", "production", "--project", proj)
	wantSize := fmt.Sprintf("(file, %d bytes)", len(content))
	for _, want := range []string{"API_SECRET", "secret", "PUBLIC_URL", "https://example.com/api", "GOOGLE_SERVICES_JSON", wantSize} {
		if !strings.Contains(list.stdout, want) {
			t.Errorf("env list lacks %q:\n%s", want, list.stdout)
		}
	}
	if strings.Contains(list.stdout+list.stderr, secret) || strings.Contains(list.stdout, "PREVIEW_ONLY") {
		t.Errorf("env list shows a secret value or another environment:\n%s", list)
	}
	js := e.mustRunApp(t, nil, 0, "env", "list", "--project", proj, "--json")
	if strings.Contains(js.stdout, secret) {
		t.Errorf("env list --json shows the secret value:\n%s", js.stdout)
	}
	vars := map[string]api.Variable{}
	for _, v := range jsonOf[api.VariableList](t, js).Variables {
		vars[v.Environment+"/"+v.Name] = v
	}
	if v := vars["production/API_SECRET"]; v.Visibility != api.VisibilitySecret || v.Value != "" || v.Project != proj {
		t.Errorf("secret in the list: %+v", v)
	}
	if v := vars["production/PUBLIC_URL"]; v.Value != "https://example.com/api" || v.Visibility != api.VisibilityPlaintext {
		t.Errorf("plaintext in the list: %+v", v)
	}
	if v := vars["preview/PREVIEW_ONLY"]; v.Value != "preview-only" {
		t.Errorf("preview variable in the list: %+v", v)
	}
	if v := vars["development/API_SECRET"]; v.Visibility != api.VisibilitySecret || v.Value != "" {
		t.Errorf("secret in development: %+v", v)
	}
	if len(vars) != 5 {
		t.Errorf("%d variables listed, want 5: %v", len(vars), vars)
	}

	// The build's VM gets its environment's variables, values included.
	dir := project(t, map[string]string{"app.json": appJSON(proj)})
	id := queuedID(t, e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "android", "--json"))
	w := e.worker("android")
	job, vm := w.claimAsVM(t, id)
	got := map[string]api.Variable{}
	for _, v := range vm.job.Variables {
		got[v.Name] = v
	}
	if v := got["API_SECRET"]; v.Value != secret || v.Environment != "production" {
		t.Errorf("the VM's API_SECRET: %+v", v)
	}
	if v := got["PUBLIC_URL"]; v.Value != "https://example.com/api" {
		t.Errorf("the VM's PUBLIC_URL: %+v", v)
	}
	if v := got["GOOGLE_SERVICES_JSON"]; v.Type != api.VariableFile || v.Value != base64.StdEncoding.EncodeToString(content) {
		t.Errorf("the VM's file variable: %+v, want the base64 of %q", v, content)
	}
	if _, ok := got["PREVIEW_ONLY"]; ok || len(got) != 3 {
		t.Errorf("the VM got %d variables (%v), want production's 3", len(got), got)
	}
	w.finish(job, false, "", nil)

	e.mustRunApp(t, nil, 0, "env", "delete", "API_SECRET", "--environment", "production", "--project", proj)
	left := map[string]bool{}
	for _, v := range jsonOf[api.VariableList](t, e.mustRunApp(t, nil, 0, "env", "list", "--project", proj, "--json")).Variables {
		left[v.Environment+"/"+v.Name] = true
	}
	if left["production/API_SECRET"] || !left["development/API_SECRET"] || !left["production/PUBLIC_URL"] || len(left) != 4 {
		t.Errorf("after env delete API_SECRET --environment production: %v", left)
	}
	e.mustRunApp(t, nil, 0, "env", "delete", "PREVIEW_ONLY", "--project", proj) // every environment
	if l := e.mustRunApp(t, nil, 0, "env", "list", "--project", proj); strings.Contains(l.stdout, "PREVIEW_ONLY") {
		t.Errorf("after env delete PREVIEW_ONLY:\n%s", l.stdout)
	}
	// --project names the project: another slug has none of these.
	if other := e.mustRunApp(t, nil, 0, "env", "list", "--project", "other-app"); strings.Contains(other.stdout, "PUBLIC_URL") {
		t.Errorf("another project's list:\n%s", other.stdout)
	}

	// Bad input: exit 2 before any request.
	p := e.proxy()
	viaProxy := func(a *App) {
		env := a.Env
		a.Env = func(k string) string {
			if k == "EXPO_CONTROLLER_URL" {
				return p.URL
			}
			return env(k)
		}
	}
	bad := []struct {
		name  string
		input string
		args  []string
		want  string
	}{
		{"invalid name", "v", []string{"env", "set", "1BAD", "--visibility", "plaintext", "--project", proj}, "not a valid environment variable name"},
		{"no visibility", "v", []string{"env", "set", "GOOD", "--project", proj}, "--visibility is required"},
		{"oversized value", strings.Repeat("x", 32<<10+1), []string{"env", "set", "BIG", "--visibility", "secret", "--project", proj}, "larger than"},
		{"oversized file", "", []string{"env", "set", "BIG_FILE", "--type", "file", "--value-file", bigFile(t, 256<<10+1), "--visibility", "sensitive", "--project", proj}, "larger than"},
		{"short secret", "abc1234", []string{"env", "set", "SHORT", "--visibility", "secret", "--project", proj}, "needs at least 8"},
		{"secret EXPO_PUBLIC_", "long-enough-value", []string{"env", "set", "EXPO_PUBLIC_KEY", "--visibility", "secret", "--project", proj}, "EXPO_PUBLIC_KEY cannot be secret: Metro inlines"},
		{"short sensitive file", "", []string{"env", "set", "SHORT_FILE", "--type", "file", "--value-file", bigFile(t, 7), "--visibility", "sensitive", "--project", proj}, "needs at least 8"},
	}
	for _, c := range bad {
		r := e.runApp(func(a *App) { stdin(c.input)(a); viaProxy(a) }, nil, c.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: want exit %d and %q\n%s", c.name, ExitUsage, c.want, r)
		}
		if reqs := p.log(); len(reqs) != 0 {
			t.Errorf("%s: requests were sent: %+v", c.name, reqs)
		}
	}
	// The 32 KiB value itself is accepted.
	e.mustRunApp(t, stdin(strings.Repeat("x", 32<<10)), 0, "env", "set", "MAX", "--visibility", "secret", "--environment", "preview", "--project", proj)
}

func bigFile(t *testing.T, n int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "big.bin")
	if err := os.WriteFile(p, bytes.Repeat([]byte{'y'}, n), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFarmCredentialsAndCwdProject runs in the app's directory (not in
// parallel: it changes the working directory). env and credentials take
// the project from the app there; credentials set uploads the keystore of
// credentials.json; a build with remote credentials names it by
// fingerprint and its VM gets the farm's keystore; once deleted, a build
// falls back to the debug key, with a warning.
func TestFarmCredentialsAndCwdProject(t *testing.T) {
	ks := uploadKeystore(t)
	e := newEnv(t)
	const proj = "farm-app"
	withCreds := project(t, map[string]string{
		"app.json":           appJSON(proj),
		"credentials.json":   credentialsFile("android/upload.jks", ks.storePw, ks.alias, ks.keyPw),
		"android/upload.jks": string(ks.data),
	})
	t.Chdir(withCreds)

	// env without --project: the slug of the app in the current directory.
	set := e.mustRunApp(t, stdin("cwd-value\n"), 0, "env", "set", "CWD_VAR", "--visibility", "plaintext", "--environment", "preview")
	if !strings.Contains(set.stdout, proj) {
		t.Errorf("env set does not name the project %s:\n%s", proj, set.stdout)
	}
	if l := e.mustRunApp(t, nil, 0, "env", "list", "--project", proj); !strings.Contains(l.stdout, "CWD_VAR") || !strings.Contains(l.stdout, "cwd-value") {
		t.Errorf("the variable set in the app's directory is not in %s:\n%s", proj, l.stdout)
	}
	if l := e.mustRunApp(t, nil, 0, "env", "list"); !strings.Contains(l.stdout, "CWD_VAR") {
		t.Errorf("env list in the app's directory:\n%s", l.stdout)
	}

	// credentials set uploads the keystore, validated, shown by fingerprint.
	r := e.mustRunApp(t, nil, 0, "credentials", "set", "--platform", "android")
	if strings.Contains(r.stdout+r.stderr, ks.storePw) || strings.Contains(r.stdout+r.stderr, ks.keyPw) {
		t.Errorf("credentials set printed a password\n%s", r)
	}
	if !strings.Contains(r.stdout, ks.sha256) {
		t.Errorf("credentials set does not show the certificate SHA-256 %s:\n%s", ks.sha256, r)
	}
	creds := jsonOf[api.CredentialList](t, e.mustRunApp(t, nil, 0, "credentials", "list", "--json")).Credentials
	if len(creds) != 1 || creds[0].Project != proj || creds[0].Platform != "android" || creds[0].Name != "default" ||
		creds[0].Android == nil || creds[0].Android.CertificateSHA256 != ks.sha256 || creds[0].Android.KeyAlias != ks.alias {
		t.Fatalf("credentials list: %+v", creds)
	}
	if l := e.mustRunApp(t, nil, 0, "credentials", "list"); !strings.Contains(l.stdout, ks.sha256) {
		t.Errorf("credentials list lacks the fingerprint:\n%s", l.stdout)
	}

	// A project of the same slug with no credentials.json and no eas.json:
	// EAS's default, remote credentials, are the farm's keystore.
	bare := project(t, map[string]string{"app.json": appJSON(proj)})
	id := queuedID(t, e.mustRun(0, nil, "build", "--no-wait", bare, "--platform", "android", "--json"))
	spec := e.storedSpec(t, id)
	sameJSON(t, "remote credentials", spec.Credentials, `{"source":"remote","android":{"name":"default","type":"JKS","key_alias":"`+ks.alias+
		`","certificate_sha256":"`+ks.sha256+`","subject":"`+strings.ReplaceAll(ks.owner, ", ", ",")+`"}}`)
	w := e.worker("android")
	job, vm := w.claimAsVM(t, id)
	if vm.creds == nil || vm.creds.Android == nil {
		t.Fatal("the VM got no keystore for a remote-credentials build")
	}
	if a := vm.creds.Android; !bytes.Equal(a.Keystore, ks.data) || a.KeystorePassword != ks.storePw || a.KeyAlias != ks.alias || a.KeyPassword != ks.keyPw {
		t.Errorf("the VM's keystore: %d bytes (want %d), alias %q", len(a.Keystore), len(ks.data), a.KeyAlias)
	}
	w.finish(job, false, "", nil)

	// credentialsSource "remote" said in eas.json; credentials.json present
	// but unused still stays out of the archive.
	explicit := project(t, map[string]string{"app.json": appJSON(proj),
		"eas.json":           `{"build":{"production":{"credentialsSource":"remote"}}}`,
		"credentials.json":   credentialsFile("android/upload.jks", ks.storePw, ks.alias, ks.keyPw),
		"android/upload.jks": string(ks.data)})
	id = queuedID(t, e.mustRun(0, nil, "build", "--no-wait", explicit, "--platform", "android", "--json"))
	if c := e.storedSpec(t, id).Credentials; c.Source != api.CredentialsRemote || c.Android == nil || c.Android.CertificateSHA256 != ks.sha256 {
		t.Errorf("explicit remote credentials: %+v", c)
	}
	job, vm = w.claimAsVM(t, id)
	for name := range vm.files {
		if name == "credentials.json" || name == "android/upload.jks" {
			t.Errorf("%s is in the source archive of a remote-credentials build", name)
		}
	}
	w.finish(job, false, "", nil)
	// A keystoreName the farm lacks is refused before the upload.
	named := project(t, map[string]string{"app.json": appJSON(proj),
		"eas.json": `{"build":{"production":{"android":{"credentialsSource":"remote","keystoreName":"other"}}}}`})
	if r := e.run(nil, "build", "--no-wait", named, "--platform", "android"); r.code != ExitUsage || !strings.Contains(r.stderr, `keystoreName "other"`) {
		t.Errorf("unknown keystoreName: want exit %d\n%s", ExitUsage, r)
	}

	// Deleted: the next remote build warns and signs with the debug key.
	e.mustRunApp(t, nil, 0, "credentials", "delete", "--platform", "android")
	if l := jsonOf[api.CredentialList](t, e.mustRunApp(t, nil, 0, "credentials", "list", "--json")); len(l.Credentials) != 0 {
		t.Errorf("after delete: %+v", l.Credentials)
	}
	r = e.mustRun(0, nil, "build", "--no-wait", bare, "--platform", "android", "--json")
	if !strings.Contains(r.stderr, "debug key") || !strings.Contains(r.stderr, proj) {
		t.Errorf("no debug-signing warning naming the project:\n%s", r)
	}
	id = queuedID(t, r)
	sameJSON(t, "credentials after delete", e.storedSpec(t, id).Credentials, `{"source":"none"}`)
	job, vm = w.claimAsVM(t, id)
	if vm.creds != nil {
		t.Errorf("the VM got credentials for a debug-signed build: %+v", vm.creds)
	}
	w.finish(job, false, "", nil)
}
