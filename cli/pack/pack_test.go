package pack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/controller/controllertest"
)

// tree writes files (name → content; a name ending in "/" is a directory).
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// unpack returns the archive's entries: name → content ("<dir>" for
// directories, "-> target" for links).
func unpack(t *testing.T, archive []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			out[h.Name] = "<dir>"
		case tar.TypeSymlink:
			out[h.Name] = "-> " + h.Linkname
		default:
			b, _ := io.ReadAll(tr)
			out[h.Name] = string(b)
		}
	}
}

func packTree(t *testing.T, root string) (*Plan, map[string]string) {
	t.Helper()
	p, err := Scan(context.Background(), root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	var last int64
	if _, err := p.Write(context.Background(), &buf, func(n int64) { last = n }); err != nil {
		t.Fatal(err)
	}
	if last != p.Bytes {
		t.Fatalf("progress ended at %d of %d bytes", last, p.Bytes)
	}
	return p, unpack(t, buf.Bytes())
}

func TestDefaultsAndGitignore(t *testing.T) {
	root := tree(t, map[string]string{
		"app.json":                           `{"expo":{}}`,
		"package.json":                       `{}`,
		"App.tsx":                            "export default 1",
		"node_modules/react/index.js":        "SECRET-DEPENDENCY",
		"packages/lib/node_modules/x/y.js":   "nested deps",
		".git/HEAD":                          "ref",
		".expo/settings.json":                "{}",
		"dist/bundle.js":                     "built",
		"src/dist/keep.ts":                   "not the root dist",
		"ios/Pods/Manifest.lock":             "pods",
		"ios/App/AppDelegate.m":              "native",
		"android/app/build/out.apk":          "apk",
		"android/app/src/main/Main.java":     "java",
		"debug.log":                          "log",
		"old.ipa":                            "artifact",
		".gitignore":                         ".env\n/secrets/\n!dist/\n",
		".env":                               "TOKEN=1",
		"secrets/key.pem":                    "key",
		"src/.gitignore":                     "*.generated.ts\n!keep.generated.ts\n",
		"src/a.generated.ts":                 "gen",
		"src/keep.generated.ts":              "kept",
		"src/components/Button.generated.ts": "gen",
		"assets/":                            "",
	})
	p, files := packTree(t, root)
	if p.IgnoreFile != ".gitignore" {
		t.Errorf("IgnoreFile = %q", p.IgnoreFile)
	}
	for _, want := range []string{"app.json", "package.json", "App.tsx", "ios/App/AppDelegate.m", "android/app/src/main/Main.java",
		"src/dist/keep.ts", "src/keep.generated.ts", ".gitignore", "src/.gitignore", "assets/", "dist/bundle.js"} {
		if _, ok := files[want]; !ok {
			t.Errorf("%s is missing from the archive", want)
		}
	}
	for name := range files {
		for _, bad := range []string{"node_modules", ".git/", ".expo", "Pods", "app/build", ".log", ".ipa", ".env", "secrets", "a.generated", "Button.generated"} {
			if strings.Contains(name, bad) {
				t.Errorf("%s was packed (matches %q)", name, bad)
			}
		}
	}
	if files["App.tsx"] != "export default 1" {
		t.Errorf("App.tsx content %q", files["App.tsx"])
	}
	if !slices.Contains(p.ExcludedAt, "node_modules/") {
		t.Errorf("ExcludedAt %v lacks node_modules/", p.ExcludedAt)
	}
}

func TestEasignoreReplacesGitignore(t *testing.T) {
	root := tree(t, map[string]string{
		"app.json":          "{}",
		".gitignore":        "generated/\n",
		"generated/api.ts":  "needed by the build",
		"sub/.gitignore":    "*.txt\n",
		"sub/notes.txt":     "kept: nested .gitignore is replaced too",
		".easignore":        "private/\n*.md\n",
		"private/plan.md":   "no",
		"README.md":         "no",
		"node_modules/a.js": "defaults still apply",
	})
	p, files := packTree(t, root)
	if p.IgnoreFile != ".easignore" {
		t.Errorf("IgnoreFile = %q", p.IgnoreFile)
	}
	for _, want := range []string{"generated/api.ts", "sub/notes.txt", ".easignore"} {
		if _, ok := files[want]; !ok {
			t.Errorf("%s missing", want)
		}
	}
	for _, bad := range []string{"private/plan.md", "README.md", "node_modules/a.js"} {
		if _, ok := files[bad]; ok {
			t.Errorf("%s packed", bad)
		}
	}
}

func TestSymlinks(t *testing.T) {
	root := tree(t, map[string]string{"app.json": "{}", "assets/icon.png": "png"})
	outside := t.TempDir()
	os.Symlink("assets/icon.png", filepath.Join(root, "icon.png"))
	os.Symlink("../icon.png", filepath.Join(root, "assets", "up.png"))
	os.Symlink(outside, filepath.Join(root, "abs"))
	os.Symlink("../../etc/passwd", filepath.Join(root, "assets", "escape"))
	p, files := packTree(t, root)
	if files["icon.png"] != "-> assets/icon.png" || files["assets/up.png"] != "-> ../icon.png" {
		t.Errorf("inside links: %v", files)
	}
	if _, ok := files["abs"]; ok {
		t.Error("absolute link packed")
	}
	if _, ok := files["assets/escape"]; ok {
		t.Error("escaping link packed")
	}
	if len(p.Warnings) != 2 {
		t.Errorf("warnings: %v", p.Warnings)
	}
}

func TestFingerprintFollowsChanges(t *testing.T) {
	root := tree(t, map[string]string{"app.json": "{}", "a.ts": "1"})
	fp := func() string {
		p, err := Scan(context.Background(), root, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Fingerprint()
	}
	a, b := fp(), fp()
	if a != b {
		t.Fatal("fingerprint of an unchanged tree differs")
	}
	os.WriteFile(filepath.Join(root, "a.ts"), []byte("12"), 0o644)
	if fp() == a {
		t.Fatal("fingerprint ignores a changed file")
	}
}

func TestShrunkFileFailsClearly(t *testing.T) {
	root := tree(t, map[string]string{"app.json": "{}", "big.bin": strings.Repeat("x", 1000)})
	p, err := Scan(context.Background(), root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "big.bin"), []byte("x"), 0o644)
	_, err = p.Write(context.Background(), io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "big.bin") {
		t.Fatalf("err = %v", err)
	}
}

func scanWith(t *testing.T, root string, opts Options) (*Plan, map[string]string) {
	t.Helper()
	p, err := Scan(context.Background(), root, opts)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := p.Write(context.Background(), &buf, nil); err != nil {
		t.Fatal(err)
	}
	return p, unpack(t, buf.Bytes())
}

// TestMonorepoPacksFromItsRoot: the workspace root is packed with the app
// at its relative path and the workspace packages beside it; the
// defaults anchored at a project's root apply to the app's directory too.
func TestMonorepoPacksFromItsRoot(t *testing.T) {
	root := tree(t, map[string]string{
		"package.json":                           `{"workspaces":["apps/*","packages/*"]}`,
		"yarn.lock":                              "# yarn lockfile v1\n",
		".gitignore":                             "*.tmp\n",
		"node_modules/react/index.js":            "dep",
		"packages/shared/package.json":           `{"name":"@fixture/shared"}`,
		"packages/shared/index.js":               "module.exports = 1",
		"packages/shared/node_modules/x/i.js":    "dep",
		"apps/mobile/package.json":               `{"name":"mobile"}`,
		"apps/mobile/app.json":                   `{"expo":{}}`,
		"apps/mobile/App.tsx":                    "app",
		"apps/mobile/scratch.tmp":                "root .gitignore applies below",
		"apps/mobile/.gitignore":                 "secret.txt\n",
		"apps/mobile/secret.txt":                 "no",
		"apps/mobile/.easignore":                 "App.tsx\n",
		"apps/mobile/node_modules/a/i.js":        "dep",
		"apps/mobile/ios/Pods/Manifest.lock":     "pods",
		"apps/mobile/ios/App/AppDelegate.swift":  "native",
		"apps/mobile/android/app/build/out.apk":  "apk",
		"apps/mobile/android/app/src/Main.java":  "java",
		"apps/mobile/dist/bundle.js":             "built",
		"apps/mobile/src/dist/keep.ts":           "not the app's dist",
		"apps/other/dist/keep.js":                "another package's dist is its own business",
		"apps/mobile/.expo/settings.json":        "{}",
		"apps/mobile/credentials/keystore.jks":   "KEY",
		"apps/mobile/credentials.json":           `{"android":{}}`,
		"apps/mobile/credentials/notes.md":       "inside an excluded directory",
		"apps/mobile/credentials-example.json":   "kept: only exact paths are excluded",
		"apps/mobile/android/keystores/keep.txt": "kept",
	})
	p, files := scanWith(t, root, Options{AppDir: "apps/mobile/", Exclude: []string{"apps/mobile/credentials.json", "./apps/mobile/credentials"}})
	if p.AppDir != "apps/mobile" || p.IgnoreFile != ".gitignore" {
		t.Errorf("AppDir %q, IgnoreFile %q", p.AppDir, p.IgnoreFile)
	}
	for _, want := range []string{"package.json", "yarn.lock", "packages/shared/index.js", "apps/mobile/App.tsx", "apps/mobile/app.json",
		"apps/mobile/ios/App/AppDelegate.swift", "apps/mobile/android/app/src/Main.java", "apps/mobile/src/dist/keep.ts",
		"apps/other/dist/keep.js", "apps/mobile/credentials-example.json", "apps/mobile/android/keystores/keep.txt", "apps/mobile/.easignore"} {
		if _, ok := files[want]; !ok {
			t.Errorf("%s is missing from the archive", want)
		}
	}
	for name := range files {
		for _, bad := range []string{"node_modules", "Pods", "app/build", "apps/mobile/dist", ".expo", ".tmp", "secret.txt", "apps/mobile/credentials/", "apps/mobile/credentials.json"} {
			if strings.Contains(name+"/", bad) {
				t.Errorf("%s was packed (matches %q)", name, bad)
			}
		}
	}
	if !slices.ContainsFunc(p.Warnings, func(w string) bool { return strings.Contains(w, "apps/mobile/.easignore is not used") }) {
		t.Errorf("no warning about the app's .easignore: %v", p.Warnings)
	}
}

// TestExcludeBeatsIgnoreFiles: an excluded path stays out even when the
// ignore file re-includes it or would never exclude it.
func TestExcludeBeatsIgnoreFiles(t *testing.T) {
	for _, ignoreFile := range []string{".gitignore", ".easignore"} {
		root := tree(t, map[string]string{
			"package.json":      "{}",
			ignoreFile:          "*.json\n!package.json\n!credentials.json\n!keys/\n",
			"credentials.json":  `{"android":{"keystore":{"keystorePath":"keys/upload.jks"}}}`,
			"keys/upload.jks":   "KEY",
			"keys/readme.txt":   "kept",
			"keys/upload.jks.1": "kept: not the named path",
		})
		p, files := scanWith(t, root, Options{Exclude: []string{"credentials.json", "keys/upload.jks"}})
		for _, bad := range []string{"credentials.json", "keys/upload.jks"} {
			if _, ok := files[bad]; ok {
				t.Errorf("%s: %s was packed", ignoreFile, bad)
			}
			if !slices.Contains(p.ExcludedAt, bad) {
				t.Errorf("%s: ExcludedAt %v lacks %s", ignoreFile, p.ExcludedAt, bad)
			}
		}
		for _, want := range []string{"package.json", "keys/readme.txt", "keys/upload.jks.1"} {
			if _, ok := files[want]; !ok {
				t.Errorf("%s: %s is missing", ignoreFile, want)
			}
		}
	}
}

func TestScanRejectsPathsOutsideTheRoot(t *testing.T) {
	root := tree(t, map[string]string{"package.json": "{}"})
	for _, opts := range []Options{
		{Exclude: []string{"../credentials.json"}},
		{Exclude: []string{"/etc/passwd"}},
		{Exclude: []string{"."}},
		{AppDir: "../app"},
		{Exclude: []string{`keys\upload.jks`}},
	} {
		if _, err := Scan(context.Background(), root, opts); err == nil {
			t.Errorf("Scan(%+v) accepted it", opts)
		}
	}
}

// sourceFingerprint packs root and returns Write's source fingerprint and
// the archive.
func sourceFingerprint(t *testing.T, root string) (string, []byte) {
	t.Helper()
	p, err := Scan(context.Background(), root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	fp, err := p.Write(context.Background(), &buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fp, buf.Bytes()
}

// TestSourceFingerprint: the fingerprint Write returns is the content's,
// computed again from the archive as the controller does (only that one is
// matched when a build is reused); it ignores modification times and where
// the tree lives, and follows every change of content, mode, name or link.
func TestSourceFingerprint(t *testing.T) {
	files := map[string]string{"app.json": `{"expo":{}}`, "src/a.ts": "export const a = 1", "src/b.ts": "export const b = 2", "empty/": "",
		"assets/big.bin": strings.Repeat("0123456789", 100000)}
	root := tree(t, files)
	if err := os.Symlink("assets/big.bin", filepath.Join(root, "link.bin")); err != nil {
		t.Fatal(err)
	}
	base, archive := sourceFingerprint(t, root)
	if got := controllertest.SourceFingerprint(t, archive); got != base {
		t.Fatalf("Write's fingerprint %s, the archive's %s", base, got)
	}

	// Same content: touched, or a copy elsewhere (created at another time).
	later := time.Now().Add(48 * time.Hour)
	os.Chtimes(filepath.Join(root, "src", "a.ts"), later, later)
	if fp, _ := sourceFingerprint(t, root); fp != base {
		t.Error("touching a file changed the fingerprint")
	}
	copyRoot := tree(t, files)
	os.Symlink("assets/big.bin", filepath.Join(copyRoot, "link.bin"))
	if fp, _ := sourceFingerprint(t, copyRoot); fp != base {
		t.Error("a copy of the tree has another fingerprint")
	}

	changes := map[string]func(dir string){
		"a byte of a file": func(d string) { os.WriteFile(filepath.Join(d, "src", "a.ts"), []byte("export const a = 2"), 0o644) },
		"a file's mode":    func(d string) { os.Chmod(filepath.Join(d, "src", "a.ts"), 0o755) },
		"a file's name":    func(d string) { os.Rename(filepath.Join(d, "src", "b.ts"), filepath.Join(d, "src", "c.ts")) },
		"a new empty file": func(d string) { os.WriteFile(filepath.Join(d, "src", "z.ts"), nil, 0o644) },
		"a link's target": func(d string) {
			os.Remove(filepath.Join(d, "link.bin"))
			os.Symlink("app.json", filepath.Join(d, "link.bin"))
		},
		"an empty directory": func(d string) { os.Remove(filepath.Join(d, "empty")) },
		"bytes moved between files": func(d string) {
			os.WriteFile(filepath.Join(d, "src", "a.ts"), []byte("export const a = 1export"), 0o644)
			os.WriteFile(filepath.Join(d, "src", "b.ts"), []byte(" const b = 2"), 0o644)
		},
	}
	for what, change := range changes {
		d := tree(t, files)
		os.Symlink("assets/big.bin", filepath.Join(d, "link.bin"))
		change(d)
		fp, archive := sourceFingerprint(t, d)
		if fp == base {
			t.Errorf("changing %s kept the fingerprint", what)
		}
		if got := controllertest.SourceFingerprint(t, archive); got != fp {
			t.Errorf("after changing %s: Write's fingerprint %s, the archive's %s", what, fp, got)
		}
	}
}

// Packs answers for one file what Scan decides for the whole tree: every
// file of several layouts of ignore rules, packed or not, agrees.
func TestPacksAgreesWithScan(t *testing.T) {
	files := map[string]string{
		".gitignore":                            "/ios\n*.secret\n",
		"ios/App.xcodeproj/project.pbxproj":     "p",
		"android/.gitignore":                    "app/\n!keep.gradle\n",
		"android/app/build.gradle":              "g",
		"android/keep.gradle":                   "k",
		"android/build.gradle":                  "b",
		"apps/mobile/android/app/build.gradle":  "m",
		"apps/mobile/android/app/build/out.apk": "x",
		"apps/mobile/key.secret":                "s",
		"apps/mobile/credentials.json":          "c",
		"package.json":                          "{}",
	}
	for _, tc := range []struct {
		name  string
		extra map[string]string
		opts  Options
	}{
		{name: "gitignore files", opts: Options{AppDir: "apps/mobile", Exclude: []string{"apps/mobile/credentials.json"}}},
		{name: "easignore replaces them", extra: map[string]string{".easignore": "android/app/\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := map[string]string{}
			for k, v := range files {
				all[k] = v
			}
			for k, v := range tc.extra {
				all[k] = v
			}
			root := tree(t, all)
			_, packed := scanWith(t, root, tc.opts)
			for name := range all {
				got, err := Packs(root, tc.opts, name)
				if err != nil {
					t.Fatal(err)
				}
				if _, want := packed[name]; got != want {
					t.Errorf("Packs(%s) = %v, Scan packs it: %v", name, got, want)
				}
			}
			if got, err := Packs(root, tc.opts, "no/such/file"); got || err != nil {
				t.Errorf("Packs of a missing file = %v, %v; want false, nil", got, err)
			}
		})
	}
}
