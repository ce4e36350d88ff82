package xcode

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// SanitizedName is IOSConfig.XcodeUtils.sanitizedName: the name
// `expo prebuild` gives the Xcode project, scheme and application target
// of an app called name. Letters and numbers are kept, decomposed (NFKD)
// with their combining marks dropped, transliterated by slugify's
// character map and reduced to ASCII letters and digits; when nothing is
// left, the whole name goes through slugify alone ("$" → "dollar"), and
// then "app".
func SanitizedName(name string) string {
	lettersAndNumbers := strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsNumber(r) {
			return r
		}
		return -1
	}, name)
	lettersAndNumbers = strings.Map(func(r rune) rune {
		if unicode.Is(unicode.M, r) {
			return -1
		}
		return r
	}, norm.NFKD.String(lettersAndNumbers))
	if s := asciiIdentifier(slugify(lettersAndNumbers)); s != "" {
		return s
	}
	if s := asciiIdentifier(slugify(name)); s != "" {
		return s
	}
	return "app"
}

// slugify is what survives of slugify(s) (default options) once reduced
// to ASCII letters and digits: each UTF-16 unit of the NFC form replaced
// by its character-map entry. Units outside the map are kept; the caller
// drops what is not ASCII.
func slugify(s string) string {
	var b strings.Builder
	for _, r := range norm.NFC.String(s) {
		if r > 0xFFFF {
			continue // two surrogates, neither in the map nor ASCII
		}
		if m, ok := slugifyChar(r); ok {
			b.WriteString(m)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// asciiIdentifier drops everything but ASCII letters and digits.
func asciiIdentifier(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return r
		}
		return -1
	}, s)
}
