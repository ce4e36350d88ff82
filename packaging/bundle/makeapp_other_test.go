//go:build !darwin

package bundle

import (
	"os/exec"
	"strings"
	"testing"
)

func TestMakeAppRefusesToRunOffMacOS(t *testing.T) {
	out, err := exec.Command("../make-app.sh").CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(out), "make app needs macOS") || !strings.Contains(string(out), "make package-check") {
		t.Fatalf("exit %d: %s", code, out)
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
