package easjson

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"
)

// semverRe is node-semver's strict FULL pattern: an optional "v",
// MAJOR.MINOR.PATCH without leading zeros, an optional pre-release and
// build metadata. No ranges ("^1.2.3", "1.x") and no partial versions.
var semverRe = regexp.MustCompile(`^v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)` +
	`(?:-(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][a-zA-Z0-9-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][a-zA-Z0-9-]*))*)?` +
	`(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$`)

// validSemver is semver.valid(v) of node-semver 7 (what eas.json's
// version keys are checked with): at most 256 characters, surrounding
// whitespace ignored, numeric parts within JavaScript's safe integers.
func validSemver(v string) bool {
	if jsLength(v) > 256 {
		return false
	}
	m := semverRe.FindStringSubmatch(strings.TrimFunc(v, isJSSpace))
	if m == nil {
		return false
	}
	for _, part := range m[1:4] {
		n, err := strconv.ParseUint(part, 10, 64)
		if err != nil || n > 1<<53-1 {
			return false
		}
	}
	return true
}

// jsLength is a string's JavaScript length: UTF-16 code units.
func jsLength(s string) int {
	n := 0
	for _, r := range s {
		n += max(1, utf16.RuneLen(r))
	}
	return n
}

// NextPatch is semver.inc(v, "patch") of node-semver 7, which eas-cli
// bumps expo.version with: the patch number plus one, or, for a
// pre-release, the same numbers without it; build metadata and a leading
// "v" are dropped. ok is false when v is not a valid version.
func NextPatch(v string) (next string, ok bool) {
	if !validSemver(v) {
		return "", false
	}
	m := semverRe.FindStringSubmatch(strings.TrimFunc(v, isJSSpace))
	patch, _ := strconv.ParseUint(m[3], 10, 64)
	if !strings.Contains(strings.SplitN(strings.TrimPrefix(strings.TrimFunc(v, isJSSpace), "v"), "+", 2)[0], "-") {
		patch++
	}
	return m[1] + "." + m[2] + "." + strconv.FormatUint(patch, 10), true
}
