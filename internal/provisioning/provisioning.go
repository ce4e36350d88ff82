// Package provisioning reads Apple provisioning profiles (.mobileprovision)
// the way EAS Build does, for the CLI (checking credentials.json before
// anything is uploaded) and for the VM (installing the profiles and writing
// ExportOptions.plist) alike, so both sides agree on a profile's type,
// team and application identifier.
//
// A profile is a CMS SignedData envelope (BER, as Apple writes it, or DER)
// around an XML property list. The signature is not verified here: the
// Mac's codesign and xcodebuild do that.
package provisioning

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/plist"
)

// MaxBytes bounds a profile. Real ones are 10–30 KB; one listing the
// maximum number of devices stays under 1 MB.
const MaxBytes = 4 << 20

// Profile is what a provisioning profile says.
type Profile struct {
	UUID     string
	Name     string
	TeamID   string // TeamIdentifier[0]
	TeamName string
	// AppID is the entitlements' application-identifier
	// ("TEAMID.com.example.app" or "TEAMID.*").
	AppID string
	// BundleID is AppID without its prefix (ApplicationIdentifierPrefix[0],
	// else TeamID): "com.example.app", "com.example.*" or "*".
	BundleID string
	// Type is the export method the profile implies, decided as EAS does:
	// ProvisionsAllDevices → api.ExportEnterprise; else a
	// ProvisionedDevices list → api.ExportDevelopment when the
	// entitlements allow get-task-allow, api.ExportAdHoc otherwise; else
	// api.ExportAppStore.
	Type    string
	Created time.Time
	Expires time.Time
	// ProvisionsAllDevices is set for an enterprise (in-house) profile.
	ProvisionsAllDevices bool
	// Certificates are the DeveloperCertificates (DER): the certificates
	// that may sign with this profile.
	Certificates [][]byte
	// Devices are the ProvisionedDevices' UDIDs; HasDeviceList says
	// whether the profile has that key at all (eas-cli tests the key's
	// presence, an empty list included).
	Devices       []string
	HasDeviceList bool
	Entitlements  map[string]any
	// Raw is the .mobileprovision as given.
	Raw []byte
}

// Parse reads a .mobileprovision. It fails, saying what is wrong, on
// anything that is not a CMS envelope holding a profile's property list
// with a UUID, a team, an application identifier and an expiry date.
func Parse(raw []byte) (Profile, error) {
	if len(raw) == 0 {
		return Profile{}, errors.New("the provisioning profile is empty")
	}
	if len(raw) > MaxBytes {
		return Profile{}, fmt.Errorf("the provisioning profile is %d bytes, more than the %d a profile can be", len(raw), MaxBytes)
	}
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("<")) {
		return Profile{}, errors.New("this is a bare property list, not a .mobileprovision: download the signed profile from the Apple Developer portal (or `eas credentials`)")
	}
	content, err := signedContent(raw)
	if err != nil {
		return Profile{}, fmt.Errorf("not a provisioning profile (%w); download the .mobileprovision again from the Apple Developer portal (or `eas credentials`)", err)
	}
	v, err := plist.Parse(content)
	if err != nil {
		return Profile{}, fmt.Errorf("the provisioning profile's content is not a property list: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return Profile{}, errors.New("the provisioning profile's property list is not a dictionary")
	}
	p := Profile{Raw: raw}
	var errs []error
	str := func(key string, required bool) string {
		s, ok := m[key].(string)
		if _, present := m[key]; present && !ok {
			errs = append(errs, fmt.Errorf("%s is not a string", key))
		} else if required && s == "" {
			errs = append(errs, fmt.Errorf("%s is missing", key))
		}
		return s
	}
	first := func(key string, required bool) string {
		a, ok := m[key].([]any)
		if !ok || len(a) == 0 {
			if required {
				errs = append(errs, fmt.Errorf("%s is missing", key))
			}
			return ""
		}
		s, ok := a[0].(string)
		if !ok || s == "" {
			errs = append(errs, fmt.Errorf("%s[0] is not a string", key))
		}
		return s
	}
	date := func(key string, required bool) time.Time {
		t, ok := m[key].(time.Time)
		if !ok && required {
			errs = append(errs, fmt.Errorf("%s is missing or not a date", key))
		}
		return t
	}
	p.UUID = str("UUID", true)
	if p.UUID != "" && !validUUID(p.UUID) {
		errs = append(errs, fmt.Errorf("UUID %q is not a UUID", p.UUID))
	}
	p.Name = str("Name", false)
	p.TeamName = str("TeamName", false)
	p.TeamID = first("TeamIdentifier", true)
	prefix := first("ApplicationIdentifierPrefix", false)
	p.Created = date("CreationDate", false)
	p.Expires = date("ExpirationDate", true)
	if ent, present := m["Entitlements"]; present {
		if p.Entitlements, ok = ent.(map[string]any); !ok {
			errs = append(errs, errors.New("Entitlements is not a dictionary"))
		}
	}
	p.AppID, _ = p.Entitlements["application-identifier"].(string)
	if p.AppID == "" {
		errs = append(errs, errors.New("Entitlements.application-identifier is missing"))
	}
	if prefix == "" {
		prefix = p.TeamID
	}
	if b, ok := strings.CutPrefix(p.AppID, prefix+"."); ok {
		p.BundleID = b
	} else if _, b, ok := strings.Cut(p.AppID, "."); ok {
		p.BundleID = b
	} else if p.AppID != "" {
		errs = append(errs, fmt.Errorf("Entitlements.application-identifier %q has no team prefix", p.AppID))
	}
	if certs, present := m["DeveloperCertificates"]; present {
		a, _ := certs.([]any)
		for i, c := range a {
			der, ok := c.([]byte)
			if !ok {
				errs = append(errs, fmt.Errorf("DeveloperCertificates[%d] is not data", i))
				continue
			}
			p.Certificates = append(p.Certificates, der)
		}
		if a == nil {
			errs = append(errs, errors.New("DeveloperCertificates is not an array"))
		}
	}
	if devices, present := m["ProvisionedDevices"]; present {
		a, ok := devices.([]any)
		p.HasDeviceList = ok
		for _, d := range a {
			if s, ok := d.(string); ok {
				p.Devices = append(p.Devices, s)
			}
		}
	}
	p.ProvisionsAllDevices, _ = m["ProvisionsAllDevices"].(bool)
	switch {
	case p.ProvisionsAllDevices:
		p.Type = api.ExportEnterprise
	case p.HasDeviceList && p.getTaskAllow():
		p.Type = api.ExportDevelopment
	case p.HasDeviceList:
		p.Type = api.ExportAdHoc
	default:
		p.Type = api.ExportAppStore
	}
	if err := errors.Join(errs...); err != nil {
		return Profile{}, fmt.Errorf("the provisioning profile is incomplete: %w", err)
	}
	return p, nil
}

// getTaskAllow is eas-cli's !!entitlements['get-task-allow']: a profile
// that lets a debugger attach is a development one.
func (p Profile) getTaskAllow() bool {
	switch v := p.Entitlements["get-task-allow"].(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case int64:
		return v != 0
	case float64:
		return v != 0
	}
	return true
}

// IsAdHoc, IsDevelopment and IsEnterprise are eas-cli's isAdHocProfile,
// isDevelopmentProfile and isEnterpriseUniversalProfile, which test the
// keys independently of one another (Type orders them).
func (p Profile) IsAdHoc() bool { return p.HasDeviceList && !p.getTaskAllow() }

// IsDevelopment: a device list and get-task-allow.
func (p Profile) IsDevelopment() bool { return p.HasDeviceList && p.getTaskAllow() }

// IsEnterprise: ProvisionsAllDevices.
func (p Profile) IsEnterprise() bool { return p.ProvisionsAllDevices }

// Matches reports whether the profile's application identifier covers
// bundleID, by Apple's rules: "*" covers every bundle identifier,
// "com.example.*" covers "com.example.anything" (not "com.example"
// itself), anything else only itself.
func (p Profile) Matches(bundleID string) bool {
	if bundleID == "" || p.BundleID == "" {
		return false
	}
	if p.BundleID == "*" {
		return true
	}
	if stem, ok := strings.CutSuffix(p.BundleID, "*"); ok {
		return strings.HasSuffix(stem, ".") && len(bundleID) > len(stem) && strings.HasPrefix(bundleID, stem)
	}
	return bundleID == p.BundleID
}

// HasCertificate reports whether der (a certificate, DER) is one of the
// profile's DeveloperCertificates: only those can sign with it.
func (p Profile) HasCertificate(der []byte) bool {
	for _, c := range p.Certificates {
		if bytes.Equal(c, der) {
			return true
		}
	}
	return false
}

// validUUID accepts hex digits and dashes only (Apple's UUIDs): the VM
// names the installed file after it, so it must not form a path.
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
