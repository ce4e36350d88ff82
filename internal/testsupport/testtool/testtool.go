// Package testtool finds the programs tests run. scripts/test-tools.sh is
// the one list of them and installs them, and `make test` runs it before
// any test, so a program missing here is a setup error: the test fails
// naming the program and the command that installs it. It never skips, so
// a machine without the tools cannot pass by testing less.
package testtool

import (
	"os/exec"
	"strings"
	"testing"
)

// Install is the command that installs every program the tests run.
const Install = "scripts/test-tools.sh (make test runs it)"

// Path returns the first of names found on the PATH (alternatives for one
// program, as chromium and chromium-browser), or fails t.
func Path(t testing.TB, names ...string) string {
	t.Helper()
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("%s is not installed: run %s", strings.Join(names, " or "), Install)
	return ""
}

// Need fails t unless every one of names is on the PATH, naming all that
// are missing at once.
func Need(t testing.TB, names ...string) {
	t.Helper()
	var missing []string
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("not installed: %s; run %s", strings.Join(missing, ", "), Install)
	}
}
