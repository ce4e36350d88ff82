package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// App version sources: eas.json's cli.appVersionSource.
const (
	// VersionSourceLocal: the project's own files say the versions
	// (app.json, or build.gradle and Info.plist in a bare app);
	// autoIncrement bumps them there before the upload.
	VersionSourceLocal = "local"
	// VersionSourceRemote: the farm keeps the build version per project,
	// platform and application identifier; it decides each build's at the
	// submit and the VM applies it.
	VersionSourceRemote = "remote"
)

// What autoIncrement bumps, as eas-cli reads the profile's value per
// platform.
const (
	// IncrementBuildVersion: versionCode (Android) or buildNumber (iOS):
	// autoIncrement true, "versionCode" or "buildNumber".
	IncrementBuildVersion = "build_version"
	// IncrementAppVersion: the app version's patch number:
	// autoIncrement "version" (local source only, as in EAS).
	IncrementAppVersion = "app_version"
)

// AppVersions are the versions a build is made with, decided before it is
// built and never again: by expo-build for the local source, by the
// controller at the submit for the remote one. See docs/build-spec.md.
type AppVersions struct {
	// Source is VersionSourceLocal or VersionSourceRemote.
	Source string `json:"source"`
	// Increment is what the profile's autoIncrement bumped for this build:
	// "" (nothing), IncrementBuildVersion or IncrementAppVersion.
	Increment string `json:"increment,omitempty"`
	// ApplicationID is the Android package or the iOS bundle identifier
	// the remote build version is kept for.
	ApplicationID string `json:"application_id,omitempty"`
	// AppVersion is the user-facing version (expo.version, versionName,
	// CFBundleShortVersionString).
	AppVersion string `json:"app_version,omitempty"`
	// BuildVersion is versionCode (Android) or buildNumber (iOS). With the
	// remote source expo-build leaves it empty and the controller sets it
	// when it stores the build; a spec that has it (a retry) keeps it.
	BuildVersion string `json:"build_version,omitempty"`
	// InitialBuildVersion (remote source, from expo-build) is the build
	// version the farm starts from when it keeps none for ApplicationID
	// yet, as eas-cli initializes it from the project: the project's own,
	// already incremented when autoIncrement asks.
	InitialBuildVersion string `json:"initial_build_version,omitempty"`
}

// Remote reports whether the farm decides the build version.
func (v *AppVersions) Remote() bool { return v != nil && v.Source == VersionSourceRemote }

// MaxVersionCode is the largest versionCode Google Play accepts (and
// eas-cli allows).
const MaxVersionCode = 2100000000

var buildNumberPattern = regexp.MustCompile(`^\d+(\.\d+)?(\.\d+)?$`)

// BuildVersionName is what the platform calls the build version.
func BuildVersionName(platform string) string {
	if platform == PlatformIOS {
		return "buildNumber"
	}
	return "versionCode"
}

// CheckBuildVersion says what is wrong with v as the platform's build
// version, with eas-cli's rules: a versionCode is a whole number from 1
// to MaxVersionCode; a buildNumber is up to three dot-separated numbers.
func CheckBuildVersion(platform, v string) error {
	switch platform {
	case PlatformAndroid:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > MaxVersionCode || strconv.FormatInt(n, 10) != v {
			return fmt.Errorf("versionCode %q is not valid: versionCode needs to be a positive integer smaller or equal to %d", v, MaxVersionCode)
		}
	case PlatformIOS:
		if !buildNumberPattern.MatchString(v) || len(v) > 64 {
			return fmt.Errorf("buildNumber %q is not valid: buildNumber needs to consist only of up to 3 dot-separated positive integers", v)
		}
	default:
		return fmt.Errorf("platform %q: use android or ios", platform)
	}
	return nil
}

// NextBuildVersion is the build version after v, as eas-cli increments
// it: versionCode plus one; a buildNumber's last number plus one.
func NextBuildVersion(platform, v string) (string, error) {
	if err := CheckBuildVersion(platform, v); err != nil {
		return "", err
	}
	if platform == PlatformAndroid {
		n, _ := strconv.Atoi(v)
		if n >= MaxVersionCode {
			return "", fmt.Errorf("versionCode %d cannot be incremented: versionCode needs to be a positive integer smaller or equal to %d", n, MaxVersionCode)
		}
		return strconv.Itoa(n + 1), nil
	}
	parts := strings.Split(v, ".")
	last, err := strconv.ParseUint(parts[len(parts)-1], 10, 62)
	if err != nil {
		return "", fmt.Errorf("buildNumber %q cannot be incremented: %w", v, err)
	}
	parts[len(parts)-1] = strconv.FormatUint(last+1, 10)
	return strings.Join(parts, "."), nil
}

// AppVersionRecord is the build version the farm keeps for one
// application of a project (the remote version source), and the app
// version it was last built or set with.
type AppVersionRecord struct {
	Project       string    `json:"project"`
	Platform      string    `json:"platform"`
	ApplicationID string    `json:"application_id"`
	BuildVersion  string    `json:"build_version"`
	AppVersion    string    `json:"app_version,omitempty"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// SetAppVersionRequest is the body of PUT
// /api/projects/:project/app-versions/:platform/:application_id.
type SetAppVersionRequest struct {
	BuildVersion string `json:"build_version"`
	AppVersion   string `json:"app_version,omitempty"`
}

func appVersionPath(project, platform, applicationID string) string {
	return projectPath(project) + "/app-versions/" + url.PathEscape(platform) + "/" + url.PathEscape(applicationID)
}

// AppVersion reads the build version the farm keeps for an application
// (developer); 404 when it keeps none yet.
func (c *Client) AppVersion(ctx context.Context, project, platform, applicationID string) (AppVersionRecord, error) {
	var out AppVersionRecord
	return out, c.call(ctx, http.MethodGet, appVersionPath(project, platform, applicationID), nil, &out, nil)
}

// SetAppVersion sets the build version the farm keeps for an application
// (developer): the next build without autoIncrement uses it, the next
// with autoIncrement the one after.
func (c *Client) SetAppVersion(ctx context.Context, project, platform, applicationID string, req SetAppVersionRequest) (AppVersionRecord, error) {
	var out AppVersionRecord
	return out, c.call(ctx, http.MethodPut, appVersionPath(project, platform, applicationID), req, &out, nil)
}
