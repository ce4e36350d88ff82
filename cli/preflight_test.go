package cli

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/controller/httpapi"
)

// A project the build could not even start is refused before the
// controller hears of it: no request reaches it (a recording proxy in
// front of a real controller counts them), the exit code is the usage
// one, and the message names what to add.
func TestSubmitRefusesIncompleteProjectBeforeAnyRequest(t *testing.T) {
	e := newEnv(t)
	p := e.proxy()
	write := func(dir string, files map[string]string) string {
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	appJSON := `{"expo":{"name":"demo","slug":"demo","android":{"package":"com.example.demo"}}}`
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"no package.json", map[string]string{"app.json": appJSON}, []string{"has no package.json", "npm init -y", "npx expo install expo react-native"}},
		{"package.json not JSON", map[string]string{"app.json": appJSON, "package.json": `{"name": "demo",`}, []string{"package.json is not valid JSON"}},
		{"package.json not an object", map[string]string{"app.json": appJSON, "package.json": `null`}, []string{"not a JSON object"}},
		{"no app config", map[string]string{"package.json": `{"name":"demo"}`}, []string{"no app.json or app.config.*", `{"expo":{"name":"My App","slug":"my-app"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := write(t.TempDir(), tc.files)
			r := e.run(map[string]string{"EXPO_CONTROLLER_URL": p.URL}, "build", "--no-wait", dir, "--platform", "android")
			if r.code != ExitUsage {
				t.Fatalf("want exit %d\n%s", ExitUsage, r)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not say %q\n%s", w, r)
				}
			}
			if reqs := p.log(); len(reqs) != 0 {
				t.Errorf("%d requests reached the controller: %+v", len(reqs), reqs)
			}
		})
	}
	// The same project with a package.json goes through the same proxy:
	// the proxy does count requests.
	dir := write(t.TempDir(), map[string]string{"app.json": appJSON, "package.json": `{"name":"demo"}`})
	e.mustRun(ExitOK, map[string]string{"EXPO_CONTROLLER_URL": p.URL}, "build", "--no-wait", dir, "--platform", "android")
	if !sentSubmit(p.log()) {
		t.Fatalf("the complete project's submit did not pass the proxy: %+v", p.log())
	}
}

func sentSubmit(reqs []recorded) bool {
	for _, r := range reqs {
		if r.Method == http.MethodPost && r.Path == "/api/builds" {
			return true
		}
	}
	return false
}

// sparse makes a file of size bytes that takes no disk space (the scan
// only looks at sizes; nothing is read when the upload is refused).
func sparse(t *testing.T, name string, size int64) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

// A project larger than the controller's limit is refused before the
// upload, naming the total, the limit (learnt from the controller), the
// setting that raises it and the largest files.
func TestSubmitRefusesOversizedProjectBeforeUpload(t *testing.T) {
	t.Run("one 2.2 GB file, default limit", func(t *testing.T) {
		e := newEnv(t)
		p := e.proxy()
		root := project(t, map[string]string{})
		sparse(t, filepath.Join(root, "assets", "intro.mov"), 2_200_000_000)
		r := e.run(map[string]string{"EXPO_CONTROLLER_URL": p.URL}, "build", "--no-wait", root, "--platform", "android")
		if r.code != ExitUsage {
			t.Fatalf("want exit %d\n%s", ExitUsage, r)
		}
		limit := httpapi.DefaultLimits().Source
		for _, w := range []string{"assets/intro.mov alone is 2.2 GB", fmt.Sprintf("%d bytes", limit), "--max-source-bytes", "nothing was uploaded", `"/assets/intro.mov"`} {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("stderr does not say %q\n%s", w, r)
			}
		}
		if sentSubmit(p.log()) {
			t.Errorf("the project was uploaded: %+v", p.log())
		}
	})
	t.Run("many files over a small limit", func(t *testing.T) {
		e := newEnv(t, func(l *httpapi.Limits) { l.Source = 10_000_000 })
		p := e.proxy()
		root := project(t, map[string]string{".gitignore": "/ignored/\n"})
		for i := range 8 {
			sparse(t, filepath.Join(root, "media", fmt.Sprintf("clip%d.mp4", i)), int64(i+1)*1_000_000)
		}
		sparse(t, filepath.Join(root, "ignored", "huge.bin"), 50_000_000) // left out: not counted
		r := e.run(map[string]string{"EXPO_CONTROLLER_URL": p.URL}, "build", "--no-wait", root, "--platform", "android")
		if r.code != ExitUsage {
			t.Fatalf("want exit %d\n%s", ExitUsage, r)
		}
		if !strings.Contains(r.stderr, "the project is 36.0 MB in ") || !strings.Contains(r.stderr, "(10.0 MB, 10000000 bytes)") {
			t.Errorf("the total and the limit are not named\n%s", r)
		}
		// The five largest, largest first; the sixth is not listed.
		at := -1
		for i := 8; i >= 4; i-- {
			j := strings.Index(r.stderr, fmt.Sprintf("%d.0 MB  media/clip%d.mp4", i, i-1))
			if j < at {
				t.Errorf("clip%d.mp4 (%d MB) is missing or out of order\n%s", i-1, i, r)
			}
			at = j
		}
		if strings.Contains(r.stderr, "clip2.mp4") || strings.Contains(r.stderr, "huge.bin") {
			t.Errorf("lists more than the five largest packed files\n%s", r)
		}
		if !strings.Contains(r.stderr, ".gitignore") {
			t.Errorf("the hint does not name the project's ignore file\n%s", r)
		}
		if sentSubmit(p.log()) {
			t.Errorf("the project was uploaded: %+v", p.log())
		}
		// Under the limit, the same project goes.
		for i := 3; i < 8; i++ {
			os.Remove(filepath.Join(root, "media", fmt.Sprintf("clip%d.mp4", i)))
		}
		e.mustRun(ExitOK, map[string]string{"EXPO_CONTROLLER_URL": p.URL}, "build", "--no-wait", root, "--platform", "android")
	})
}
