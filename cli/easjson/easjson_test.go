package easjson

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
)

func TestSyntaxErrorHasLineColumnAndFrame(t *testing.T) {
	doc := "{\n  \"build\": {\n    \"production\": {\n      \"node\": \"20.0.0\"\n      \"env\": {}\n    }\n  }\n}\n"
	_, err := Parse([]byte(doc))
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("Parse: %v, want a *SyntaxError", err)
	}
	if se.Line != 5 || se.Column != 7 {
		t.Errorf("position %d:%d, want 5:7", se.Line, se.Column)
	}
	msg := err.Error()
	for _, want := range []string{"eas.json:5:7: ", `unexpected "\""`, "5 |       \"env\": {}", "  |       ^"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
}

func TestSyntaxErrorColumnCountsCharacters(t *testing.T) {
	_, err := Parse([]byte(`{"build": {"é😀": 1,, }}`))
	var se *SyntaxError
	if !errors.As(err, &se) || se.Line != 1 || se.Column != 20 {
		t.Fatalf("Parse: %v, want a syntax error at 1:20", err)
	}
}

func TestEmptyAndOversizedAndDeep(t *testing.T) {
	for _, doc := range []string{"", " \n\t", "\ufeff"} {
		if _, err := Parse([]byte(doc)); !errors.Is(err, ErrEmpty) || !strings.Contains(err.Error(), "eas.json is empty") {
			t.Errorf("Parse(%q) = %v, want ErrEmpty", doc, err)
		}
	}
	big := `{"build":{"production":{"env":{"A":"` + strings.Repeat("x", maxFileSize) + `"}}}}`
	if _, err := Parse([]byte(big)); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Parse(2 MiB) = %v, want a refusal", err)
	}
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	var se *SyntaxError
	if _, err := Parse([]byte(deep)); !errors.As(err, &se) || !strings.Contains(se.Msg, "levels deep") {
		t.Errorf("Parse(deep) = %v, want a nesting error", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir); !errors.Is(err, ErrMissing) {
		t.Fatalf("Load(no eas.json) = %v, want ErrMissing", err)
	}
	doc := `{"cli": {"appVersionSource": "remote"}, "build": {"preview": {"distribution": "internal"}, "production": {}}}`
	if err := os.WriteFile(filepath.Join(dir, "eas.json"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.ProfileNames(); !reflect.DeepEqual(got, []string{"preview", "production"}) {
		t.Errorf("ProfileNames = %q", got)
	}
	if got := f.AppVersionSource(); got != "remote" {
		t.Errorf("AppVersionSource = %q, want remote", got)
	}
	p, err := f.Resolve("android", "preview")
	if err != nil {
		t.Fatal(err)
	}
	if p.Distribution != "internal" || p.CredentialsSource != "remote" {
		t.Errorf("preview = %+v", p)
	}
}

func TestValidationReportsEveryProblemWithPathAndHint(t *testing.T) {
	doc := `{"build": {"production": {"node": "20", "keystoreName": "k",
		"android": {"gradleComand": ":app:x", "buildType": "aab"}, "env": {"A": 1}}}}`
	_, err := Parse([]byte(doc))
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Parse: %v, want a *ValidationError", err)
	}
	want := map[string]string{
		"build.production.node":                 "not a valid version",
		"build.production.keystoreName":         `belongs in the "android" section`,
		"build.production.android.gradleComand": "did you mean gradleCommand?",
		"build.production.android.buildType":    `must be one of "apk", "app-bundle"`,
		"build.production.env.A":                "must be a string",
	}
	if len(ve.Problems) != len(want) {
		t.Errorf("%d problems, want %d:\n%v", len(ve.Problems), len(want), err)
	}
	for _, p := range ve.Problems {
		if w, ok := want[p.Path]; !ok || !strings.Contains(p.Message, w) {
			t.Errorf("problem %s: want %q", p, w)
		}
	}
	if !strings.Contains(err.Error(), "- build.production.android.gradleComand: is not allowed: did you mean gradleCommand?") {
		t.Errorf("message:\n%v", err)
	}
}

func TestResolveErrors(t *testing.T) {
	f, err := Parse([]byte(`{"build": {"production": {"extends": "base"}, "preview": {"extends": "preview"}, "a": {"extends": "b"}, "b": {"extends": "a"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	var mp *MissingProfileError
	if _, err := f.Resolve("android", "staging"); !errors.As(err, &mp) || !strings.Contains(err.Error(), `"production", "preview", "a", "b"`) {
		t.Errorf("Resolve(staging) = %v", err)
	}
	var parent *MissingParentError
	if _, err := f.Resolve("ios", ""); !errors.As(err, &parent) || parent.Profile != "production" || parent.Parent != "base" {
		t.Errorf("Resolve(production) = %v", err)
	}
	var chain *ExtendsChainError
	if _, err := f.Resolve("android", "a"); !errors.As(err, &chain) || len(chain.Chain) != 6 || !strings.Contains(err.Error(), "a → b → a") {
		t.Errorf("Resolve(a) = %v", err)
	}
	if _, err := f.Resolve("web", "a"); err == nil {
		t.Error("Resolve(web) succeeded")
	}
}

func TestEnvironment(t *testing.T) {
	yes := true
	for _, c := range []struct {
		p    api.BuildProfile
		want string
	}{
		{api.BuildProfile{Distribution: "store"}, "production"},
		{api.BuildProfile{Distribution: "store", DevelopmentClient: &yes}, "production"},
		{api.BuildProfile{Distribution: "internal", DevelopmentClient: &yes}, "development"},
		{api.BuildProfile{Distribution: "internal"}, "preview"},
		{api.BuildProfile{Distribution: "store", Environment: "staging"}, "staging"},
	} {
		if got := Environment(c.p); got != c.want {
			t.Errorf("Environment(%+v) = %q, want %q", c.p, got, c.want)
		}
	}
}

func TestAndroid(t *testing.T) {
	yes := true
	for _, c := range []struct {
		name string
		p    api.BuildProfile
		want api.AndroidBuild
	}{
		{"store", api.BuildProfile{Distribution: "store"},
			api.AndroidBuild{GradleCommand: ":app:bundleRelease", BuildType: "app-bundle", ApplicationArchivePaths: []string{DefaultApplicationArchivePath}}},
		{"internal means apk", api.BuildProfile{Distribution: "internal"},
			api.AndroidBuild{GradleCommand: ":app:assembleRelease", BuildType: "apk", ApplicationArchivePaths: []string{DefaultApplicationArchivePath}}},
		{"store apk", api.BuildProfile{Distribution: "store", BuildType: "apk"},
			api.AndroidBuild{GradleCommand: ":app:assembleRelease", BuildType: "apk", ApplicationArchivePaths: []string{DefaultApplicationArchivePath}}},
		{"internal bundle", api.BuildProfile{Distribution: "internal", BuildType: "app-bundle"},
			api.AndroidBuild{GradleCommand: ":app:bundleRelease", BuildType: "app-bundle", ApplicationArchivePaths: []string{DefaultApplicationArchivePath}}},
		{"development client", api.BuildProfile{Distribution: "internal", DevelopmentClient: &yes},
			api.AndroidBuild{GradleCommand: ":app:assembleDebug", BuildType: "apk", ApplicationArchivePaths: []string{DefaultApplicationArchivePath}}},
		{"gradle command wins", api.BuildProfile{Distribution: "internal", DevelopmentClient: &yes, BuildType: "apk", GradleCommand: ":app:assembleStagingRelease",
			ArtifactPath: "old/*.apk", BuildArtifactPaths: []string{"reports/**"}},
			api.AndroidBuild{GradleCommand: ":app:assembleStagingRelease", ApplicationArchivePaths: []string{"old/*.apk"}, BuildArtifactPaths: []string{"reports/**"}}},
		{"applicationArchivePath over artifactPath", api.BuildProfile{Distribution: "store", ArtifactPath: "old", ApplicationArchivePath: "new/*.aab"},
			api.AndroidBuild{GradleCommand: ":app:bundleRelease", BuildType: "app-bundle", ApplicationArchivePaths: []string{"new/*.aab"}}},
	} {
		if got := Android(c.p); !reflect.DeepEqual(*got, c.want) {
			t.Errorf("%s: Android = %+v, want %+v", c.name, *got, c.want)
		}
	}
}

// The derivations apply to what Resolve returns: an internal profile
// inherited through extends builds an APK in the preview environment.
func TestDerivationsOnResolvedProfile(t *testing.T) {
	f, err := Parse([]byte(`{build: {base: {distribution: 'internal'}, preview: {extends: 'base', android: {env: {A: '1'}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.Resolve("android", "preview")
	if err != nil {
		t.Fatal(err)
	}
	if got := Environment(p); got != "preview" {
		t.Errorf("Environment = %q", got)
	}
	if got := Android(p); got.BuildType != "apk" || got.GradleCommand != ":app:assembleRelease" {
		t.Errorf("Android = %+v", got)
	}
}
