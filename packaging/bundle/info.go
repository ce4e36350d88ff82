// Package bundle assembles FreeAgent.app (Info.plist, the binaries, the
// icon) and checks a bundle's layout, property list and Mach-O files, so a
// broken bundle is caught on Linux CI rather than on a Mac.
package bundle

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/freeagent-build/freeagent/internal/plist"
	"github.com/freeagent-build/freeagent/launchd"
)

// The bundle's fixed names.
const (
	AppName        = "FreeAgent.app"
	Executable     = "freeagent"    // Contents/MacOS/freeagent: the app and the CLI
	GuestBinary    = "freeagent-vm" // Contents/Resources/freeagent-vm: copied into build VMs
	IconName       = "FreeAgent"    // Contents/Resources/FreeAgent.icns
	MinimumMacOS   = "13.0"
	bundleIDPrefix = "build.freeagent."
	// LocalNetworkUsage is the reason macOS shows when it asks whether the
	// app may reach devices on the local network.
	LocalNetworkUsage = "Free Agent connects to your build controller and to this Mac's build VMs on the local network to receive builds and report their results."
)

// Info is the app's Info.plist.
type Info struct {
	CFBundleDevelopmentRegion     string `plist:"CFBundleDevelopmentRegion"`
	CFBundleDisplayName           string `plist:"CFBundleDisplayName"`
	CFBundleExecutable            string `plist:"CFBundleExecutable"`
	CFBundleIconFile              string `plist:"CFBundleIconFile"`
	CFBundleIdentifier            string `plist:"CFBundleIdentifier"`
	CFBundleInfoDictionaryVersion string `plist:"CFBundleInfoDictionaryVersion"`
	CFBundleName                  string `plist:"CFBundleName"`
	CFBundlePackageType           string `plist:"CFBundlePackageType"`
	CFBundleShortVersionString    string `plist:"CFBundleShortVersionString"`
	CFBundleVersion               string `plist:"CFBundleVersion"`
	LSApplicationCategoryType     string `plist:"LSApplicationCategoryType"`
	LSMinimumSystemVersion        string `plist:"LSMinimumSystemVersion"`
	// LSUIElement: a menu-bar app, with no Dock icon and no app menu.
	LSUIElement              bool   `plist:"LSUIElement"`
	NSHighResolutionCapable  bool   `plist:"NSHighResolutionCapable"`
	NSHumanReadableCopyright string `plist:"NSHumanReadableCopyright"`
	// NSLocalNetworkUsageDescription: from macOS 15 on, a connection to an
	// address on the LAN (a controller at 192.168.x.y or build.local) needs
	// the user's consent, and the prompt shows this text. Without it the
	// connection is refused without a prompt and the worker stays offline.
	NSLocalNetworkUsageDescription string `plist:"NSLocalNetworkUsageDescription"`
	// FreeAgentSourceVersion is the full `git describe`, for bug reports.
	FreeAgentSourceVersion string `plist:"FreeAgentSourceVersion"`
}

// NewInfo fills Info.plist for a `git describe --tags --always --dirty`.
func NewInfo(describe string) Info {
	short, build := Versions(describe)
	return Info{
		CFBundleDevelopmentRegion:      "en",
		CFBundleDisplayName:            "Free Agent",
		CFBundleExecutable:             Executable,
		CFBundleIconFile:               IconName,
		CFBundleIdentifier:             launchd.BundleID,
		CFBundleInfoDictionaryVersion:  "6.0",
		CFBundleName:                   "FreeAgent",
		CFBundlePackageType:            "APPL",
		CFBundleShortVersionString:     short,
		CFBundleVersion:                build,
		LSApplicationCategoryType:      "public.app-category.developer-tools",
		LSMinimumSystemVersion:         MinimumMacOS,
		LSUIElement:                    true,
		NSHighResolutionCapable:        true,
		NSHumanReadableCopyright:       "Free Agent contributors",
		NSLocalNetworkUsageDescription: LocalNetworkUsage,
		FreeAgentSourceVersion:         describe,
	}
}

// Render returns Info.plist as XML.
func (i Info) Render() ([]byte, error) {
	b, err := plist.Marshal(i)
	if err != nil {
		return nil, fmt.Errorf("render Info.plist: %w", err)
	}
	return append(b, '\n'), nil
}

var describeRE = regexp.MustCompile(`^(v)?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-[0-9A-Za-z.]+)*?(?:-(\d+)-g[0-9a-f]+)?(?:-dirty)?$`)

// Versions turns `git describe --tags --always --dirty` output into
// CFBundleShortVersionString (three numbers, what users see) and
// CFBundleVersion (numbers only, plus the commits since the tag). Without a
// version tag both are 0.0.0; the full text goes to FreeAgentSourceVersion.
func Versions(describe string) (short, build string) {
	m := describeRE.FindStringSubmatch(strings.TrimSpace(describe))
	// A bare number is an abbreviated commit hash, not a version.
	if m == nil || (m[1] == "" && m[3] == "") {
		return "0.0.0", "0.0.0"
	}
	num := func(s string) string {
		n, _ := strconv.Atoi(s) // "" → 0
		return strconv.Itoa(n)
	}
	short = num(m[2]) + "." + num(m[3]) + "." + num(m[4])
	build = short
	if n := num(m[5]); n != "0" {
		build += "." + n
	}
	return short, build
}
