package vmbootstrap

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// ProvisioningProfile is what the build needs from a .mobileprovision: a
// CMS-signed XML property list, read here without verifying the signature
// (codesign and xcodebuild do that).
type ProvisioningProfile struct {
	UUID     string // from the plist; a sha256-based name when absent or unusable
	Name     string
	TeamID   string
	BundleID string // application-identifier without the team prefix ("com.example.app", or a wildcard)
	Method   string // export method: app-store, ad-hoc, enterprise or development
	Raw      []byte
}

// ParseProvisioningProfile reads the fields of a profile. It never fails:
// an unreadable profile still gets a stable file name (its sha256) so it
// can be installed for the build to use.
func ParseProvisioningProfile(raw []byte) ProvisioningProfile {
	p := ProvisioningProfile{Raw: raw, Method: "app-store"}
	xmlText := embeddedPlist(raw)
	if dict, err := parsePlist(xmlText); err == nil {
		if m, ok := dict.(map[string]any); ok {
			p.UUID, _ = m["UUID"].(string)
			p.Name, _ = m["Name"].(string)
			if teams, ok := m["TeamIdentifier"].([]any); ok && len(teams) > 0 {
				p.TeamID, _ = teams[0].(string)
			}
			ent, _ := m["Entitlements"].(map[string]any)
			appID, _ := ent["application-identifier"].(string)
			prefix := p.TeamID
			if prefixes, ok := m["ApplicationIdentifierPrefix"].([]any); ok && len(prefixes) > 0 {
				prefix, _ = prefixes[0].(string)
			}
			p.BundleID = strings.TrimPrefix(appID, prefix+".")
			_, hasDevices := m["ProvisionedDevices"]
			switch all, _ := m["ProvisionsAllDevices"].(bool); {
			case ent["get-task-allow"] == true:
				p.Method = "development"
			case all:
				p.Method = "enterprise"
			case hasDevices:
				p.Method = "ad-hoc"
			}
		}
	} else {
		p.UUID = uuidByText(xmlText)
	}
	if !validUUID(p.UUID) {
		sum := sha256.Sum256(raw)
		p.UUID = "sha256-" + hex.EncodeToString(sum[:16])
	}
	return p
}

// embeddedPlist finds the XML plist inside the CMS envelope.
func embeddedPlist(raw []byte) []byte {
	start := bytes.Index(raw, []byte("<?xml"))
	if start < 0 {
		start = bytes.Index(raw, []byte("<plist"))
	}
	end := bytes.LastIndex(raw, []byte("</plist>"))
	if start < 0 || end < start {
		return nil
	}
	return raw[start : end+len("</plist>")]
}

// uuidByText is the fallback for a plist the parser refused: the text
// after <key>UUID</key>.
func uuidByText(text []byte) string {
	_, after, ok := bytes.Cut(text, []byte("<key>UUID</key>"))
	if !ok {
		return ""
	}
	after = bytes.TrimLeft(after, " \t\r\n")
	rest, ok := bytes.CutPrefix(after, []byte("<string>"))
	if !ok {
		return ""
	}
	v, _, ok := bytes.Cut(rest, []byte("</string>"))
	if !ok {
		return ""
	}
	return strings.TrimSpace(string(v))
}

// validUUID accepts what may safely become a file name: hex digits and
// dashes (Apple's UUIDs), nothing that could form a path.
func validUUID(s string) bool {
	if len(s) < 8 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F' || r == '-') {
			return false
		}
	}
	return true
}

// parsePlist decodes an XML property list into map[string]any, []any,
// string, int64-as-string, bool and []byte values.
func parsePlist(data []byte) (any, error) {
	if len(data) == 0 {
		return nil, errors.New("no property list")
	}
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = false
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, fmt.Errorf("property list: %w", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if se.Name.Local == "plist" {
				continue
			}
			return plistValue(d, se, 0)
		}
	}
}

func plistValue(d *xml.Decoder, se xml.StartElement, depth int) (any, error) {
	if depth > 64 {
		return nil, errors.New("property list nested too deeply")
	}
	switch se.Name.Local {
	case "dict":
		m := map[string]any{}
		var key *string
		for {
			tok, err := d.Token()
			if err != nil {
				return nil, err
			}
			switch t := tok.(type) {
			case xml.StartElement:
				if t.Name.Local == "key" {
					k, err := plistText(d)
					if err != nil {
						return nil, err
					}
					key = &k
					continue
				}
				v, err := plistValue(d, t, depth+1)
				if err != nil {
					return nil, err
				}
				if key != nil {
					m[*key] = v
					key = nil
				}
			case xml.EndElement:
				return m, nil
			}
		}
	case "array":
		var a []any
		for {
			tok, err := d.Token()
			if err != nil {
				return nil, err
			}
			switch t := tok.(type) {
			case xml.StartElement:
				v, err := plistValue(d, t, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			case xml.EndElement:
				return a, nil
			}
		}
	case "true", "false":
		if err := d.Skip(); err != nil {
			return nil, err
		}
		return se.Name.Local == "true", nil
	case "data":
		s, err := plistText(d)
		if err != nil {
			return nil, err
		}
		b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), ""))
		if err != nil {
			return s, nil // keep going: the fields this program needs are elsewhere
		}
		return b, nil
	default: // string, integer, real, date
		return plistText(d)
	}
}

func plistText(d *xml.Decoder) (string, error) {
	var b strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return "", io.ErrUnexpectedEOF
		}
		if err != nil {
			return "", err
		}
		switch t := tok.(type) {
		case xml.CharData:
			b.Write(t)
		case xml.EndElement:
			return b.String(), nil
		case xml.StartElement:
			return "", fmt.Errorf("unexpected <%s> inside a text value", t.Name.Local)
		}
	}
}

// exportOptionsPlist renders the ExportOptions.plist for manual signing
// with the given identity (a SHA-1 or a certificate name) and profiles.
func exportOptionsPlist(method, teamID, identity string, profiles map[string]string) []byte {
	var b bytes.Buffer
	esc := func(s string) string {
		var e bytes.Buffer
		xml.EscapeText(&e, []byte(s)) //nolint:errcheck // bytes.Buffer does not fail
		return e.String()
	}
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
`)
	kv := func(k, v string) { fmt.Fprintf(&b, "\t<key>%s</key>\n\t<string>%s</string>\n", esc(k), esc(v)) }
	kv("method", method)
	kv("signingStyle", "manual")
	if teamID != "" {
		kv("teamID", teamID)
	}
	if identity != "" {
		kv("signingCertificate", identity)
	}
	b.WriteString("\t<key>provisioningProfiles</key>\n\t<dict>\n")
	for _, bundle := range slices.Sorted(maps.Keys(profiles)) {
		fmt.Fprintf(&b, "\t\t<key>%s</key>\n\t\t<string>%s</string>\n", esc(bundle), esc(profiles[bundle]))
	}
	b.WriteString("\t</dict>\n</dict>\n</plist>\n")
	return b.Bytes()
}
