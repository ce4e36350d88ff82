package appversion

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestSetJSONKeepsTheRest(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"expo": {"android": {"package": "a", "versionCode": 4}}}`, `{"expo": {"android": {"package": "a", "versionCode": 5}}}`},
		{"{\n  \"expo\": {\n    \"name\": \"x\"\n  }\n}", "{\n  \"expo\": {\n    \"name\": \"x\",\n    \"android\": {\"versionCode\": 5}\n  }\n}"},
		{`{"expo":{}}`, `{"expo":{"android": {"versionCode": 5}}}`},
		{`{"expo":{"ios":{"buildNumber":"1"},"android":{"x":[1,{"versionCode":1}],"s":"a\"}"}}}`, `{"expo":{"ios":{"buildNumber":"1"},"android":{"x":[1,{"versionCode":1}],"s":"a\"}", "versionCode": 5}}}`},
	}
	for _, c := range cases {
		got, err := setJSON([]byte(c.in), []string{"expo", "android", "versionCode"}, json.RawMessage("5"))
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.in, got, c.want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: invalid result %s", c.in, got)
		}
	}
	if _, err := setJSON([]byte(`{"expo":{"android":3}}`), []string{"expo", "android", "versionCode"}, json.RawMessage("5")); err == nil {
		t.Error("a non-object on the path was overwritten")
	}
}

func TestGradleVersions(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "build.gradle")
	const gradle = "android {\n    defaultConfig {\n        versionCode 7\n        versionName \"1.4.0\"\n    }\n}\n"
	if err := os.WriteFile(path, []byte(gradle), 0o600); err != nil {
		t.Fatal(err)
	}
	code, name, err := GradleVersions(path)
	if err != nil || code != "7" || name != "1.4.0" {
		t.Fatalf("read %q %q %v", code, name, err)
	}
	if err := SetGradleVersions(path, "8", ""); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if want := "android {\n    defaultConfig {\n        versionCode 8\n        versionName \"1.4.0\"\n    }\n}\n"; string(b) != want {
		t.Fatalf("got\n%s", b)
	}
	kts := filepath.Join(dir, "build.gradle.kts")
	os.WriteFile(kts, []byte("defaultConfig {\n  versionCode = 3\n  versionName = \"2.0\"\n}\n"), 0o600)
	if err := SetGradleVersions(kts, "4", "2.1"); err != nil {
		t.Fatal(err)
	}
	if code, name, _ := GradleVersions(kts); code != "4" || name != "2.1" {
		t.Fatalf("kts: %q %q", code, name)
	}
}
