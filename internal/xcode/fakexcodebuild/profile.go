package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"howett.net/plist"
)

// profile is what the fake reads of an installed .mobileprovision: the
// XML plist inside its CMS envelope.
type profile struct {
	Path                 string   `plist:"-"`
	Name                 string   `plist:"Name"`
	UUID                 string   `plist:"UUID"`
	TeamIdentifier       []string `plist:"TeamIdentifier"`
	ProvisionedDevices   []string `plist:"ProvisionedDevices"`
	ProvisionsAllDevices bool     `plist:"ProvisionsAllDevices"`
	Entitlements         struct {
		ApplicationIdentifier string `plist:"application-identifier"`
		GetTaskAllow          bool   `plist:"get-task-allow"`
	} `plist:"Entitlements"`
}

// readProfile extracts and decodes the plist between `<?xml` and
// `</plist>`.
func readProfile(path string) (profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return profile{}, err
	}
	start := bytes.Index(data, []byte("<?xml"))
	end := bytes.Index(data, []byte("</plist>"))
	if start < 0 || end < start {
		return profile{}, fmt.Errorf("%s holds no property list", path)
	}
	var p profile
	if _, err := plist.Unmarshal(data[start:end+len("</plist>")], &p); err != nil {
		return profile{}, fmt.Errorf("%s: %w", path, err)
	}
	p.Path = path
	return p, nil
}

// installedProfiles reads every installed profile; unreadable ones are
// skipped as Xcode skips them.
func installedProfiles() []profile {
	paths, _ := filepath.Glob(filepath.Join(profilesDir(), "*.mobileprovision"))
	var out []profile
	for _, path := range paths {
		if p, err := readProfile(path); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func (p profile) team() string {
	if len(p.TeamIdentifier) > 0 {
		return p.TeamIdentifier[0]
	}
	return ""
}

// appID is the application-identifier without its team prefix.
func (p profile) appID() string {
	id := p.Entitlements.ApplicationIdentifier
	if _, rest, ok := strings.Cut(id, "."); ok {
		return rest
	}
	return id
}

// matches reports whether the profile's app ID covers bundleID: equal, or
// a wildcard "*" / "com.x.*" as Apple defines them.
func (p profile) matches(bundleID string) bool {
	id := p.appID()
	switch {
	case id == "*":
		return true
	case strings.HasSuffix(id, ".*"):
		return strings.HasPrefix(bundleID, strings.TrimSuffix(id, "*"))
	default:
		return id == bundleID
	}
}

// kind is Xcode's name for the profile's distribution type.
func (p profile) kind() string {
	switch {
	case p.Entitlements.GetTaskAllow:
		return "iOS App Development"
	case p.ProvisionsAllDevices:
		return "iOS In House"
	case len(p.ProvisionedDevices) > 0:
		return "iOS Ad Hoc"
	default:
		return "iOS App Store"
	}
}

// methodKind is the profile kind an export method needs.
func methodKind(method string) (string, bool) {
	switch method {
	case "app-store", "app-store-connect":
		return "iOS App Store", true
	case "ad-hoc", "release-testing":
		return "iOS Ad Hoc", true
	case "development", "debugging":
		return "iOS App Development", true
	case "enterprise":
		return "iOS In House", true
	}
	return "", false
}

// findProfile finds an installed profile by name or UUID.
func findProfile(profiles []profile, nameOrUUID string) (profile, bool) {
	for _, p := range profiles {
		if p.Name == nameOrUUID || strings.EqualFold(p.UUID, nameOrUUID) {
			return p, true
		}
	}
	return profile{}, false
}
