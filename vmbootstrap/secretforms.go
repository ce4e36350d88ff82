package vmbootstrap

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"slices"
	"strings"
	"unicode/utf16"

	"github.com/freeagent-build/freeagent/api"
)

// secretForms returns a secret as a build's tools may print it: itself;
// JSON-escaped the ways JSON encoders differ (HTML characters, non-ASCII,
// "/" escaped or not, hex digits of either case); hex; percent-encoded as
// form values, path segments, URI components and RFC 3986 unreserved
// escapes, with upper- or lower-case hex digits; base64 in all four
// variants (standard and URL alphabets, padded or not). A secret of at
// least api.MinSecretLength bytes also gets the part of its base64 that
// any longer stream containing it encodes identically (an
// "Authorization: Basic" header, `echo "$SECRET" | base64`), for each of
// the three alignments it can have there.
func secretForms(secret string) []string {
	forms := []string{secret, hex.EncodeToString([]byte(secret)), strings.ToUpper(hex.EncodeToString([]byte(secret)))}
	for style := range jsonStyles {
		forms = append(forms, jsonEscape(secret, style))
	}
	for _, p := range []string{
		url.QueryEscape(secret),
		url.PathEscape(secret),
		percentEscape(secret, "-_.~"),      // RFC 3986 unreserved (Python's quote(s, safe=""))
		percentEscape(secret, "-_.!~*'()"), // JavaScript's encodeURIComponent
	} {
		forms = append(forms, p, lowerPercentEscapes(p))
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		forms = append(forms, enc.EncodeToString([]byte(secret)))
	}
	if len(secret) >= api.MinSecretLength {
		for offset := range 3 {
			forms = append(forms, embeddedBase64(secret, offset, base64.RawStdEncoding), embeddedBase64(secret, offset, base64.RawURLEncoding))
		}
	}
	slices.Sort(forms)
	return slices.Compact(forms)
}

// embeddedBase64 is the base64 of secret where it starts offset bytes
// into a 3-byte group of a longer stream: the characters that encode
// secret's bits only (each character is 6 bits; those that mix in a
// neighbour's bits are left out).
func embeddedBase64(secret string, offset int, enc *base64.Encoding) string {
	buf := make([]byte, offset+len(secret))
	copy(buf[offset:], secret)
	encoded := enc.EncodeToString(buf)
	first := (8*offset + 5) / 6            // the first character starting inside the secret
	last := 8 * (offset + len(secret)) / 6 // the first character ending past it
	return encoded[first:last]
}

// jsonStyle is one way of escaping a JSON string beyond what JSON requires.
type jsonStyle uint8

const (
	jsonEscapeHTML  jsonStyle = 1 << iota // <, >, & as \u003c… (Go's encoding/json)
	jsonEscapeASCII                       // non-ASCII as \uXXXX (Python's json.dumps, PHP)
	jsonEscapeSlash                       // / as \/ (PHP)
	jsonUpperHex                          // \u001F, not \u001f (Jackson)
)

// jsonStyles ranges over every combination of the styles.
func jsonStyles(yield func(jsonStyle) bool) {
	for s := range jsonUpperHex << 1 {
		if !yield(s) {
			return
		}
	}
}

// jsonEscape is s inside a JSON string as an encoder of style writes it.
func jsonEscape(s string, style jsonStyle) string {
	digits := "0123456789abcdef"
	if style&jsonUpperHex != 0 {
		digits = "0123456789ABCDEF"
	}
	var b strings.Builder
	u := func(r rune) {
		b.WriteString(`\u`)
		for shift := 12; shift >= 0; shift -= 4 {
			b.WriteByte(digits[r>>shift&0xf])
		}
	}
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20:
			u(r)
		case r == '/' && style&jsonEscapeSlash != 0:
			b.WriteString(`\/`)
		case (r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029') && style&jsonEscapeHTML != 0:
			u(r)
		case r >= 0x80 && style&jsonEscapeASCII != 0:
			if r > 0xffff {
				hi, lo := utf16.EncodeRune(r)
				u(hi)
				u(lo)
			} else {
				u(r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// percentEscape percent-encodes every byte of s but ASCII letters, digits
// and those in keep, with upper-case hex digits.
func percentEscape(s, keep string) string {
	const digits = "0123456789ABCDEF"
	var b strings.Builder
	for i := range len(s) {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(keep, c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(digits[c>>4])
		b.WriteByte(digits[c&0xf])
	}
	return b.String()
}

// lowerPercentEscapes writes the hex digits of p's escapes in lower case.
func lowerPercentEscapes(p string) string {
	b := []byte(p)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = lowerHex(b[i+1]), lowerHex(b[i+2])
			i += 2
		}
	}
	return string(b)
}

func lowerHex(c byte) byte {
	if 'A' <= c && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}
