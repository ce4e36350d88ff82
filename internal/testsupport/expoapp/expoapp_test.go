package expoapp

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProject: the fixture comes with the packages its lockfile names,
// and Node resolves the Expo CLI from inside the project.
func TestProject(t *testing.T) {
	dir := Project(t)
	for _, f := range []string{"package.json", "package-lock.json", "eas.json", "app.json", "src/app/index.tsx", "node_modules/expo/package.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	cmd := exec.Command("node", "--print", "require('expo/package.json').version")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "55.") {
		t.Fatalf("expo's version in the project: %v %s", err, out)
	}
	// A second call finds the machine's install.
	if a, b := NodeModules(t), NodeModules(t); a != b {
		t.Fatalf("two installs: %s, %s", a, b)
	}
}
