package main

import (
	"crypto/sha1"
	"crypto/x509"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/provisioning"
)

// profile is an installed .mobileprovision and where it is.
type profile struct {
	provisioning.Profile
	Path string
}

// installedProfiles reads every installed profile as Xcode does (the
// property list inside its CMS envelope, however the envelope is
// encoded); unreadable ones are skipped as Xcode skips them.
func installedProfiles() []profile {
	paths, _ := filepath.Glob(filepath.Join(profilesDir(), "*.mobileprovision"))
	var out []profile
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if p, err := provisioning.Parse(data); err == nil {
			out = append(out, profile{Profile: p, Path: path})
		}
	}
	return out
}

// kind is Xcode's name for the profile's distribution type.
func (p profile) kind() string {
	switch p.Type {
	case api.ExportDevelopment:
		return "iOS App Development"
	case api.ExportEnterprise:
		return "iOS In House"
	case api.ExportAdHoc:
		return "iOS Ad Hoc"
	default:
		return "iOS App Store"
	}
}

// signingCertificate finds the certificate of the profile that
// CODE_SIGN_IDENTITY names, as Xcode resolves it: a generic name
// ("iPhone Distribution", "Apple Development", ...) takes any certificate
// of that class, anything else must be a certificate's common name or
// SHA-1. Xcode looks in the keychain for an identity the profile
// includes; the fake has no keychain and looks in the profile alone.
// generic reports whether identity was a generic name.
func (p profile) signingCertificate(identity string) (found, generic bool) {
	var prefixes []string
	switch identity {
	case "", "iPhone Developer", "Apple Development", "iOS Development":
		prefixes = []string{"Apple Development:", "iPhone Developer:"}
	case "iPhone Distribution", "Apple Distribution", "iOS Distribution":
		prefixes = []string{"Apple Distribution:", "iPhone Distribution:"}
	}
	for _, der := range p.Certificates {
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			continue
		}
		cn := cert.Subject.CommonName
		sum := sha1.Sum(der)
		switch {
		case prefixes != nil && slicesHasPrefix(cn, prefixes):
			return true, true
		case prefixes == nil && (cn == identity || strings.EqualFold(hex.EncodeToString(sum[:]), identity)):
			return true, false
		}
	}
	return false, prefixes != nil
}

func slicesHasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// identityClass is the name Xcode's "No signing certificate" error gives a
// generic identity.
func identityClass(identity string) string {
	switch identity {
	case "iPhone Distribution", "Apple Distribution", "iOS Distribution":
		return "iOS Distribution"
	}
	return "iOS Development"
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
