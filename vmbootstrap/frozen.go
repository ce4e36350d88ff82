package vmbootstrap

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/toolchain"
)

// NoFrozenLockfileEnv, set to any non-empty value in the build's
// environment (the profile's env or a farm variable), makes the install
// unfrozen, as on EAS.
const NoFrozenLockfileEnv = "EAS_NO_FROZEN_LOCKFILE"

// Before these versions EAS Build never freezes the install: the lockfile
// of an older project may not survive a frozen install of EAS's own tools.
var (
	frozenMinSDK         = version{major: 53}
	frozenMinReactNative = version{minor: 79}
)

// frozenInstall decides, as EAS Build does, whether the install runs
// frozen: not when the build's environment sets EAS_NO_FROZEN_LOCKFILE,
// nor for an Expo SDK before 53 or React Native before 0.79. The versions
// are the developer's (the app config's SDK and the installed React
// Native, which expo-build sends), else package.json's dependency with
// its range stripped (node-semver's coerce); an unknown version does not
// stop freezing. why says what unfroze it. The caller still needs a
// lockfile (InstallCommands).
func frozenInstall(env []string, app api.App, pkg packageJSON) (frozen bool, why string) {
	if v := toolchain.EnvValue(env, NoFrozenLockfileEnv); v != "" {
		return false, NoFrozenLockfileEnv + " is set"
	}
	sdk, sdkFrom := app.SDKVersion, "the app config's sdkVersion"
	if sdk == "" {
		sdk, sdkFrom = pkg.dependencyVersion("expo"), "package.json's expo"
	}
	if v, ok := parseVersion(sdk); ok && v.less(frozenMinSDK) {
		return false, fmt.Sprintf("Expo SDK %s (%s) is older than 53", sdk, sdkFrom)
	}
	rn, rnFrom := app.ReactNativeVersion, "the installed react-native"
	if rn == "" {
		rn, rnFrom = pkg.dependencyVersion("react-native"), "package.json's react-native"
	}
	if v, ok := parseVersion(rn); ok && v.less(frozenMinReactNative) {
		return false, fmt.Sprintf("React Native %s (%s) is older than 0.79", rn, rnFrom)
	}
	return true, ""
}

// version is a semantic version's numbers; pre marks a pre-release, which
// precedes the release of the same numbers.
type version struct {
	major, minor, patch int
	pre                 bool
}

var semverPattern = regexp.MustCompile(`^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// parseVersion reads a full semantic version; ok is false for anything
// else, which the caller treats as unknown.
func parseVersion(s string) (v version, ok bool) {
	m := semverPattern.FindStringSubmatch(s)
	if m == nil {
		return v, false
	}
	n := make([]int, 3)
	for i := range n {
		var err error
		if n[i], err = strconv.Atoi(m[i+1]); err != nil {
			return v, false
		}
	}
	return version{n[0], n[1], n[2], m[4] != ""}, true
}

func (v version) less(w version) bool {
	switch {
	case v.major != w.major:
		return v.major < w.major
	case v.minor != w.minor:
		return v.minor < w.minor
	case v.patch != w.patch:
		return v.patch < w.patch
	}
	return v.pre && !w.pre
}

// coercePattern is node-semver's coerce: the first run of up to three
// dot-separated numbers not inside a longer run of digits.
var coercePattern = regexp.MustCompile(`(?:^|[^\d])(\d{1,16})(?:\.(\d{1,16}))?(?:\.(\d{1,16}))?(?:$|[^\d])`)

// coerceVersion is node-semver's coerce(s)?.version: "~55.0.31" is
// "55.0.31", "^0.79" is "0.79.0"; "" when s holds no number.
func coerceVersion(s string) string {
	m := coercePattern.FindStringSubmatch(s)
	if m == nil {
		return ""
	}
	n := [3]string{m[1], m[2], m[3]}
	for i := range n {
		if n[i] == "" {
			n[i] = "0"
		}
		x, err := strconv.ParseUint(n[i], 10, 64)
		if err != nil || x > 1<<53-1 {
			return ""
		}
		n[i] = strconv.FormatUint(x, 10)
	}
	return n[0] + "." + n[1] + "." + n[2]
}
