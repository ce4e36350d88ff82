package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/cli/easjson"
	"github.com/freeagent-build/freeagent/internal/appversion"
	"github.com/freeagent-build/freeagent/internal/xcode"
)

// versionBump is a local-source autoIncrement: the edits of the project's
// files, made once every platform of the submit resolved and before the
// upload, as eas-cli makes them before it packs.
type versionBump struct {
	// changes say what apply changes ("expo.android.versionCode from 42 to 43").
	changes []string
	apply   func() error
}

// increment is what autoIncrement bumps on platform, as eas-cli reads it:
// true and the platform's build-version name bump the build version,
// "version" the app version.
func increment(a *api.AutoIncrement) string {
	switch {
	case a == nil:
		return ""
	case a.Bool != nil:
		if *a.Bool {
			return api.IncrementBuildVersion
		}
		return ""
	case a.Field == "version":
		return api.IncrementAppVersion
	case a.Field != "":
		return api.IncrementBuildVersion
	}
	return ""
}

// localVersions are the versions the project's own files say, as eas-cli
// reads them for one platform: the app config of a managed app with
// Expo's defaults (versionCode 1, buildNumber "1"), the native files of a
// bare one.
type localVersions struct {
	appVersion, buildVersion string
	// unset: a bare app's native files state no build version (eas-cli then
	// starts the remote one at it rather than after it).
	unset bool
}

func readLocalVersions(appRoot string, spec *api.BuildSpec) (localVersions, error) {
	app := spec.App
	switch {
	case spec.Platform == api.PlatformAndroid && spec.Workflow == api.WorkflowGeneric:
		gradle, err := appversion.GradleFile(filepath.Join(appRoot, "android"))
		if err != nil {
			return localVersions{}, err
		}
		code, name, err := appversion.GradleVersions(gradle)
		if err != nil {
			return localVersions{}, err
		}
		return localVersions{appVersion: cmp.Or(name, "1.0.0"), buildVersion: cmp.Or(code, "1"), unset: code == ""}, nil
	case spec.Platform == api.PlatformAndroid:
		code := 1
		if app.AndroidVersionCode != 0 {
			code = app.AndroidVersionCode
		}
		return localVersions{appVersion: app.Version, buildVersion: strconv.Itoa(code)}, nil
	case spec.Workflow == api.WorkflowGeneric && spec.IOS != nil && len(spec.IOS.Targets) > 0:
		plists, err := infoPlists(appRoot, spec.IOS, spec.IOS.Targets[:1])
		if err != nil {
			return localVersions{}, err
		}
		build, short, err := plists[0].Versions()
		if err != nil {
			return localVersions{}, err
		}
		return localVersions{appVersion: short, buildVersion: build}, nil
	default:
		return localVersions{appVersion: cmp.Or(app.Version, "1.0.0"), buildVersion: cmp.Or(app.IOSBuildNumber, "1")}, nil
	}
}

// infoPlists are the Info.plist files of a bare iOS app's targets.
func infoPlists(appRoot string, b *api.IOSBuild, targets []api.IOSTarget) ([]appversion.InfoPlist, error) {
	iosDir := filepath.Join(appRoot, "ios")
	xcodeproj, err := xcode.FindProject(iosDir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Name
	}
	return appversion.InfoPlists(iosDir, xcodeproj, names, b.BuildConfiguration)
}

// applicationID is what the remote build version is kept under: the
// application target's bundle identifier, or the Android package (of a
// bare app without one in its config, the build script's applicationId).
func applicationID(appRoot string, spec *api.BuildSpec) (string, error) {
	if spec.Platform == api.PlatformIOS {
		if spec.IOS != nil && len(spec.IOS.Targets) > 0 {
			return spec.IOS.Targets[0].BundleID, nil
		}
		if spec.App.IOSBundleID != "" {
			return spec.App.IOSBundleID, nil
		}
		return "", usageErr("the remote app version is kept per bundle identifier, and this app has none: set expo.ios.bundleIdentifier in the app config")
	}
	if spec.App.AndroidPackage != "" {
		return spec.App.AndroidPackage, nil
	}
	if spec.Workflow == api.WorkflowGeneric {
		if gradle, err := appversion.GradleFile(filepath.Join(appRoot, "android")); err == nil {
			if b, err := os.ReadFile(gradle); err == nil {
				if m := gradleApplicationID.FindSubmatch(b); m != nil {
					return string(m[1]), nil
				}
			}
		}
	}
	return "", usageErr("the remote app version is kept per Android package, and this app has none: set expo.android.package in the app config")
}

var gradleApplicationID = regexp.MustCompile(`\bapplicationId\b[ \t]*=?[ \t]*["']([^"'\n]+)["']`)

// decideVersions decides the build's versions as eas-cli does for
// cli.appVersionSource: remote (the farm decides the build version at the
// submit, from the project's own the first time) or local (the project's
// files, bumped by autoIncrement: the returned bump).
func decideVersions(appRoot, source string, spec *api.BuildSpec, warnings *[]string) (*api.AppVersions, *versionBump, error) {
	inc := increment(spec.Profile.AutoIncrement)
	if source == "" {
		if inc != api.IncrementAppVersion {
			*warnings = append(*warnings, `eas.json: "cli.appVersionSource" is not set: using the "local" version source, as EAS does (set it to "remote" to have the farm keep the build version; https://docs.expo.dev/build-reference/app-versions/)`)
		}
		source = api.VersionSourceLocal
	}
	if source != api.VersionSourceLocal && source != api.VersionSourceRemote {
		return nil, nil, usageErr("eas.json: cli.appVersionSource %q: use \"remote\" or \"local\"", source)
	}
	if source == api.VersionSourceLocal {
		return decideLocal(appRoot, spec, inc)
	}
	if inc == api.IncrementAppVersion {
		return nil, nil, usageErr(`eas.json: {"autoIncrement": "version"} is not supported when app version source is set to remote`)
	}
	if spec.Platform == api.PlatformIOS && spec.App.IOSBuildNumber != "" {
		*warnings = append(*warnings, "ios.buildNumber in the app config is ignored when the version source is remote (it stays in the manifest expo-constants shows); remove it from the app config")
	}
	if spec.Platform == api.PlatformAndroid && spec.App.AndroidVersionCode != 0 {
		*warnings = append(*warnings, "android.versionCode in the app config is ignored when the version source is remote (it stays in the manifest expo-constants shows); remove it from the app config")
	}
	id, err := applicationID(appRoot, spec)
	if err != nil {
		return nil, nil, err
	}
	local, err := readLocalVersions(appRoot, spec)
	if err != nil || local.buildVersion == "" {
		return nil, nil, usageErr("remote versions are not configured and expo-build could not read the current %s from the project (%v): use `expo-build build:version:set` to initialize them", api.BuildVersionName(spec.Platform), err)
	}
	initial := local.buildVersion
	// eas-cli starts at the project's own number when the project states
	// none (a bare Android app) or iOS's "1"; otherwise autoIncrement
	// starts after it.
	if inc != "" && !local.unset && !(spec.Platform == api.PlatformIOS && initial == "1") {
		if initial, err = api.NextBuildVersion(spec.Platform, initial); err != nil {
			return nil, nil, usageErr("the project's %v", err)
		}
	} else if err := api.CheckBuildVersion(spec.Platform, initial); err != nil {
		return nil, nil, usageErr("the project's %v", err)
	}
	return &api.AppVersions{Source: api.VersionSourceRemote, Increment: inc, ApplicationID: id,
		AppVersion: cmp.Or(local.appVersion, spec.App.Version, "1.0.0"), InitialBuildVersion: initial}, nil, nil
}

// decideLocal is the local version source: the project's versions, bumped
// first when autoIncrement asks, as eas-cli's bumpVersionAsync does: in
// app.json, then, in a bare app, the native files are set to app.json's.
func decideLocal(appRoot string, spec *api.BuildSpec, inc string) (*api.AppVersions, *versionBump, error) {
	local, err := readLocalVersions(appRoot, spec)
	if err != nil {
		local = localVersions{} // eas-cli records no versions it cannot read
	}
	v := &api.AppVersions{Source: api.VersionSourceLocal, Increment: inc, AppVersion: local.appVersion, BuildVersion: local.buildVersion}
	if inc == "" {
		return v, nil, nil
	}
	static := ""
	for _, name := range []string{"app.config.json", "app.json"} {
		if fileExists(filepath.Join(appRoot, name)) {
			static = filepath.Join(appRoot, name)
			break
		}
	}
	if static == "" {
		return nil, nil, usageErr("eas.json: autoIncrement option is not supported when using app.config.js (expo-build bumps the version in app.json, which this app does not have; set the versions in app.config.js and remove autoIncrement, or use cli.appVersionSource \"remote\")")
	}
	app := &spec.App
	bare := spec.Workflow == api.WorkflowGeneric
	var gradle string
	if bare && spec.Platform == api.PlatformAndroid {
		if gradle, err = appversion.GradleFile(filepath.Join(appRoot, "android")); err != nil {
			return nil, nil, &cliError{code: ExitUsage, msg: "autoIncrement", err: err}
		}
		flavors, err := appversion.MultiFlavor(gradle)
		if err != nil {
			return nil, nil, &cliError{code: ExitUsage, msg: "autoIncrement", err: err}
		}
		if flavors {
			return nil, nil, usageErr("eas.json: autoIncrement: automatic version bumping is not supported for multi-flavor Android projects")
		}
	}
	rel := filepath.Base(static)
	b := &versionBump{}
	var edit appversion.AppJSONEdit
	switch {
	case inc == api.IncrementAppVersion:
		from := cmp.Or(app.Version, "1.0.0")
		next, ok := easjson.NextPatch(from)
		if !ok {
			return nil, nil, usageErr("eas.json: autoIncrement \"version\": expo.version = %s is not a valid semver; set the next version in %s yourself", from, rel)
		}
		b.changes = append(b.changes, fmt.Sprintf("expo.version from %s to %s in %s", from, next, rel))
		edit = appversion.AppJSONEdit{Path: []string{"version"}, Value: jsonString(next)}
		app.Version, v.AppVersion = next, next
	case spec.Platform == api.PlatformAndroid:
		from := max(app.AndroidVersionCode, 1)
		next, err := api.NextBuildVersion(api.PlatformAndroid, strconv.Itoa(from))
		if err != nil {
			return nil, nil, usageErr("eas.json: autoIncrement: expo.android.%v", err)
		}
		b.changes = append(b.changes, fmt.Sprintf("expo.android.versionCode from %d to %s in %s", from, next, rel))
		edit = appversion.AppJSONEdit{Path: []string{"android", "versionCode"}, Value: json.RawMessage(next)}
		app.AndroidVersionCode, _ = strconv.Atoi(next)
		v.BuildVersion = next
	default:
		from := cmp.Or(app.IOSBuildNumber, "1")
		next, err := api.NextBuildVersion(api.PlatformIOS, from)
		if err != nil {
			return nil, nil, usageErr("eas.json: autoIncrement: expo.ios.buildNumber = %s is not a number; set the next build number in %s yourself", from, rel)
		}
		b.changes = append(b.changes, fmt.Sprintf("expo.ios.buildNumber from %s to %s in %s", from, next, rel))
		edit = appversion.AppJSONEdit{Path: []string{"ios", "buildNumber"}, Value: jsonString(next)}
		app.IOSBuildNumber, v.BuildVersion = next, next
	}
	// What a bare app's native files get: app.json's versions after the bump.
	nativeVersion, nativeBuild := app.Version, ""
	if spec.Platform == api.PlatformAndroid && app.AndroidVersionCode != 0 {
		nativeBuild = strconv.Itoa(app.AndroidVersionCode)
	}
	if spec.Platform == api.PlatformIOS {
		nativeBuild = app.IOSBuildNumber
	}
	var plists []appversion.InfoPlist
	if bare && spec.Platform == api.PlatformIOS && spec.IOS != nil {
		if plists, err = infoPlists(appRoot, spec.IOS, spec.IOS.Targets); err != nil {
			return nil, nil, &cliError{code: ExitUsage, msg: "autoIncrement", err: err}
		}
	}
	if bare {
		v.AppVersion = nativeVersion
		if nativeBuild != "" {
			v.BuildVersion = nativeBuild
		}
		what := "android/app/" + filepath.Base(gradle)
		if spec.Platform == api.PlatformIOS {
			what = "the targets' Info.plist"
		}
		b.changes = append(b.changes, fmt.Sprintf("%s synchronized with %s", what, rel))
	}
	b.apply = func() error {
		if err := appversion.EditAppJSON(static, edit); err != nil {
			return err
		}
		if gradle != "" {
			if err := appversion.SetGradleVersions(gradle, nativeBuild, nativeVersion); err != nil {
				return err
			}
		}
		for _, p := range plists {
			if err := p.SetVersions(nativeBuild, nativeVersion); err != nil {
				return err
			}
		}
		return nil
	}
	return v, b, nil
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}
