package hostcheck

import (
	"fmt"
	"slices"
	"strings"

	"github.com/freeagent-build/freeagent/controller/api"
)

// LocalPlatforms decides which platforms a worker with the local driver
// advertises. Its builds run on this host itself, so an iOS build needs
// Xcode here: macOS (goos "darwin") with xcodebuild on the PATH (lookPath
// is exec.LookPath). A Linux worker never advertises iOS, whatever
// --platforms says: it would take iOS builds only to fail each one. The
// result says what was dropped and why.
func LocalPlatforms(configured []string, goos string, lookPath func(string) (string, error)) ([]string, Result) {
	r := Result{ID: IDPlatforms}
	if len(configured) == 0 {
		configured = DefaultPlatforms
	}
	why := ""
	if goos != "darwin" {
		why = "builds run on this " + goos + " host, and iOS builds need macOS with Xcode"
	} else if _, err := lookPath("xcodebuild"); err != nil {
		why = "builds run on this Mac, which has no xcodebuild on the PATH (install Xcode, then `sudo xcode-select -s /Applications/Xcode.app`)"
	}
	var use []string
	for _, p := range configured {
		if p != api.PlatformIOS || why == "" {
			use = append(use, p)
		}
	}
	switch {
	case len(use) == 0:
		r.Severity, r.Message = Fail, fmt.Sprintf("the local driver cannot build %s: %s; this worker takes no builds", strings.Join(configured, ", "), why)
		r.Fix = "build Android here (--platforms android), or run iOS builds on a Mac with Xcode"
	case len(use) < len(configured):
		r.Severity, r.Message = Warn, fmt.Sprintf("not advertising ios: %s; advertising %s", why, strings.Join(use, ", "))
		r.Fix = "set --platforms android to say so, or run iOS builds on a Mac with Xcode"
	default:
		r.Severity, r.Message = OK, "building "+strings.Join(use, ", ")+" on this host (local driver)"
	}
	return slices.Clip(use), r
}
