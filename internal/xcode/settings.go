package xcode

import (
	"path"
	"regexp"
	"strings"
	"unicode"
)

// settingRef matches one build setting reference: $(VAR), $(VAR:mod...)
// (with config-plugins' single level of nested parentheses), or ${VAR}.
var settingRef = regexp.MustCompile(`\$\(([^()]*|\([^)]*\))\)|\$\{([^{}]*)\}`)

// maxResolveDepth stops a self-referencing setting (A = $(A)), which
// Xcode reports as a cycle and config-plugins overflows its stack on.
const maxResolveDepth = 32

// resolveSetting expands the references in value as config-plugins'
// resolveXcodeBuildSetting does: each reference's variable is looked up
// and expanded recursively, then its modifiers are applied in order, and
// the whole is expanded again until nothing changes.
func resolveSetting(value string, lookup func(string) string, depth int) string {
	if depth > maxResolveDepth {
		return ""
	}
	parsed := settingRef.ReplaceAllStringFunc(value, func(match string) string {
		inner := match[2 : len(match)-1]
		parts := strings.Split(inner, ":")
		resolved := lookup(parts[0])
		if resolved != "" {
			resolved = resolveSetting(resolved, lookup, depth+1)
		}
		for _, modifier := range parts[1:] {
			resolved = applyModifier(resolved, modifier)
		}
		return resolveSetting(resolved, lookup, depth+1)
	})
	if parsed != value {
		return resolveSetting(parsed, lookup, depth+1)
	}
	return value
}

// applyModifier is one of Xcode's build setting transformations, as
// config-plugins implements them.
func applyModifier(s, modifier string) string {
	switch modifier {
	case "lower":
		return strings.ToLower(s)
	case "upper":
		return strings.ToUpper(s)
	case "suffix":
		return nodeExtname(s)
	case "file":
		if s == "" {
			return s
		}
		return nodeBasename(s)
	case "dir":
		if s == "" {
			return s
		}
		return path.Dir(strings.TrimRight(s, "/"))
	case "base":
		if s == "" {
			return s
		}
		b := nodeBasename(s)
		if i := strings.LastIndexByte(b, '.'); i >= 0 {
			return b[:i]
		}
		return b
	case "rfc1034identifier":
		var b strings.Builder
		for _, r := range s {
			switch {
			case r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r)):
				b.WriteRune(r)
			case r > 0xFFFF:
				b.WriteString("--") // JavaScript replaces each UTF-16 unit
			default:
				b.WriteByte('-')
			}
		}
		return b.String()
	case "c99extidentifier":
		var b strings.Builder
		for _, r := range s {
			if r == '-' || unicode.IsSpace(r) || r == '\uFEFF' {
				b.WriteByte('_')
			} else {
				b.WriteRune(r)
			}
		}
		return b.String()
	case "standardizepath":
		if s == "" {
			return s
		}
		return path.Clean(s)
	default:
		if s == "" {
			if i := strings.Index(modifier, "default="); i >= 0 {
				return modifier[i+len("default="):]
			}
		}
		return s
	}
}

// nodeBasename is Node's path.basename: the last component, ignoring
// trailing slashes.
func nodeBasename(s string) string {
	s = strings.TrimRight(s, "/")
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// nodeExtname is Node's path.extname: from the last '.' of the last
// component, "" when that dot starts the component.
func nodeExtname(s string) string {
	b := nodeBasename(s)
	i := strings.LastIndexByte(b, '.')
	if i <= 0 || b == ".." {
		return ""
	}
	return b[i:]
}
