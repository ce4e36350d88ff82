package provisioning_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/internal/plist"
	"github.com/freeagent-build/freeagent/internal/provisioning"
	"github.com/freeagent-build/freeagent/internal/provisioning/provisioningtest"

	"github.com/freeagent-build/freeagent/internal/npmoracle"
)

// The differential test runs @expo/plist (pinned in
// testdata/oracle/package-lock.json), the parser eas-cli reads profiles
// with, on the same files as this package: eas-cli's ad hoc, development
// and enterprise tests and its team, and the whole property list. It
// needs node, npm and the npm registry; PROVISIONING_SKIP_ORACLE=1 skips
// it on a machine without.

type oracleAnswer struct {
	Error       string `json:"error"`
	AdHoc       bool   `json:"adHoc"`
	Development bool   `json:"development"`
	Enterprise  bool   `json:"enterprise"`
	TeamID      string `json:"teamId"`
	Name        string `json:"name"`
	Plist       any    `json:"plist"`
}

func runOracle(t *testing.T, files [][]byte) []oracleAnswer {
	t.Helper()
	dir := npmoracle.Install(t, filepath.Join("testdata", "oracle"), "@expo/plist")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	in := make([]string, len(files))
	for i, f := range files {
		in[i] = base64.StdEncoding.EncodeToString(f)
	}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "node", "classify.js")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node classify.js: %v\n%s", err, stderr.Bytes())
	}
	var answers []oracleAnswer
	if err := json.Unmarshal(out, &answers); err != nil {
		t.Fatal(err)
	}
	if len(answers) != len(files) {
		t.Fatalf("the oracle answered %d files of %d", len(answers), len(files))
	}
	return answers
}

// normalize renders our plist value as classify.js renders @expo/plist's.
func normalize(v any) any {
	switch v := v.(type) {
	case time.Time:
		return map[string]any{"date": v.UTC().Format("2006-01-02T15:04:05.000Z")}
	case []byte:
		return map[string]any{"data": base64.StdEncoding.EncodeToString(v)}
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normalize(e)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			out[k] = normalize(e)
		}
		return out
	case int64:
		return float64(v)
	}
	return v
}

func TestOracle(t *testing.T) {
	m := newMaterial(t)
	type tc struct {
		name    string
		content []byte
		raw     []byte
	}
	var cases []tc
	n := 0
	for _, devices := range [][]string{nil, {}, {"00008030-001A2B3C4D5E6F70", "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"}} {
		for _, all := range []bool{false, true} {
			for _, debug := range []bool{false, true} {
				for _, appID := range []string{"ABCDE12345.com.example.app", "ABCDE12345.*"} {
					n++
					p := baseProfile(m)
					p.UUID = fmt.Sprintf("00000000-0000-0000-0000-%012d", n)
					p.Name = fmt.Sprintf("Profile %d & <co>", n)
					p.Devices, p.AllDevices, p.GetTaskAllow, p.AppID = devices, all, debug, appID
					content := p.Plist()
					name := fmt.Sprintf("devices=%v all=%v debug=%v %s", devices, all, debug, appID)
					// One segment: eas-cli reads the whole file as UTF-8 text, which
					// works on Apple's profiles because their plist is in one
					// piece; segment headers would land inside its text.
					cases = append(cases, tc{name + " (Go BER)", content, provisioningtest.WrapBER(content, len(content))})
					if n%4 == 1 {
						cases = append(cases,
							tc{name + " (openssl DER)", content, provisioningtest.SignOpenSSL(t, content, m.apple, false)},
							tc{name + " (openssl BER)", content, provisioningtest.SignOpenSSL(t, content, m.apple, true)})
					}
				}
			}
		}
	}
	var files [][]byte
	for _, c := range cases {
		files = append(files, c.raw)
	}
	answers := runOracle(t, files)
	for i, c := range cases {
		a := answers[i]
		if a.Error != "" {
			t.Errorf("%s: @expo/plist: %s", c.name, a.Error)
			continue
		}
		p, err := provisioning.Parse(c.raw)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if p.IsAdHoc() != a.AdHoc || p.IsDevelopment() != a.Development || p.IsEnterprise() != a.Enterprise || p.TeamID != a.TeamID || p.Name != a.Name {
			t.Errorf("%s: ours adhoc=%v dev=%v enterprise=%v team=%s name=%q; eas-cli's adhoc=%v dev=%v enterprise=%v team=%s name=%q",
				c.name, p.IsAdHoc(), p.IsDevelopment(), p.IsEnterprise(), p.TeamID, p.Name, a.AdHoc, a.Development, a.Enterprise, a.TeamID, a.Name)
		}
		v, err := plist.Parse(c.content)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		// Round-trip through JSON so both sides have JSON's types.
		ours, _ := json.Marshal(normalize(v))
		var oursJSON any
		if err := json.Unmarshal(ours, &oursJSON); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(oursJSON, a.Plist) {
			theirs, _ := json.Marshal(a.Plist)
			t.Errorf("%s: plist differs\nours   %s\ntheirs %s", c.name, ours, theirs)
		}
	}
	t.Logf("compared %d profiles with @expo/plist", len(cases))
}
