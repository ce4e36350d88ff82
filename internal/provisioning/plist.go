package provisioning

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// maxPlistDepth bounds nesting: a profile's plist is three levels deep.
const maxPlistDepth = 64

// ParsePlist decodes an XML property list: dict → map[string]any, array →
// []any, string → string, integer → int64, real → float64, true/false →
// bool, date → time.Time, data → []byte. Anything else, a value without
// its key or a malformed value is an error. It reads what comes from a
// developer or a build (profiles, Expo.plist), so nesting is bounded:
// howett.net/plist, which the module uses for plists it writes or the
// system's own, recurses without a limit.
func ParsePlist(data []byte) (any, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("property list: empty")
	}
	d := xml.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return nil, errors.New("property list: no value")
		}
		if err != nil {
			return nil, fmt.Errorf("property list: %w", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if se.Name.Local == "plist" {
			continue
		}
		v, err := plistValue(d, se, 0)
		if err != nil {
			return nil, fmt.Errorf("property list: %w", err)
		}
		return v, nil
	}
}

func plistValue(d *xml.Decoder, se xml.StartElement, depth int) (any, error) {
	if depth > maxPlistDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxPlistDepth)
	}
	switch se.Name.Local {
	case "dict":
		m := map[string]any{}
		var key string
		haveKey := false
		for {
			tok, err := d.Token()
			if err != nil {
				return nil, unexpectedEOF(err)
			}
			switch t := tok.(type) {
			case xml.StartElement:
				if t.Name.Local == "key" {
					if haveKey {
						return nil, fmt.Errorf("<key>%s</key> has no value", key)
					}
					if key, err = plistText(d); err != nil {
						return nil, err
					}
					haveKey = true
					continue
				}
				if !haveKey {
					return nil, fmt.Errorf("<%s> in a <dict> without a <key>", t.Name.Local)
				}
				v, err := plistValue(d, t, depth+1)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", key, err)
				}
				m[key] = v
				haveKey = false
			case xml.EndElement:
				if haveKey {
					return nil, fmt.Errorf("<key>%s</key> has no value", key)
				}
				return m, nil
			}
		}
	case "array":
		a := []any{}
		for {
			tok, err := d.Token()
			if err != nil {
				return nil, unexpectedEOF(err)
			}
			switch t := tok.(type) {
			case xml.StartElement:
				v, err := plistValue(d, t, depth+1)
				if err != nil {
					return nil, fmt.Errorf("[%d]: %w", len(a), err)
				}
				a = append(a, v)
			case xml.EndElement:
				return a, nil
			}
		}
	case "true", "false":
		if err := d.Skip(); err != nil {
			return nil, unexpectedEOF(err)
		}
		return se.Name.Local == "true", nil
	}
	s, err := plistText(d)
	if err != nil {
		return nil, err
	}
	switch se.Name.Local {
	case "string":
		return s, nil
	case "integer":
		s = strings.TrimSpace(s)
		if v, err := strconv.ParseInt(s, 0, 64); err == nil {
			return v, nil
		}
		return nil, fmt.Errorf("<integer>%s</integer> is not an integer", s)
	case "real":
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return nil, fmt.Errorf("<real>%s</real> is not a number", s)
		}
		return v, nil
	case "date":
		v, err := time.Parse(time.RFC3339, strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("<date>%s</date> is not an ISO 8601 date", s)
		}
		return v, nil
	case "data":
		v, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), ""))
		if err != nil {
			return nil, fmt.Errorf("<data> is not base64: %w", err)
		}
		return v, nil
	}
	return nil, fmt.Errorf("unknown element <%s>", se.Name.Local)
}

// plistText reads the text of an element whose start was just read.
func plistText(d *xml.Decoder) (string, error) {
	var b strings.Builder
	for {
		tok, err := d.Token()
		if err != nil {
			return "", unexpectedEOF(err)
		}
		switch t := tok.(type) {
		case xml.CharData:
			b.Write(t)
		case xml.EndElement:
			return b.String(), nil
		case xml.StartElement:
			return "", fmt.Errorf("<%s> inside a text value", t.Name.Local)
		}
	}
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
