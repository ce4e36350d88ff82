package easjson

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/internal/npmoracle"
)

// The differential tests run the real @expo/eas-json (pinned in
// testdata/oracle/package-lock.json) on the same documents as this
// package. They need node and npm and the npm registry; set
// EASJSON_SKIP_ORACLE=1 to skip them on a machine without.

type oracleCase struct {
	EasJSON  string  `json:"easJson"`
	Platform string  `json:"platform"`
	Profile  *string `json:"profile"`
}

type oracleResult struct {
	Class            string          `json:"class"`
	Message          string          `json:"message"`
	Profile          json.RawMessage `json:"profile"`
	ProfileNames     []string        `json:"profileNames"`
	AppVersionSource string          `json:"appVersionSource"`
	RequireCommit    bool            `json:"requireCommit"`
}

// installOracle installs testdata/oracle's locked @expo/eas-json.
func installOracle(t *testing.T) string {
	return npmoracle.Install(t, filepath.Join("testdata", "oracle"), "@expo/eas-json")
}

// runOracle resolves every case in one node process.
func runOracle(t *testing.T, dir string, cases []oracleCase) []oracleResult {
	t.Helper()
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "resolve.js")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node resolve.js: %v\n%s", err, stderr.Bytes())
	}
	var results []oracleResult
	if err := json.Unmarshal(out, &results); err != nil {
		t.Fatalf("oracle output: %v", err)
	}
	if len(results) != len(cases) {
		t.Fatalf("oracle answered %d cases of %d", len(results), len(cases))
	}
	return results
}

// classify names our error as the oracle's classes do.
func classify(err error) string {
	var syntax *SyntaxError
	var invalid *ValidationError
	var missing *MissingProfileError
	var parent *MissingParentError
	var chain *ExtendsChainError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &syntax), errors.Is(err, ErrEmpty):
		return "syntax"
	case errors.As(err, &invalid):
		return "invalid"
	case errors.As(err, &missing):
		return "missing-profile"
	case errors.As(err, &parent):
		return "missing-parent"
	case errors.As(err, &chain):
		return "chain"
	}
	return "unexpected: " + err.Error()
}

// ours answers a case with this package.
func ours(c oracleCase) (oracleResult, error) {
	f, err := Parse([]byte(c.EasJSON))
	if err != nil {
		return oracleResult{Class: classify(err), Message: err.Error()}, err
	}
	profile := ""
	if c.Profile != nil {
		profile = *c.Profile
	}
	p, err := f.Resolve(c.Platform, profile)
	if err != nil {
		return oracleResult{Class: classify(err), Message: err.Error()}, err
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return oracleResult{}, err
	}
	return oracleResult{Class: "ok", Profile: raw, ProfileNames: f.ProfileNames(), AppVersionSource: f.AppVersionSource(),
		RequireCommit: f.RequireCommit()}, nil
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func compareWithOracle(t *testing.T, dir string, cases []oracleCase, names []string) {
	t.Helper()
	want := runOracle(t, dir, cases)
	classes := map[string]int{}
	for i, c := range cases {
		got, _ := ours(c)
		w := want[i]
		classes[w.Class]++
		if w.Class == "unexpected" {
			t.Errorf("%s: the oracle failed unexpectedly: %s\n%s", names[i], w.Message, c.EasJSON)
			continue
		}
		if got.Class != w.Class {
			t.Errorf("%s (%s, profile %v): we say %s, @expo/eas-json says %s\neas.json: %s\nours: %s\ntheirs: %s",
				names[i], c.Platform, deref(c.Profile), got.Class, w.Class, c.EasJSON, got.Message, w.Message)
			continue
		}
		if w.Class != "ok" {
			continue
		}
		if !sameJSON(got.Profile, w.Profile) {
			t.Errorf("%s (%s, profile %v): resolved profiles differ\neas.json: %s\nours:   %s\ntheirs: %s",
				names[i], c.Platform, deref(c.Profile), c.EasJSON, got.Profile, w.Profile)
		}
		if !reflect.DeepEqual(got.ProfileNames, w.ProfileNames) && !(len(got.ProfileNames) == 0 && len(w.ProfileNames) == 0) {
			t.Errorf("%s: profile names: ours %q, theirs %q", names[i], got.ProfileNames, w.ProfileNames)
		}
		if got.RequireCommit != w.RequireCommit {
			t.Errorf("%s: requireCommit: ours %v, theirs %v", names[i], got.RequireCommit, w.RequireCommit)
		}
		if got.AppVersionSource != w.AppVersionSource {
			t.Errorf("%s: appVersionSource: ours %q, theirs %q", names[i], got.AppVersionSource, w.AppVersionSource)
		}
	}
	t.Logf("%d cases compared with @expo/eas-json; its answers: %v", len(cases), classes)
}

func deref(s *string) string {
	if s == nil {
		return "(default)"
	}
	return *s
}
