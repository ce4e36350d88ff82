package agent_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/cli"
	"github.com/freeagent-build/freeagent/internal/npmoracle"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

// The eas.json of the Android end-to-end project: JSON5, production
// extending a base, a profile for APKs, and a profile the build must not
// see anything of.
const easAndroidJSON = `// eas.json of a team coming from EAS Build
{
  build: {
    base: {
      env: { API_URL: "https://base.example", SHARED: "base" },
      credentialsSource: "local",
    },
    production: {
      extends: "base",
      env: { SHARED: "production", ONLY_PROD: "1" },
    },
    apk: { extends: "production", android: { buildType: "apk" } },
    preview: { env: { PREVIEW_ONLY: "yes" } },
  },
}
`

// reportJS is the project's eas-build-post-install hook: it prints the
// environment the build sees, and a secret as it is, in base64 and hashed.
const reportJS = `const names = ['API_URL', 'SHARED', 'ONLY_PROD', 'PREVIEW_ONLY', 'EAS_BUILD', 'EAS_BUILD_PROFILE', 'EAS_BUILD_PLATFORM'];
const seen = {};
for (const n of names) if (process.env[n] !== undefined) seen[n] = process.env[n];
console.log('PROFILE_ENV ' + JSON.stringify(seen));
const s = process.env.MY_SECRET || '';
console.log('SECRET_SHA256 ' + require('crypto').createHash('sha256').update(s).digest('hex'));
console.log('SECRET_PLAIN ' + s);
console.log('SECRET_B64 ' + Buffer.from(s).toString('base64'));
`

// TestExpoTeamAndroidBuilds is an Expo team's Android build, through the real
// parts: expo-build resolves a JSON5 eas.json whose production profile
// extends a base and reads credentials.json; the controller keeps a secret
// set with `expo-build env set`; the agent runs the build in a (fake Tart)
// VM whose freeagent-vm applies the spec, with the stand-in Gradle signing
// through AGP's injected properties with the real apksigner/jarsigner.
func TestExpoTeamAndroidBuilds(t *testing.T) {
	testtool.Need(t, "node", "keytool", "jarsigner", "apksigner", "zipalign")
	f := newFarm(t, nil)
	f.startAgent()
	dir := androidProject(t)
	upload := keystoreSHA256(t, filepath.Join(dir, "android", "keystores", "upload.jks"), "upload", "store-pass-1")
	expoBuild := f.expoBuild(t)

	const secret = "s3cr3t-Value/with+chars=93f1"
	if code, out, errOut := expoBuild(secret+"\n", "env", "set", "MY_SECRET", "--visibility", "secret", "--environment", "production", "--project", "android-app"); code != 0 ||
		strings.Contains(out+errOut, secret) {
		t.Fatalf("env set: exit %d\n%s%s", code, out, errOut)
	}

	// The store build: an .aab signed with the team's upload key.
	out := t.TempDir()
	code, stdout, stderr := expoBuild("", "build", dir, "--platform", "android", "--profile", "production", "--non-interactive", "-o", out)
	if code != 0 {
		t.Fatalf("build --profile production: exit %d\n%s\n%s", code, stdout, stderr)
	}
	id := buildID(t, stdout+stderr)
	log := f.logs(id)
	aab := filepath.Join(out, "app-release.aab")
	if _, err := os.Stat(aab); err != nil {
		t.Fatalf("no app-release.aab downloaded: %v\n%s", err, log)
	}
	run(t, "jarsigner", "-verify", aab)
	if certs := run(t, "keytool", "-printcert", "-jarfile", aab); !strings.Contains(normalizeFingerprints(certs), upload) {
		t.Fatalf("the .aab is not signed with the upload key %s:\n%s", upload, certs)
	}

	// The build saw exactly the env @expo/eas-json resolves for the profile.
	want := oracleEnv(t, easAndroidJSON, "production")
	got := logJSON(t, log, "PROFILE_ENV ")
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: the build saw %q, @expo/eas-json resolves %q", k, got[k], v)
		}
	}
	if _, ok := got["PREVIEW_ONLY"]; ok {
		t.Error("a variable of another profile reached the build")
	}
	if got["EAS_BUILD"] != "true" || got["EAS_BUILD_PROFILE"] != "production" || got["EAS_BUILD_PLATFORM"] != "android" {
		t.Errorf("EAS's built-in variables: %v", got)
	}
	// The secret reached the build and never its log, in any form.
	sum := sha256.Sum256([]byte(secret))
	if !strings.Contains(log, "SECRET_SHA256 "+hex.EncodeToString(sum[:])) {
		t.Errorf("the secret did not reach the build:\n%s", log)
	}
	for _, form := range []string{secret, base64.StdEncoding.EncodeToString([]byte(secret)), "store-pass-1", "key-pass-1"} {
		if strings.Contains(log, form) {
			t.Errorf("%q is in the build log", form)
		}
	}
	if !strings.Contains(log, "SECRET_PLAIN [REDACTED]") || !strings.Contains(log, "SECRET_B64 [REDACTED]") {
		t.Errorf("the secret's lines are not masked:\n%s", log)
	}

	// buildType apk: an .apk, verified by the real apksigner.
	out = t.TempDir()
	if code, stdout, stderr = expoBuild("", "build", dir, "--platform", "android", "--profile", "apk", "--non-interactive", "-o", out); code != 0 {
		t.Fatalf("build --profile apk: exit %d\n%s\n%s", code, stdout, stderr)
	}
	apk := filepath.Join(out, "app-release.apk")
	if certs := run(t, "apksigner", "verify", "--print-certs", "--min-sdk-version", "24", apk); !strings.Contains(strings.ToLower(certs), "sha-256 digest: "+upload) {
		t.Fatalf("the .apk is not signed with the upload key %s:\n%s", upload, certs)
	}

	// A project whose own Gradle re-signs the release with another key
	// fails before upload, naming both certificates.
	debug := keystoreSHA256(t, filepath.Join(dir, "android", "app", "debug.keystore"), "androiddebugkey", "android")
	props := filepath.Join(dir, "android", "gradle.properties")
	orig, _ := os.ReadFile(props)
	os.WriteFile(props, append(orig, []byte("\nreleaseResign.storeFile=debug.keystore\nreleaseResign.storePassword=android\nreleaseResign.keyAlias=androiddebugkey\n")...), 0o644)
	code, stdout, stderr = expoBuild("", "build", dir, "--platform", "android", "--profile", "production", "--non-interactive", "-o", t.TempDir())
	if code == 0 {
		t.Fatalf("a build signed with another key succeeded:\n%s\n%s", stdout, stderr)
	}
	b, err := f.dev.GetBuild(context.Background(), buildID(t, stdout+stderr))
	if err != nil {
		t.Fatal(err)
	}
	if b.Status != api.StatusFailed || b.ErrorMessage == nil || !strings.Contains(*b.ErrorMessage, upload) || !strings.Contains(*b.ErrorMessage, debug) || len(b.Artifacts) != 0 {
		t.Fatalf("want a failed build naming %s and %s, no artifact; got %s %v %d artifact(s)", upload, debug, b.Status, deref(b.ErrorMessage), len(b.Artifacts))
	}
	// The project's fault: not retried.
	if b.Attempts != 1 || deref(b.ErrorCode) != "signing_mismatch" {
		t.Fatalf("want one attempt ending signing_mismatch, got %d attempt(s), code %s", b.Attempts, deref(b.ErrorCode))
	}
}

// expoBuild returns a runner of the real expo-build, in-process, against
// the farm's controller with a developer key and its own config file.
func (f *farm) expoBuild(t testing.TB) func(stdin string, args ...string) (code int, stdout, stderr string) {
	cfg := filepath.Join(t.TempDir(), "expo-build.json")
	vars := map[string]string{"EXPO_BUILD_CONFIG": cfg, "EXPO_CONTROLLER_URL": f.url, "EXPO_CONTROLLER_API_KEY": f.dev.APIKey}
	return func(stdin string, args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		app := &cli.App{Stdin: strings.NewReader(stdin), Stdout: &stdout, Stderr: &stderr, Env: func(k string) string { return vars[k] },
			Retry: cli.RetryPolicy{Attempts: 3, Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond}, PollInterval: 200 * time.Millisecond,
			StallTimeout: 60 * time.Second, Version: "test"}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a real Expo build bundles with Metro
		defer cancel()
		code := app.Run(ctx, args)
		return code, stdout.String(), stderr.String()
	}
}

// androidProject copies the stand-in Android project and makes it an EAS
// team's: eas.json, credentials.json with a fresh upload keystore (both
// gitignored, as teams keep them), a lockfile and the reporting hook.
func androidProject(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "android-app")
	copyTree(t, "../vmbootstrap/testdata/android-app", dir)
	ks := filepath.Join(dir, "android", "keystores", "upload.jks")
	os.MkdirAll(filepath.Dir(ks), 0o755)
	run(t, "keytool", "-genkeypair", "-keystore", ks, "-storetype", "JKS", "-storepass", "store-pass-1", "-keypass", "key-pass-1",
		"-alias", "upload", "-keyalg", "RSA", "-keysize", "2048", "-validity", "10000", "-dname", "CN=Upload Key,O=Example,C=US")
	files := map[string]string{
		"eas.json": easAndroidJSON,
		"credentials.json": `{"android":{"keystore":{"keystorePath":"android/keystores/upload.jks","keystorePassword":"store-pass-1",` +
			`"keyAlias":"upload","keyPassword":"key-pass-1"}}}`,
		".gitignore":        "credentials.json\n*.jks\nnode_modules/\n",
		"report.js":         reportJS,
		"package.json":      `{"name":"android-app","version":"1.0.0","private":true,"scripts":{"eas-build-post-install":"node report.js"}}`,
		"package-lock.json": `{"name":"android-app","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{"":{"name":"android-app","version":"1.0.0"}}}`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// keystoreSHA256 is what keytool says the alias's certificate SHA-256 is,
// as lowercase hex without colons.
func keystoreSHA256(t *testing.T, ks, alias, pass string) string {
	t.Helper()
	m := regexp.MustCompile(`SHA256: ([0-9A-F:]+)`).FindStringSubmatch(run(t, "keytool", "-list", "-v", "-keystore", ks, "-storepass", pass, "-alias", alias))
	if m == nil {
		t.Fatalf("keytool -list printed no SHA256 for %s", alias)
	}
	return strings.ToLower(strings.ReplaceAll(m[1], ":", ""))
}

func normalizeFingerprints(s string) string {
	return strings.ToLower(strings.ReplaceAll(s, ":", ""))
}

var buildIDPattern = regexp.MustCompile(`Build ([0-9a-z]{26})\b`)

func buildID(t *testing.T, out string) string {
	t.Helper()
	m := buildIDPattern.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no build id in:\n%s", out)
	}
	return m[1]
}

func logJSON(t *testing.T, log, prefix string) map[string]string {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			var m map[string]string
			if err := json.Unmarshal([]byte(rest), &m); err != nil {
				t.Fatalf("%s line: %v", prefix, err)
			}
			return m
		}
	}
	t.Fatalf("no %q line in the build log:\n%s", prefix, log)
	return nil
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// oracleEnv is the env @expo/eas-json resolves for an android build of
// profile (the real package from npm: cli/easjson's differential oracle).
func oracleEnv(t *testing.T, easJSON, profile string) map[string]string {
	t.Helper()
	dir := npmoracle.Install(t, "../cli/easjson/testdata/oracle", "@expo/eas-json")
	in, _ := json.Marshal([]map[string]any{{"easJson": easJSON, "platform": "android", "profile": profile}})
	cmd := exec.Command("node", "resolve.js")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = io.Discard
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("the @expo/eas-json oracle: %v", err)
	}
	var res []struct {
		Class   string `json:"class"`
		Message string `json:"message"`
		Profile struct {
			Env map[string]string `json:"env"`
		} `json:"profile"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || len(res) != 1 || res[0].Class != "ok" {
		t.Fatalf("the oracle's answer %s: %v", raw, err)
	}
	if len(res[0].Profile.Env) == 0 {
		t.Fatal("the oracle resolved no env: the fixture is wrong")
	}
	return res[0].Profile.Env
}
