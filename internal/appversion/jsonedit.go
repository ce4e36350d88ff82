package appversion

import (
	"encoding/json"
	"fmt"
	"strings"
)

// setJSON returns data (one JSON object) with the member at path set to
// value, replacing the old value's bytes or inserting the member (and the
// objects on its way) after the object's last member; every other byte is
// kept, so a developer's formatting survives a version bump.
func setJSON(data []byte, path []string, value json.RawMessage) ([]byte, error) {
	s := &scanner{b: data}
	s.space()
	return s.set(path, value)
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) && strings.IndexByte(" \t\r\n", s.b[s.i]) >= 0 {
		s.i++
	}
}

func (s *scanner) fail(what string) error {
	return fmt.Errorf("JSON: %s at offset %d", what, s.i)
}

// set edits the object starting at s.i.
func (s *scanner) set(path []string, value json.RawMessage) ([]byte, error) {
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return nil, fmt.Errorf("%s is not an object", strings.Join(path, "."))
	}
	open := s.i
	s.i++
	s.space()
	indent, lastEnd := "", -1
	for s.i < len(s.b) && s.b[s.i] != '}' {
		if lastEnd >= 0 {
			if s.b[s.i] != ',' {
				return nil, s.fail("expected , or }")
			}
			s.i++
			s.space()
		} else {
			indent = string(s.b[open+1 : s.i])
		}
		keyStart := s.i
		if err := s.skipValue(); err != nil {
			return nil, err
		}
		var key string
		if err := json.Unmarshal(s.b[keyStart:s.i], &key); err != nil {
			return nil, s.fail("expected a member name")
		}
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return nil, s.fail("expected :")
		}
		s.i++
		s.space()
		valueStart := s.i
		if key == path[0] {
			if len(path) == 1 {
				if err := s.skipValue(); err != nil {
					return nil, err
				}
				return splice(s.b, valueStart, s.i, string(value)), nil
			}
			return s.set(path[1:], value)
		}
		if err := s.skipValue(); err != nil {
			return nil, err
		}
		lastEnd = s.i
		s.space()
	}
	if s.i >= len(s.b) {
		return nil, s.fail("unterminated object")
	}
	member := nested(path, value)
	if lastEnd < 0 {
		return splice(s.b, open+1, open+1, member), nil
	}
	if indent == "" {
		indent = " "
	}
	return splice(s.b, lastEnd, lastEnd, ","+indent+member), nil
}

// nested is the member path[0] holding value under the rest of path.
func nested(path []string, value json.RawMessage) string {
	v := string(value)
	for i := len(path) - 1; i > 0; i-- {
		k, _ := json.Marshal(path[i])
		v = "{" + string(k) + ": " + v + "}"
	}
	k, _ := json.Marshal(path[0])
	return string(k) + ": " + v
}

func splice(b []byte, start, end int, text string) []byte {
	out := make([]byte, 0, len(b)+len(text))
	out = append(out, b[:start]...)
	out = append(out, text...)
	return append(out, b[end:]...)
}

// skipValue moves past the JSON value at s.i.
func (s *scanner) skipValue() error {
	if s.i >= len(s.b) {
		return s.fail("unexpected end")
	}
	switch c := s.b[s.i]; {
	case c == '"':
		s.i++
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '\\':
				s.i += 2
				continue
			case '"':
				s.i++
				return nil
			}
			s.i++
		}
		return s.fail("unterminated string")
	case c == '{' || c == '[':
		close := byte('}')
		if c == '[' {
			close = ']'
		}
		s.i++
		s.space()
		for first := true; ; first = false {
			if s.i < len(s.b) && s.b[s.i] == close {
				s.i++
				return nil
			}
			if !first {
				if s.i >= len(s.b) || s.b[s.i] != ',' {
					return s.fail("expected , or " + string(close))
				}
				s.i++
				s.space()
			}
			if err := s.skipValue(); err != nil {
				return err
			}
			s.space()
			if c == '{' {
				if s.i >= len(s.b) || s.b[s.i] != ':' {
					return s.fail("expected :")
				}
				s.i++
				s.space()
				if err := s.skipValue(); err != nil {
					return err
				}
				s.space()
			}
		}
	default:
		start := s.i
		for s.i < len(s.b) && strings.IndexByte(",}] \t\r\n", s.b[s.i]) < 0 {
			s.i++
		}
		if start == s.i {
			return s.fail("expected a value")
		}
		return nil
	}
}
