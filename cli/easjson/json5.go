package easjson

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Limits on untrusted input. A real eas.json is a few kilobytes and four
// or five levels deep.
const (
	maxFileSize = 1 << 20
	maxDepth    = 64
)

type kind int

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func (k kind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}[k]
}

// node is a parsed JSON5 value. Objects keep their keys in the order they
// first appeared; a repeated key replaces the value in place, as
// assigning to a JavaScript object does.
type node struct {
	kind    kind
	boolean bool
	number  float64
	str     string
	items   []*node
	keys    []string
	fields  map[string]*node
}

func (n *node) get(key string) (*node, bool) {
	if n.kind != kindObject {
		return nil, false
	}
	v, ok := n.fields[key]
	return v, ok
}

// SyntaxError is eas.json that neither JSON nor JSON5 reads. Line and
// Column are 1-based (Column counts characters, not bytes).
type SyntaxError struct {
	Line, Column int
	Msg          string
	// Frame is the offending line with a caret under Column.
	Frame string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("eas.json:%d:%d: %s\n%s", e.Line, e.Column, e.Msg, e.Frame)
}

// parser reads eas.json as @expo/eas-json does: JSON.parse, else the
// golden-fleece JSON5 reader. Every document JSON.parse accepts, that
// reader accepts with the same value, so one parser with golden-fleece's
// grammar (and its leniencies: a stray "/" is skipped like whitespace, a
// string may hold a raw carriage return, any escaped character stands for
// itself) answers both.
type parser struct {
	src   string
	i     int
	depth int
}

// numberRe is golden-fleece's number grammar, anchored (it only reads a
// number that starts at the current position). The "|" inside the
// exponent's classes is golden-fleece's: "1|5" reads as a number (NaN).
var numberRe = regexp.MustCompile(`^(?:NaN|[-+]?(?:Infinity|0[xX][a-fA-F0-9]+|0[bB][01]+|0[oO][0-7]+|(?:(?:[1-9][0-9]*|0)?\.[0-9]+|(?:[1-9][0-9]*|0)\.[0-9]*|(?:[1-9][0-9]*|0))(?:[E|e][+|-]?[0-9]+)?))`)

var identRe = regexp.MustCompile(`^[a-zA-Z_$][a-zA-Z0-9_$]*`)

func parseJSON5(src string) (*node, error) {
	p := &parser{src: src}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	if err := p.space(); err != nil {
		return nil, err
	}
	if p.i < len(p.src) {
		return nil, p.fail(p.i, "unexpected %s after the end of the document", p.describe(p.i))
	}
	return v, nil
}

// fail describes a syntax error at byte offset at.
func (p *parser) fail(at int, format string, args ...any) *SyntaxError {
	line, col, text := position(p.src, at)
	caret := strings.Repeat(" ", col-1) + "^"
	gutter := strconv.Itoa(line)
	frame := fmt.Sprintf("%s | %s\n%s | %s", gutter, text, strings.Repeat(" ", len(gutter)), caret)
	return &SyntaxError{Line: line, Column: col, Msg: fmt.Sprintf(format, args...), Frame: frame}
}

// position turns a byte offset into a 1-based line and character column
// and returns that line's text (tabs kept, so the caret lines up).
func position(src string, at int) (line, col int, text string) {
	at = min(at, len(src))
	start := strings.LastIndexByte(src[:at], '\n') + 1
	end := strings.IndexByte(src[at:], '\n')
	if end < 0 {
		end = len(src)
	} else {
		end += at
	}
	text = strings.TrimRight(src[start:end], "\r")
	line = strings.Count(src[:at], "\n") + 1
	col = utf8.RuneCountInString(src[start:at]) + 1
	return line, col, text
}

func (p *parser) describe(at int) string {
	if at >= len(p.src) {
		return "end of file"
	}
	r, _ := utf8.DecodeRuneInString(p.src[at:])
	return strconv.Quote(string(r))
}

// isJSSpace is JavaScript's \s (also what String.prototype.trim removes).
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// space skips whitespace and comments.
func (p *parser) space() error {
	for {
		for p.i < len(p.src) {
			r, size := utf8.DecodeRuneInString(p.src[p.i:])
			if !isJSSpace(r) {
				break
			}
			p.i += size
		}
		if !strings.HasPrefix(p.src[p.i:], "/") {
			return nil
		}
		start := p.i
		p.i++
		switch {
		case strings.HasPrefix(p.src[p.i:], "/"):
			p.i++
			if p.i >= len(p.src) {
				return p.fail(start, "a // comment at the very end of the file: add a newline or remove it")
			}
			if end := strings.IndexAny(p.src[p.i:], "\r\n"); end >= 0 {
				p.i += end
			} else {
				p.i = len(p.src)
			}
		case strings.HasPrefix(p.src[p.i:], "*"):
			p.i++
			end := strings.Index(p.src[p.i:], "*/")
			if end < 0 {
				return p.fail(start, "unterminated /* comment: close it with */")
			}
			p.i += end + 2
		}
		// Otherwise a lone "/" is skipped, as golden-fleece does.
	}
}

func (p *parser) value() (*node, error) {
	if err := p.space(); err != nil {
		return nil, err
	}
	if p.i >= len(p.src) {
		return nil, p.fail(p.i, "unexpected end of file: a value is missing")
	}
	switch p.src[p.i] {
	case '[':
		return p.array()
	case '{':
		return p.object()
	}
	v, err := p.literal()
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, p.fail(p.i, "unexpected %s: expected a value (object, array, string, number, true, false or null)", p.describe(p.i))
	}
	return v, nil
}

func (p *parser) array() (*node, error) {
	if p.depth++; p.depth > maxDepth {
		return nil, p.fail(p.i, "nested more than %d levels deep", maxDepth)
	}
	defer func() { p.depth-- }()
	p.i++ // [
	n := &node{kind: kindArray}
	if err := p.space(); err != nil {
		return nil, err
	}
	for !strings.HasPrefix(p.src[p.i:], "]") {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		n.items = append(n.items, v)
		if more, err := p.comma(); err != nil || !more {
			if err != nil {
				return nil, err
			}
			break
		}
	}
	if !strings.HasPrefix(p.src[p.i:], "]") {
		return nil, p.fail(p.i, "unexpected %s: expected \",\" or \"]\" in an array", p.describe(p.i))
	}
	p.i++
	return n, nil
}

// comma skips the space after a member and the comma that may follow it,
// and the space after that. It reports whether there was a comma.
func (p *parser) comma() (bool, error) {
	if err := p.space(); err != nil {
		return false, err
	}
	if !strings.HasPrefix(p.src[p.i:], ",") {
		return false, nil
	}
	p.i++
	return true, p.space()
}

func (p *parser) object() (*node, error) {
	if p.depth++; p.depth > maxDepth {
		return nil, p.fail(p.i, "nested more than %d levels deep", maxDepth)
	}
	defer func() { p.depth-- }()
	p.i++ // {
	n := &node{kind: kindObject, fields: map[string]*node{}}
	if err := p.space(); err != nil {
		return nil, err
	}
	for !strings.HasPrefix(p.src[p.i:], "}") {
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		if _, dup := n.fields[key]; !dup {
			n.keys = append(n.keys, key)
		}
		n.fields[key] = v
		if more, err := p.comma(); err != nil || !more {
			if err != nil {
				return nil, err
			}
			break
		}
	}
	if !strings.HasPrefix(p.src[p.i:], "}") {
		return nil, p.fail(p.i, "unexpected %s: expected \",\" or \"}\" in an object", p.describe(p.i))
	}
	p.i++
	return n, nil
}

func (p *parser) key() (string, error) {
	key, ok, err := p.string()
	if err != nil {
		return "", err
	}
	if !ok {
		key = identRe.FindString(p.src[p.i:])
		if key == "" {
			return "", p.fail(p.i, "unexpected %s: expected a key (a quoted string, or a name of letters, digits, _ and $)", p.describe(p.i))
		}
		p.i += len(key)
	}
	if err := p.space(); err != nil {
		return "", err
	}
	if !strings.HasPrefix(p.src[p.i:], ":") {
		return "", p.fail(p.i, "unexpected %s: expected \":\" after the key %q", p.describe(p.i), key)
	}
	p.i++
	return key, nil
}

// literal reads true, false, a number, a string or null, in
// golden-fleece's order; nil when none starts here.
func (p *parser) literal() (*node, error) {
	rest := p.src[p.i:]
	switch {
	case strings.HasPrefix(rest, "true"):
		p.i += 4
		return &node{kind: kindBool, boolean: true}, nil
	case strings.HasPrefix(rest, "false"):
		p.i += 5
		return &node{kind: kindBool}, nil
	}
	if m := numberRe.FindString(rest); m != "" {
		p.i += len(m)
		return &node{kind: kindNumber, number: numberValue(m)}, nil
	}
	if s, ok, err := p.string(); err != nil || ok {
		return &node{kind: kindString, str: s}, err
	}
	if strings.HasPrefix(rest, "null") {
		p.i += 4
		return &node{kind: kindNull}, nil
	}
	return nil, nil
}

// numberValue is the value JavaScript gives a golden-fleece number.
func numberValue(raw string) float64 {
	sign := 1.0
	switch raw[0] {
	case '-':
		sign, raw = -1, raw[1:]
	case '+':
		raw = raw[1:]
	}
	var v float64
	switch {
	case raw == "NaN":
		return math.NaN()
	case raw == "Infinity":
		v = math.Inf(1)
	case len(raw) > 2 && raw[0] == '0' && strings.ContainsRune("xXbBoO", rune(raw[1])):
		base := map[byte]int{'x': 16, 'b': 2, 'o': 8}[raw[1]|0x20]
		u, err := strconv.ParseUint(raw[2:], base, 64)
		if err != nil {
			v = math.Inf(1) // beyond 2^64: JavaScript's value is huge, never valid here
		} else {
			v = float64(u)
		}
	default:
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil && !strings.Contains(err.Error(), "range") {
			return math.NaN() // "1|5": JavaScript's Number() gives NaN
		}
		v = f
	}
	return sign * v
}

// string reads a single- or double-quoted string when one starts here.
func (p *parser) string() (string, bool, error) {
	if p.i >= len(p.src) || (p.src[p.i] != '"' && p.src[p.i] != '\'') {
		return "", false, nil
	}
	quote := rune(p.src[p.i])
	start := p.i
	p.i++
	var units []uint16
	for p.i < len(p.src) {
		r, size := utf8.DecodeRuneInString(p.src[p.i:])
		at := p.i
		p.i += size
		switch r {
		case '\\':
			if p.i >= len(p.src) {
				return "", false, p.fail(start, "unterminated string: close it with %c", quote)
			}
			e, esize := utf8.DecodeRuneInString(p.src[p.i:])
			p.i += esize
			switch e {
			case '\n':
			case '\r':
				if strings.HasPrefix(p.src[p.i:], "\n") {
					p.i++
				}
			case 'x', 'u':
				width := 2
				if e == 'u' {
					width = 4
				}
				hex := p.src[p.i:min(p.i+width, len(p.src))]
				code, err := strconv.ParseUint(hex, 16, 16)
				if len(hex) != width || err != nil {
					return "", false, p.fail(p.i, "invalid \\%c escape: it takes %d hexadecimal digits", e, width)
				}
				p.i += width
				units = append(units, uint16(code))
			default:
				if s, ok := escapes[e]; ok {
					e = s
				}
				units = utf16.AppendRune(units, e)
			}
		case quote:
			return string(utf16.Decode(units)), true, nil
		case '\n':
			return "", false, p.fail(at, "a line break inside a string: write \\n, or end the line with \\ to continue the string")
		default:
			units = utf16.AppendRune(units, r)
		}
	}
	return "", false, p.fail(start, "unterminated string: close it with %c", quote)
}

var escapes = map[rune]rune{'b': '\b', 'n': '\n', 'f': '\f', 'r': '\r', 't': '\t', 'v': '\v', '0': 0}
