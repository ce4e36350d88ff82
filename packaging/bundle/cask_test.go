package bundle

import (
	"os"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/launchd"
)

// The cask names the bundle, its executable, the LaunchAgent and the data
// folders: keep them in step with the code that makes them.
func TestCaskMatchesTheBundle(t *testing.T) {
	b, err := os.ReadFile("../homebrew/free-agent.rb")
	if err != nil {
		t.Fatal(err)
	}
	cask := string(b)
	for _, want := range []string{
		`version "@VERSION@"`, `sha256 "@SHA256@"`, // filled in by make-app.sh
		`app "` + AppName + `"`,
		`binary "#{appdir}/` + AppName + `/Contents/MacOS/` + Executable + `"`,
		`launchctl: "` + launchd.HostLabel + `"`,
		`quit:      "` + launchd.BundleID + `"`,
		`"~/Library/LaunchAgents/` + launchd.HostLabel + `.plist"`,
		`"~/Library/Logs/FreeAgent"`,
		`"~/Library/Application Support/FreeAgent"`,
		`depends_on macos: ">= :ventura"`, // macOS 13, as LSMinimumSystemVersion
		// Before the Tart formula, which refuses Intel Macs.
		"depends_on arch: :arm64\n  depends_on formula: \"cirruslabs/cli/tart\"",
		`FreeAgent-#{version}.dmg`, // the name make-app.sh gives the dmg
	} {
		if !strings.Contains(cask, want) {
			t.Errorf("the cask lacks %s", want)
		}
	}
	if MinimumMacOS != "13.0" {
		t.Errorf("LSMinimumSystemVersion %s: update the cask's depends_on macos", MinimumMacOS)
	}
	script, _ := os.ReadFile("../make-app.sh")
	if !strings.Contains(string(script), `dmg=$out/FreeAgent-$version.dmg`) {
		t.Error("make-app.sh no longer names the dmg FreeAgent-<version>.dmg, as the cask's url expects")
	}
}
