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
