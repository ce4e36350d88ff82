package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/freeagent-build/freeagent/internal/provisioning"
)

// profile is what the fake reads of an installed .mobileprovision: the
// XML plist inside its CMS envelope.
type profile struct {
	Path                 string
	Name                 string
	UUID                 string
	TeamIdentifier       []string
	ProvisionedDevices   []string
	ProvisionsAllDevices bool
	Entitlements         struct {
		ApplicationIdentifier string
		GetTaskAllow          bool
	}
}

// readProfile reads an installed profile as Xcode does: the property
// list inside its CMS envelope, however the envelope is encoded.
func readProfile(path string) (profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return profile{}, err
	}
	pp, err := provisioning.Parse(data)
	if err != nil {
		return profile{}, err
	}
	p := profile{Path: path, Name: pp.Name, UUID: pp.UUID, TeamIdentifier: []string{pp.TeamID},
		ProvisionedDevices: pp.Devices, ProvisionsAllDevices: pp.ProvisionsAllDevices}
	p.Entitlements.ApplicationIdentifier = pp.AppID
	p.Entitlements.GetTaskAllow, _ = pp.Entitlements["get-task-allow"].(bool)
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
