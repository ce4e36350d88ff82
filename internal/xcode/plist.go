package xcode

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The ASCII ("OpenStep") property list format of project.pbxproj: dicts
// `{ k = v; }`, arrays `( a, b, )`, quoted and unquoted strings, `<hex>`
// data, `/* */` and `//` comments. Every value records its byte span in
// the text so that edits replace exactly that span and leave the rest of
// the file (comments, order, layout) as Xcode wrote it.

// maxDepth bounds nesting: Xcode's projects nest five or six levels deep.
const maxDepth = 64

type kind int

const (
	kindString kind = iota
	kindData
	kindDict
	kindArray
)

// node is one parsed value. start and end delimit its text (end
// exclusive): the quotes of a quoted string, the braces of a dict.
type node struct {
	kind       kind
	start, end int
	str        string // a string's decoded value; a data's hex digits
	entries    []entry
	items      []*node
}

// entry is one `key = value;` of a dict; end is just past its `;`.
type entry struct {
	key        *node
	val        *node
	start, end int
}

// get returns a dict's value for key, nil when absent or not a dict.
func (n *node) get(key string) *node {
	if n == nil || n.kind != kindDict {
		return nil
	}
	for _, e := range n.entries {
		if e.key.str == key {
			return e.val
		}
	}
	return nil
}

// getString returns a dict's string value for key, "" when absent.
func (n *node) getString(key string) string {
	v := n.get(key)
	if v == nil || v.kind != kindString {
		return ""
	}
	return v.str
}

// strings returns an array's string items (non-strings skipped).
func (n *node) strings() []string {
	if n == nil || n.kind != kindArray {
		return nil
	}
	var out []string
	for _, it := range n.items {
		if it.kind == kindString {
			out = append(out, it.str)
		}
	}
	return out
}

// SyntaxError is a malformed project.pbxproj, located by line and column
// (1-based, columns in bytes).
type SyntaxError struct {
	Line, Column int
	Msg          string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("project.pbxproj:%d:%d: %s", e.Line, e.Column, e.Msg)
}

type parser struct {
	data []byte
	pos  int
}

func (p *parser) errorf(at int, format string, args ...any) error {
	line, col := 1, 1
	for i := 0; i < at && i < len(p.data); i++ {
		if p.data[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return &SyntaxError{Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

// parsePlist parses one value followed only by whitespace and comments.
func parsePlist(data []byte) (*node, error) {
	p := &parser{data: data}
	if err := p.skip(); err != nil {
		return nil, err
	}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if err := p.skip(); err != nil {
		return nil, err
	}
	if p.pos != len(p.data) {
		return nil, p.errorf(p.pos, "unexpected %q after the top-level value", p.data[p.pos])
	}
	return v, nil
}

// skip passes whitespace and comments.
func (p *parser) skip() error {
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			p.pos++
		case c == '/' && p.pos+1 < len(p.data) && p.data[p.pos+1] == '*':
			end := bytes.Index(p.data[p.pos+2:], []byte("*/"))
			if end < 0 {
				return p.errorf(p.pos, "unterminated /* comment")
			}
			p.pos += 2 + end + 2
		case c == '/' && p.pos+1 < len(p.data) && p.data[p.pos+1] == '/':
			for p.pos < len(p.data) && p.data[p.pos] != '\n' {
				p.pos++
			}
		default:
			return nil
		}
	}
	return nil
}

// isUnquoted reports whether c may appear in an unquoted string: what
// NeXTSTEP allowed plus the few characters Xcode writes unquoted.
func isUnquoted(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("_$+/:.-", c) >= 0
}

func (p *parser) value(depth int) (*node, error) {
	if depth > maxDepth {
		return nil, p.errorf(p.pos, "nested deeper than %d levels", maxDepth)
	}
	if p.pos >= len(p.data) {
		return nil, p.errorf(p.pos, "unexpected end of file, a value was expected")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.dict(depth)
	case c == '(':
		return p.array(depth)
	case c == '"' || c == '\'':
		return p.quoted()
	case c == '<':
		return p.hexData()
	case isUnquoted(c):
		start := p.pos
		for p.pos < len(p.data) && isUnquoted(p.data[p.pos]) {
			// "//" starts a comment even inside an unquoted run.
			if p.data[p.pos] == '/' && p.pos+1 < len(p.data) && (p.data[p.pos+1] == '/' || p.data[p.pos+1] == '*') {
				break
			}
			p.pos++
		}
		if p.pos == start {
			return nil, p.errorf(start, "unexpected %q, a value was expected", c)
		}
		return &node{kind: kindString, start: start, end: p.pos, str: string(p.data[start:p.pos])}, nil
	default:
		return nil, p.errorf(p.pos, "unexpected %q, a value was expected", c)
	}
}

func (p *parser) dict(depth int) (*node, error) {
	n := &node{kind: kindDict, start: p.pos}
	p.pos++ // {
	for {
		if err := p.skip(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.data) {
			return nil, p.errorf(n.start, "dictionary opened here is not closed")
		}
		if p.data[p.pos] == '}' {
			p.pos++
			n.end = p.pos
			return n, nil
		}
		start := p.pos
		key, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		if key.kind != kindString {
			return nil, p.errorf(key.start, "a dictionary key must be a string")
		}
		if err := p.skip(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.data) || p.data[p.pos] != '=' {
			return nil, p.errorf(p.pos, "expected '=' after the key %q", key.str)
		}
		p.pos++
		if err := p.skip(); err != nil {
			return nil, err
		}
		val, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		if err := p.skip(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.data) || p.data[p.pos] != ';' {
			return nil, p.errorf(p.pos, "expected ';' after the value of %q", key.str)
		}
		p.pos++
		n.entries = append(n.entries, entry{key: key, val: val, start: start, end: p.pos})
	}
}

func (p *parser) array(depth int) (*node, error) {
	n := &node{kind: kindArray, start: p.pos}
	p.pos++ // (
	for {
		if err := p.skip(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.data) {
			return nil, p.errorf(n.start, "array opened here is not closed")
		}
		if p.data[p.pos] == ')' {
			p.pos++
			n.end = p.pos
			return n, nil
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.items = append(n.items, v)
		if err := p.skip(); err != nil {
			return nil, err
		}
		if p.pos < len(p.data) && p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.data) && p.data[p.pos] == ')' {
			continue
		}
		return nil, p.errorf(p.pos, "expected ',' or ')' in the array")
	}
}

func (p *parser) hexData() (*node, error) {
	n := &node{kind: kindData, start: p.pos}
	p.pos++ // <
	var hex strings.Builder
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '>':
			p.pos++
			n.end = p.pos
			if hex.Len()%2 != 0 {
				return nil, p.errorf(n.start, "data has an odd number of hex digits")
			}
			n.str = hex.String()
			return n, nil
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'):
			hex.WriteByte(c)
		default:
			return nil, p.errorf(p.pos, "unexpected %q in <data>", c)
		}
		p.pos++
	}
	return nil, p.errorf(n.start, "data opened here is not closed")
}

func (p *parser) quoted() (*node, error) {
	quote := p.data[p.pos]
	n := &node{kind: kindString, start: p.pos}
	p.pos++
	var b strings.Builder
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == quote {
			p.pos++
			n.end = p.pos
			n.str = b.String()
			return n, nil
		}
		if c != '\\' {
			b.WriteByte(c)
			p.pos++
			continue
		}
		at := p.pos
		p.pos++
		if p.pos >= len(p.data) {
			break
		}
		e := p.data[p.pos]
		p.pos++
		switch e {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case 'U', 'u':
			end := p.pos
			for end < len(p.data) && end-p.pos < 4 && isHex(p.data[end]) {
				end++
			}
			if end-p.pos != 4 {
				return nil, p.errorf(at, "\\U must be followed by four hex digits")
			}
			v, _ := strconv.ParseUint(string(p.data[p.pos:end]), 16, 16)
			p.pos = end
			r := rune(v)
			// A surrogate pair written as two \U escapes.
			if utf16.IsSurrogate(r) && p.pos+6 <= len(p.data) && p.data[p.pos] == '\\' && (p.data[p.pos+1] == 'U' || p.data[p.pos+1] == 'u') && allHex(p.data[p.pos+2:p.pos+6]) {
				lo, _ := strconv.ParseUint(string(p.data[p.pos+2:p.pos+6]), 16, 16)
				if d := utf16.DecodeRune(r, rune(lo)); d != utf8.RuneError {
					r = d
					p.pos += 6
				}
			}
			b.WriteRune(r)
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := int(e - '0')
			for i := 0; i < 2 && p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '7'; i++ {
				v = v*8 + int(p.data[p.pos]-'0')
				p.pos++
			}
			if v > 0xff {
				return nil, p.errorf(at, "octal escape out of range")
			}
			b.WriteByte(byte(v))
		default:
			// \" \' \\ and any other character stand for themselves.
			b.WriteByte(e)
		}
	}
	return nil, p.errorf(n.start, "string opened here is not closed")
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func allHex(b []byte) bool {
	for _, c := range b {
		if !isHex(c) {
			return false
		}
	}
	return true
}

// quote writes s as Xcode does: bare when it is made only of characters
// Xcode leaves unquoted, else in double quotes with escapes.
func quote(s string) string {
	bare := s != ""
	for i := 0; i < len(s) && bare; i++ {
		c := s[i]
		bare = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '/'
	}
	if bare && !strings.Contains(s, "//") && !strings.Contains(s, "/*") {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
