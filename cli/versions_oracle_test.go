package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/cli/appconfig"
	"github.com/freeagent-build/freeagent/cli/easjson"
	"github.com/freeagent-build/freeagent/internal/npmoracle"
)

type versionCase struct {
	AppJSON  string `json:"appJson"`
	EasJSON  string `json:"easJson"`
	Platform string `json:"platform"`
	Profile  string `json:"profile"`
}

type versionAnswer struct {
	AppVersionSource string          `json:"appVersionSource"`
	AutoIncrement    json.RawMessage `json:"autoIncrement"`
	StaticConfig     bool            `json:"staticConfig"`
	BuildVersion     string          `json:"buildVersion"`
	AppVersion       string          `json:"appVersion"`
	NextAppVersion   string          `json:"nextAppVersion"`
	Error            string          `json:"error,omitempty"`
}

// TestVersionFieldsMatchEAS runs eas-cli's MIT packages (testdata/
// versionoracle, pinned: @expo/eas-json, @expo/config with
// @expo/config-plugins' Version helpers, node-semver) on the same
// projects as expo-build and compares the fields the versions are decided
// from: cli.appVersionSource, what autoIncrement bumps, the build version
// and app version with Expo's defaults, and the patch bump.
func TestVersionFieldsMatchEAS(t *testing.T) {
	t.Parallel()
	apps := []string{
		`{"expo":{"name":"a","slug":"a","version":"1.2.3","android":{"package":"com.a","versionCode":42},"ios":{"bundleIdentifier":"com.a","buildNumber":"7"}}}`,
		`{"expo":{"name":"a","slug":"a"}}`,
		`{"expo":{"name":"a","slug":"a","version":"2.0.0-beta.3","ios":{"buildNumber":"1.4.9"}}}`,
		`{"expo":{"name":"a","slug":"a","version":"v1.0.9+build.5","android":{"versionCode":1}}}`,
		`{"expo":{"name":"a","slug":"a","version":"1.0"}}`,
		`{"name":"a","slug":"a","version":"0.0.1","android":{"versionCode":2100000000},"ios":{"buildNumber":""}}`,
	}
	eas := []string{
		`{"cli":{"appVersionSource":"remote"},"build":{"production":{"autoIncrement":true}}}`,
		`{"cli":{"appVersionSource":"local"},"build":{"production":{"autoIncrement":false}}}`,
		`{"build":{"production":{"android":{"autoIncrement":"version"},"ios":{"autoIncrement":"buildNumber"}}}}`,
		`{"cli":{"appVersionSource":"local"},"build":{"base":{"autoIncrement":true},"production":{"extends":"base","android":{"autoIncrement":"versionCode"},"ios":{"autoIncrement":"version"}}}}`,
		`{"build":{"production":{}}}`,
	}
	var cases []versionCase
	for _, a := range apps {
		for _, e := range eas {
			for _, p := range []string{api.PlatformAndroid, api.PlatformIOS} {
				cases = append(cases, versionCase{AppJSON: a, EasJSON: e, Platform: p})
			}
		}
	}
	want := runVersionOracle(t, cases)
	for i, c := range cases {
		got, err := ourVersionFields(t.Context(), t.TempDir(), c)
		name := fmt.Sprintf("%s on %s with %s", c.Platform, c.AppJSON, c.EasJSON)
		if want[i].Error != "" || err != nil {
			if (want[i].Error == "") != (err == nil) {
				t.Errorf("%s: eas-cli's error %q, ours %v", name, want[i].Error, err)
			}
			continue
		}
		if got != want[i].compared() {
			t.Errorf("%s:\n ours   %+v\n eas-cli %+v", name, got, want[i].compared())
		}
	}
}

// versionFields are what the test compares.
type versionFields struct {
	source, increment, buildVersion, appVersion, nextAppVersion string
	static                                                      bool
}

// compared reads the oracle's answer as expo-build's fields: autoIncrement
// as eas-cli's bump strategies read it (true and the platform's build
// version name bump the build version, "version" the app version).
func (a versionAnswer) compared() versionFields {
	f := versionFields{source: a.AppVersionSource, buildVersion: a.BuildVersion, appVersion: a.AppVersion, nextAppVersion: a.NextAppVersion, static: a.StaticConfig}
	var v any
	json.Unmarshal(a.AutoIncrement, &v)
	switch v {
	case nil, false:
	case true, "versionCode", "buildNumber":
		f.increment = api.IncrementBuildVersion
	default:
		f.increment = api.IncrementAppVersion
	}
	return f
}

// ourVersionFields decides the same fields as resolveBuild does.
func ourVersionFields(ctx context.Context, dir string, c versionCase) (versionFields, error) {
	for name, body := range map[string]string{"package.json": `{"name":"oracle-app","version":"3.4.5"}`, "app.json": c.AppJSON, "eas.json": c.EasJSON} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return versionFields{}, err
		}
	}
	f, err := easjson.Load(dir)
	if err != nil {
		return versionFields{}, err
	}
	profile, err := f.Resolve(c.Platform, c.Profile)
	if err != nil {
		return versionFields{}, err
	}
	app, err := appconfig.Read(ctx, dir, nil)
	if err != nil {
		return versionFields{}, err
	}
	spec := api.BuildSpec{Platform: c.Platform, App: app, Profile: profile}
	local, err := readLocalVersions(dir, &spec)
	if err != nil {
		return versionFields{}, err
	}
	next, _ := easjson.NextPatch(local.appVersion)
	return versionFields{source: f.AppVersionSource(), increment: increment(profile.AutoIncrement), buildVersion: local.buildVersion,
		appVersion: local.appVersion, nextAppVersion: next, static: fileExists(filepath.Join(dir, "app.json"))}, nil
}

func runVersionOracle(t *testing.T, cases []versionCase) []versionAnswer {
	t.Helper()
	dir := npmoracle.Install(t, filepath.Join("testdata", "versionoracle"), "@expo/config")
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "oracle.js")
	cmd.Dir, cmd.Stdin = dir, bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node oracle.js: %v\n%s", err, stderr.Bytes())
	}
	var answers []versionAnswer
	if err := json.Unmarshal(out, &answers); err != nil || len(answers) != len(cases) {
		t.Fatalf("oracle answered %d of %d: %v", len(answers), len(cases), err)
	}
	return answers
}
