package vmbootstrap

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/toolchain"
)

func TestBuildEnvironmentPrecedenceAndFiles(t *testing.T) {
	t.Parallel()
	files := filepath.Join(t.TempDir(), "env-files")
	gs := `{"project_info":{"project_id":"x"}}`
	job := api.BuildJob{
		Spec: &api.BuildSpec{Platform: api.PlatformAndroid, ProfileName: "production", GitCommit: "abc123",
			Profile: api.BuildProfile{Env: map[string]string{"API_URL": "https://profile.example", "B": "2"}}},
		Variables: []api.Variable{
			{Name: "API_URL", Value: "https://farm.example", Visibility: api.VisibilityPlaintext, Type: api.VariableString},
			{Name: "SENTRY_TOKEN", Value: "sentry-secret-value", Visibility: api.VisibilitySecret, Type: api.VariableString},
			{Name: "GOOGLE_SERVICES_JSON", Value: base64.StdEncoding.EncodeToString([]byte(gs)), Visibility: api.VisibilitySensitive, Type: api.VariableFile},
			{Name: "EAS_BUILD_PROFILE", Value: "spoofed", Visibility: api.VisibilityPlaintext, Type: api.VariableString},
			// Set before short values were refused: still given to the build.
			{Name: "OLD_PIN", Value: "1234", Visibility: api.VisibilitySecret, Type: api.VariableString},
			// Set before secret EXPO_PUBLIC_ variables were refused: Metro
			// would inline it into the app, so the build never gets it.
			{Name: "EXPO_PUBLIC_OLD_KEY", Value: "public-secret-value", Visibility: api.VisibilitySecret, Type: api.VariableString},
			{Name: "EXPO_PUBLIC_SENSITIVE", Value: "sensitive-public-value", Visibility: api.VisibilitySensitive, Type: api.VariableString},
		},
	}
	e, err := newBuildEnvironment(job, "b1", "/work/src", files)
	if err != nil {
		t.Fatal(err)
	}
	env := mergeEnv(nil, e.vars...)
	get := func(k string) string {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
		return "<unset>"
	}
	for k, want := range map[string]string{
		"API_URL": "https://profile.example", "B": "2", "SENTRY_TOKEN": "sentry-secret-value",
		"EAS_BUILD": "true", "EAS_BUILD_PROFILE": "production", "EAS_BUILD_PLATFORM": "android", "EAS_BUILD_ID": "b1",
		"EAS_BUILD_WORKINGDIR": "/work/src", "EAS_BUILD_GIT_COMMIT_HASH": "abc123", "CI": "1",
		"GOOGLE_SERVICES_JSON": filepath.Join(files, "GOOGLE_SERVICES_JSON"),
		"EXPO_PUBLIC_OLD_KEY":  "<unset>", "EXPO_PUBLIC_SENSITIVE": "sensitive-public-value",
	} {
		if got := get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	b, err := os.ReadFile(filepath.Join(files, "GOOGLE_SERVICES_JSON"))
	st, _ := os.Stat(filepath.Join(files, "GOOGLE_SERVICES_JSON"))
	if err != nil || string(b) != gs || st.Mode().Perm() != 0o600 {
		t.Errorf("file variable: %q %v %v", b, err, st.Mode())
	}
	for _, s := range []string{"sentry-secret-value", gs} {
		if !slices.Contains(e.secrets, s) {
			t.Errorf("%q not registered as a secret (have %q)", s, e.secrets)
		}
	}
	if slices.Contains(e.secrets, "https://farm.example") {
		t.Error("a plaintext variable is masked")
	}
	if !slices.Equal(e.withheld, []string{"EXPO_PUBLIC_OLD_KEY"}) {
		t.Errorf("withheld %q: want EXPO_PUBLIC_OLD_KEY named for the log's warning", e.withheld)
	}
	if !slices.Equal(e.short, []string{"OLD_PIN"}) || get("OLD_PIN") != "1234" {
		t.Errorf("short secrets %q, OLD_PIN=%q: want it named for the log's warning, and set", e.short, get("OLD_PIN"))
	}

	job.Variables = []api.Variable{{Name: "F", Value: "not base64!", Visibility: api.VisibilitySecret, Type: api.VariableFile}}
	if _, err := newBuildEnvironment(job, "b1", "/w", files); err == nil || !strings.Contains(err.Error(), "F") {
		t.Errorf("bad file variable: %v", err)
	}
}

// TestSecretEncodingsAreMasked: a secret printed the ways a build's tools
// print it (JSON encoders, hex, percent-encoding of either case, base64 of
// the value and of a longer stream holding it) never reaches the log,
// however the writes split it. A secret too short to mask is masked in no
// form, so that no form confirms it.
func TestSecretEncodingsAreMasked(t *testing.T) {
	t.Parallel()
	secret := `p@ss "word"/<with>+chars?\é&`
	goJSON, _ := json.Marshal(secret)
	var plainJSON bytes.Buffer
	enc := json.NewEncoder(&plainJSON)
	enc.SetEscapeHTML(false)
	enc.Encode(secret) //nolint:errcheck // a string always encodes
	lowerQuery := regexp.MustCompile(`%[0-9A-F]{2}`).ReplaceAllStringFunc(url.QueryEscape(secret), strings.ToLower)
	// Each line is printed as label, a space and the printed form; head
	// and tail are at most what may stay beside the mark: JSON's quotes, or
	// the base64 of the neighbours of a secret in a longer stream (with the
	// characters that mix their bits with the secret's, and padding).
	type line struct{ label, form, head, tail string }
	lines := []line{
		{"raw", secret, "", ""},
		{"go-json", string(goJSON), `"`, `"`},
		{"js-json", strings.TrimSpace(plainJSON.String()), `"`, `"`},
		{"ascii-json", strconv.QuoteToASCII(secret), `"`, `"`},
		{"hex", hex.EncodeToString([]byte(secret)), "", ""},
		{"HEX", strings.ToUpper(hex.EncodeToString([]byte(secret))), "", ""},
		{"query", url.QueryEscape(secret), "", ""},
		{"query-lower", lowerQuery, "", ""},
		{"path", url.PathEscape(secret), "", ""},
	}
	for _, e := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		lines = append(lines, line{"b64", e.EncodeToString([]byte(secret)), "", ""})
	}
	for _, s := range []struct {
		before, after string
		enc           *base64.Encoding
	}{
		{"ci:", "", base64.StdEncoding},   // Authorization: Basic; offset 0
		{"", "\n", base64.StdEncoding},    // echo "$SECRET" | base64
		{"x", "", base64.RawStdEncoding},  // offset 1
		{"u:", "!", base64.StdEncoding},   // offset 2
		{"user:", "", base64.URLEncoding}, // offset 2, URL alphabet
	} {
		stream := s.enc.EncodeToString([]byte(s.before + secret + s.after))
		lines = append(lines, line{"embedded", stream, stream[:(8*len(s.before)+5)/6], stream[8*(len(s.before)+len(secret))/6:]})
	}
	var text strings.Builder
	for _, l := range lines {
		text.WriteString(l.label + " " + l.form + "\n")
	}
	for split := range text.Len() + 1 {
		var r redactor
		r.add(secret)
		got := string(append(append(r.write([]byte(text.String()[:split])), r.write([]byte(text.String()[split:]))...), r.flush()...))
		gotLines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
		if len(gotLines) != len(lines) {
			t.Fatalf("split at %d: %d lines, want %d:\n%s", split, len(gotLines), len(lines), got)
		}
		for i, l := range lines {
			masked := strings.TrimPrefix(gotLines[i], l.label+" ")
			before, after, ok := strings.Cut(masked, redactedMark)
			if !ok || !strings.HasPrefix(l.head, before) || !strings.HasSuffix(l.tail, after) {
				t.Fatalf("split at %d: %s %q masked as %q, want at most %q before the mark and %q after", split, l.label, l.form, masked, l.head, l.tail)
			}
		}
	}

	// Too short to mask: masked in no form, not confirmed by any.
	var r redactor
	r.add("abc")
	in := "abc " + base64.StdEncoding.EncodeToString([]byte("abc")) + " " + hex.EncodeToString([]byte("abc"))
	if got := string(append(r.write([]byte(in)), r.flush()...)); got != in {
		t.Fatalf("a 3-byte secret: %q", got)
	}
	// An older short secret still masked in its own forms.
	r.add("abcde")
	in = "abcde " + base64.StdEncoding.EncodeToString([]byte("abcde")) + " " + hex.EncodeToString([]byte("abcde")) + "\n"
	if got := string(append(r.write([]byte(in)), r.flush()...)); got != "[REDACTED] [REDACTED] [REDACTED]\n" {
		t.Fatalf("a 5-byte secret: %q", got)
	}
}

func TestNpmrcForNPMToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if wrote, err := writeNpmrc(dir, []string{"PATH=/bin"}); wrote || err != nil {
		t.Fatalf("without NPM_TOKEN: %v %v", wrote, err)
	}
	if wrote, err := writeNpmrc(dir, []string{"NPM_TOKEN=npm_abc"}); !wrote || err != nil {
		t.Fatalf("with NPM_TOKEN: %v %v", wrote, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, ".npmrc"))
	if string(b) != "//registry.npmjs.org/:_authToken=${NPM_TOKEN}\n" || strings.Contains(string(b), "npm_abc") {
		t.Fatalf(".npmrc: %q", b)
	}
	os.WriteFile(filepath.Join(dir, ".npmrc"), []byte("registry=https://mine\n"), 0o644)
	if wrote, _ := writeNpmrc(dir, []string{"NPM_TOKEN=npm_abc"}); wrote {
		t.Fatal("overwrote the project's .npmrc")
	}
}

// TestHooksRunAtEASPoints: the eas-build-* scripts run around the build in
// EAS's order, with EAS_BUILD_STATUS for on-complete.
func TestHooksRunAtEASPoints(t *testing.T) {
	t.Parallel()
	scripts := `{"scripts":{"eas-build-pre-install":"a","eas-build-post-install":"b","eas-build-pre-upload-artifacts":"c",
		"eas-build-on-success":"d","eas-build-on-error":"e","eas-build-on-complete":"f","eas-build-on-cancel":"g"}}`
	p, out, _ := newTestPipeline(t, api.PlatformAndroid, map[string]string{"package.json": scripts, "package-lock.json": "{}"}, nil)
	p.runner.env = mergeEnv(p.runner.env, "PATH="+hookTools(t)+":"+toolchain.EnvValue(p.runner.env, "PATH"))
	if _, err := p.run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	assertInOrder(t, out.String(),
		"hook eas-build-pre-install status=\n", "fake npm ci", "prebuild", "hook eas-build-post-install status=\n",
		"gradle :app:bundleRelease", "hook eas-build-pre-upload-artifacts status=\n",
		"hook eas-build-on-success status=finished\n", "hook eas-build-on-complete status=finished\n")
	if strings.Contains(out.String(), "on-error") || strings.Contains(out.String(), "on-cancel") {
		t.Fatalf("wrong end hooks:\n%s", out)
	}

	// A failing build runs on-error and on-complete with "errored".
	p2, out2, _ := newTestPipeline(t, api.PlatformAndroid, map[string]string{"package.json": scripts, "package-lock.json": "{}"}, nil)
	p2.runner.env = mergeEnv(p2.runner.env, "PATH="+hookTools(t)+":"+toolchain.EnvValue(p2.runner.env, "PATH"))
	p2.spec.Android.GradleCommand = ":app:noSuchTask"
	p2.spec.Android.ApplicationArchivePaths = []string{"nothing/*.apk"}
	if _, err := p2.run(context.Background()); err == nil {
		t.Fatal("no error")
	}
	assertInOrder(t, out2.String(), "hook eas-build-on-error status=errored\n", "hook eas-build-on-complete status=errored\n")

	// A cancelled build runs on-cancel.
	p3, out3, _ := newTestPipeline(t, api.PlatformAndroid, map[string]string{"package.json": scripts, "package-lock.json": "{}"}, nil)
	p3.runner.env = mergeEnv(p3.runner.env, "PATH="+hookTools(t)+":"+toolchain.EnvValue(p3.runner.env, "PATH"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p3.run(ctx)
	assertInOrder(t, out3.String(), "hook eas-build-on-cancel status=canceled\n", "hook eas-build-on-complete status=canceled\n")
}

// TestIOSHooksRunAtEASPoints: on iOS, as EAS's iOS builder runs them,
// eas-build-post-install runs after `pod install` (a hook may edit the
// Pods or read the workspace), and eas-build-pre-upload-artifacts runs
// after xcodebuild, before the artifacts are collected.
func TestIOSHooksRunAtEASPoints(t *testing.T) {
	t.Parallel()
	scripts := `{"scripts":{"eas-build-pre-install":"a","eas-build-post-install":"b","eas-build-pre-upload-artifacts":"c",
		"eas-build-on-success":"d","eas-build-on-complete":"f"}}`
	p, out, _ := newTestPipeline(t, api.PlatformIOS, map[string]string{"package.json": scripts, "package-lock.json": "{}", "app.json": "{}"}, nil)
	p.runner.env = mergeEnv(p.runner.env, "PATH="+hookTools(t)+":"+toolchain.EnvValue(p.runner.env, "PATH"))
	p.spec.IOS = &api.IOSBuild{Scheme: "MyApp", BuildConfiguration: "Release", Simulator: true, ApplicationArchivePaths: []string{api.IOSSimulatorArchivePath}}
	if _, err := p.run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	assertInOrder(t, out.String(),
		"hook eas-build-pre-install status=\n", "fake npm ci", "fake npx expo prebuild", "fake pod install in ios\n",
		"hook eas-build-post-install status=\n", "** BUILD SUCCEEDED **", "hook eas-build-pre-upload-artifacts status=\n",
		"▸ packed ios/build/Build/Products/Release-iphonesimulator/MyApp.app as MyApp.app.tar.gz",
		"hook eas-build-on-success status=finished\n", "hook eas-build-on-complete status=finished\n")
}

// hookTools puts an npm first on PATH whose "run" prints the hook and
// EAS_BUILD_STATUS, and whose other commands behave as fakeTools' npm.
func hookTools(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeExecutable(t, filepath.Join(dir, "npm"), "#!/bin/sh\nif [ \"$1\" = run ]; then echo \"hook $2 status=$EAS_BUILD_STATUS\"; else echo \"fake npm $*\"; fi\n")
	return dir
}

func TestSplitCommand(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		":app:bundleRelease":                       {":app:bundleRelease"},
		"  :app:assembleFreeRelease  --stacktrace": {":app:assembleFreeRelease", "--stacktrace"},
		`-Pfoo="a b" 'c d' e\ f`:                   {"-Pfoo=a b", "c d", "e f"},
		`:app:x $HOME`:                             {":app:x", "$HOME"},
	} {
		got, err := splitCommand(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%q: %q %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "  ", `"unterminated`, `x\`} {
		if _, err := splitCommand(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestNodeVersionIsChecked: the profile's node must be the VM's Node.js.
func TestNodeVersionIsChecked(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	writeExecutable(t, filepath.Join(bin, "node"), "#!/bin/sh\necho v20.11.1\n")
	for _, c := range []struct {
		want string
		ok   bool
	}{{"", true}, {"20.11.1", true}, {"18.19.0", false}} {
		p, out, _ := newTestPipeline(t, api.PlatformAndroid, map[string]string{"package.json": `{}`}, nil)
		p.runner.env = mergeEnv(p.runner.env, "PATH="+bin+":"+toolchain.EnvValue(p.runner.env, "PATH"))
		p.spec.Profile.Node = c.want
		err := p.checkNode(context.Background())
		if c.ok != (err == nil) {
			t.Errorf("node %q: %v", c.want, err)
		}
		if !c.ok && (!strings.Contains(err.Error(), "18.19.0") || !strings.Contains(err.Error(), "20.11.1")) {
			t.Errorf("node %q: the error names not both versions: %v", c.want, err)
		}
		if c.want == "20.11.1" && !strings.Contains(out.String(), "Node.js 20.11.1") {
			t.Errorf("log: %s", out)
		}
	}
}
