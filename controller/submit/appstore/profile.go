package appstore

import (
	"errors"
	"fmt"
	"regexp"
)

// Profile is what of eas.json's iOS submit profile concerns App Store
// Connect, as eas-cli reads it.
type Profile struct {
	AscAppID          string
	AscAPIKeyPath     string
	AscAPIKeyIssuerID string
	AscAPIKeyID       string
	AppleTeamID       string
	BundleIdentifier  string
	// AppleID is appleId; AppSpecificPassword says whether
	// EXPO_APPLE_APP_SPECIFIC_PASSWORD is set (its value is not needed).
	AppleID             string
	AppSpecificPassword bool
}

// ErrPasswordLogin is the refusal of an Apple ID and password (or
// app-specific password) in place of an App Store Connect API key.
var ErrPasswordLogin = errors.New("submitting with an Apple ID and password (appleId, EXPO_APPLE_APP_SPECIFIC_PASSWORD) is not supported: " +
	"create an App Store Connect API key (App Store Connect → Users and Access → Integrations → App Store Connect API, role App Manager) " +
	"and set ascApiKeyPath (the .p8 file), ascApiKeyIssuerId and ascApiKeyId in the submit profile")

// CheckProfile says what in an iOS submit profile keeps a submission from
// App Store Connect: an Apple ID login without an API key
// (ErrPasswordLogin), an API key named in part, or ids of the wrong form.
// The CLI calls it when it validates eas.json; Submit checks the same
// again on the values it is given.
func CheckProfile(p Profile) error {
	var errs []error
	key := p.AscAPIKeyPath != "" || p.AscAPIKeyIssuerID != "" || p.AscAPIKeyID != ""
	switch {
	case !key && (p.AppleID != "" || p.AppSpecificPassword):
		errs = append(errs, ErrPasswordLogin)
	case !key:
		errs = append(errs, errors.New("the submit profile names no App Store Connect API key: set ascApiKeyPath (the .p8 file), ascApiKeyIssuerId and ascApiKeyId (App Store Connect → Users and Access → Integrations)"))
	case p.AscAPIKeyPath == "" || p.AscAPIKeyIssuerID == "" || p.AscAPIKeyID == "":
		errs = append(errs, errors.New("ascApiKeyPath, ascApiKeyIssuerId and ascApiKeyId must all be set in the submit profile"))
	}
	errs = append(errs, checkIssuerID(p.AscAPIKeyIssuerID), checkKeyID(p.AscAPIKeyID), checkAppID(p.AscAppID), checkTeamID(p.AppleTeamID))
	return errors.Join(errs...)
}

// The forms of the profile's ids, as eas.json's schema has them. An empty
// id passes: whether it is needed is the caller's to say.
var (
	issuerIDPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	keyIDPattern    = regexp.MustCompile(`^[0-9A-Z]{1,30}$`)
	appIDPattern    = regexp.MustCompile(`^[0-9]{1,30}$`)
	teamIDPattern   = regexp.MustCompile(`^[0-9A-Z]{10}$`)
)

const keysPage = "App Store Connect → Users and Access → Integrations"

func checkIssuerID(id string) error {
	if id != "" && !issuerIDPattern.MatchString(id) {
		return fmt.Errorf("the API key's issuer id (ascApiKeyIssuerId) %q is not a UUID (such as xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx): copy it from %s", id, keysPage)
	}
	return nil
}

func checkKeyID(id string) error {
	if id != "" && !keyIDPattern.MatchString(id) {
		return fmt.Errorf("the API key id (ascApiKeyId) %q is not up to 30 uppercase letters and digits (such as AB32CZE81F): copy it from %s", id, keysPage)
	}
	return nil
}

func checkAppID(id string) error {
	if id != "" && !appIDPattern.MatchString(id) {
		return fmt.Errorf("ascAppId %q is not an App Store Connect app id (digits, such as 1234567891): copy the app's Apple ID from App Store Connect → the app → App Information", id)
	}
	return nil
}

func checkTeamID(id string) error {
	if id != "" && !teamIDPattern.MatchString(id) {
		return fmt.Errorf("appleTeamId %q is not an Apple team id (10 uppercase letters or digits, such as AB32CZE81F)", id)
	}
	return nil
}
