package bundle

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeAppBuildsForTheBundlesMinimumMacOS runs make-app.sh as on a Mac
// (a stand-in uname says Darwin) up to its cgo build, which a stand-in go
// records and stops: clang must be told the bundle's LSMinimumSystemVersion,
// whatever the build Mac runs and whatever the caller's environment says.
func TestMakeAppBuildsForTheBundlesMinimumMacOS(t *testing.T) {
	realGo, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go on PATH: %v", err)
	}
	stubs := t.TempDir()
	record := filepath.Join(stubs, "cgo-build")
	writeScript(t, filepath.Join(stubs, "uname"), "#!/bin/sh\necho Darwin\n")
	writeScript(t, filepath.Join(stubs, "go"), `#!/bin/sh
if [ "$1" = build ] && [ "$CGO_ENABLED" = 1 ]; then
	echo "${MACOSX_DEPLOYMENT_TARGET-unset}" >>'`+record+`'
	exit 3
fi
exec '`+realGo+`' "$@"
`)
	cmd := exec.Command("../make-app.sh")
	cmd.Env = append(os.Environ(), "PATH="+stubs+string(os.PathListSeparator)+os.Getenv("PATH"),
		"APP_DIR="+t.TempDir(), "MACOSX_DEPLOYMENT_TARGET=15.0") // a caller's own setting does not win
	out, err := cmd.CombinedOutput()
	if code := exitCode(err); code != 3 {
		t.Fatalf("make-app.sh did not reach the cgo build (exit %d):\n%s", code, out)
	}
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatalf("the cgo build never ran: %v\n%s", err, out)
	}
	want := NewInfo("v1.0.0").LSMinimumSystemVersion
	if got := strings.TrimSpace(string(b)); got != want {
		t.Fatalf("the cgo build ran with MACOSX_DEPLOYMENT_TARGET=%s, want the bundle's LSMinimumSystemVersion %s", got, want)
	}
}

func writeScript(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
}

func exitCode(err error) int {
	if e, ok := err.(*exec.ExitError); ok {
		return e.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
