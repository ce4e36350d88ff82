package cli

import (
	"strings"
	"unicode/utf8"
)

// plainText makes text a build wrote (its log, its error message and log
// tail) safe to print on a terminal: a build's code can print anything,
// and escape sequences could clear the screen, rewrite earlier lines (a
// faked "Saved app.apk, SHA-256 verified"), set the window title, write the
// clipboard (OSC 52) or make a link say something else (OSC 8).
//
// It removes ESC sequences (CSI, OSC, DCS/SOS/PM/APC strings and two-byte
// escapes, colours included), the C1 controls (U+0080–U+009F, which some
// terminals take as CSI or OSC), DEL and every C0 control except \n and \t
// (so \r cannot overwrite a line), and replaces invalid UTF-8 with U+FFFD.
// Text without any of these is returned as it is.
func plainText(s string) string {
	if isPlain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == 0x1b:
			i = skipEscape(s, i+1)
			continue
		case c1Intro[r] != 0: // the 8-bit forms of CSI, OSC, DCS, SOS, PM, APC
			i = skipSequence(s, i+size, c1Intro[r])
			continue
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case isControl(r):
			// dropped
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func isPlain(s string) bool {
	for _, r := range s { // invalid UTF-8 arrives as utf8.RuneError
		if r == 0x1b || r == utf8.RuneError || isControl(r) {
			return false
		}
	}
	return true
}

// isControl: C0 but \n and \t, DEL, C1.
func isControl(r rune) bool {
	return r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r <= 0x9f
}

// c1Intro maps the C1 controls that open a sequence to the byte that
// follows ESC in their 7-bit form.
var c1Intro = map[rune]byte{0x9b: '[', 0x9d: ']', 0x90: 'P', 0x98: 'X', 0x9e: '^', 0x9f: '_'}

// skipEscape returns the index just past the escape sequence whose ESC
// ended at i. An unterminated sequence runs to the end of s (the log line):
// better to lose its text than to print half a sequence.
func skipEscape(s string, i int) int {
	if i >= len(s) {
		return i
	}
	return skipSequence(s, i+1, s[i])
}

// skipSequence returns the index just past the sequence introduced by ESC c
// (or its C1 form), whose body starts at i.
func skipSequence(s string, i int, c byte) int {
	switch {
	case c == '[': // CSI: parameters and intermediates 0x20–0x3F, final 0x40–0x7E
		for ; i < len(s); i++ {
			if s[i] >= 0x40 && s[i] <= 0x7e {
				return i + 1
			}
			if s[i] < 0x20 || s[i] > 0x7e {
				return i // malformed: stop at the odd byte, which is judged on its own
			}
		}
		return i
	case c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_':
		// OSC, DCS, SOS, PM, APC: a string ended by BEL (OSC), ST (ESC \)
		// or its C1 form U+009C.
		for ; i < len(s); i++ {
			if s[i] == 0x07 {
				return i + 1
			}
			if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
			if strings.HasPrefix(s[i:], "\u009c") {
				return i + len("\u009c")
			}
		}
		return i
	case c >= 0x20 && c <= 0x2f: // nF: intermediates, then a final byte
		for ; i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f; i++ {
		}
		if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7e {
			i++
		}
		return i
	case c >= 0x30 && c <= 0x7e: // two-byte escapes: ESC 7, ESC c, ESC =, …
		return i
	default: // ESC and a control or non-ASCII byte: drop the ESC alone
		return i - 1
	}
}
