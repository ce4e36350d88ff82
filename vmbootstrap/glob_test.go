package vmbootstrap

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestGlobFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{
		"android/app/build/outputs/apk/release/app-release.apk",
		"android/app/build/outputs/apk/free/release/app-free-release.apk",
		"android/app/build/outputs/bundle/release/app-release.aab",
		"android/app/build/outputs/apk/release/output-metadata.json",
		"android/app/build/outputs/.hidden/x.apk",
		"android/app/build/outputs/mapping/release/mapping.txt",
		"top.apk",
	} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644)
	}
	os.Symlink("/etc/passwd", filepath.Join(dir, "android/app/build/outputs/link.apk"))
	rel := func(files []string) string {
		var out []string
		for _, f := range files {
			r, _ := filepath.Rel(dir, f)
			out = append(out, filepath.ToSlash(r))
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct {
		patterns []string
		want     string
	}{
		{[]string{"android/app/build/outputs/**/*.{apk,aab}"}, "android/app/build/outputs/apk/free/release/app-free-release.apk android/app/build/outputs/apk/release/app-release.apk android/app/build/outputs/bundle/release/app-release.aab"},
		{[]string{"android/app/build/outputs/bundle/release/app-release.aab"}, "android/app/build/outputs/bundle/release/app-release.aab"},
		{[]string{"**/*.apk", "*.apk"}, "android/app/build/outputs/apk/free/release/app-free-release.apk android/app/build/outputs/apk/release/app-release.apk top.apk"},
		{[]string{"android/app/build/outputs/mapping/*/mapping.txt"}, "android/app/build/outputs/mapping/release/mapping.txt"},
		{[]string{"android/**/.hidden/*.apk"}, "android/app/build/outputs/.hidden/x.apk"},
		{[]string{"nothing/**"}, ""},
	} {
		got, err := globFiles(dir, c.patterns)
		if err != nil || rel(got) != c.want {
			t.Errorf("%v:\n got %q %v\nwant %q", c.patterns, rel(got), err, c.want)
		}
	}
	for _, bad := range []string{"../*.apk", "a/../../b", "{a,b", "[", ".."} {
		if _, err := globFiles(dir, []string{bad}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestExpandBraces(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{"a/b/x.apk", "a/ce/y.aab", "a/cf/z.apk"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	got, err := globFiles(dir, []string{"a/{b,c{d,e}}/*.{apk,aab}"})
	want := []string{filepath.Join(dir, "a/b/x.apk"), filepath.Join(dir, "a/ce/y.aab")}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %v %v", got, err)
	}
	if _, err := globFiles(dir, []string{strings.Repeat("{a,b}", 10)}); err == nil {
		t.Fatal("1024 alternatives accepted")
	}
}
