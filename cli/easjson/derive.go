package easjson

import "github.com/freeagent-build/freeagent/api"

// DefaultApplicationArchivePath is where Gradle leaves the APK or AAB; the
// archive EAS uploads when a profile names none.
const DefaultApplicationArchivePath = "android/app/build/outputs/**/*.{apk,aab}"

// Environment is the environment whose variables a build with this
// profile gets, as eas-cli chooses it: the profile's own, else production
// for store builds, development for a development client, and preview
// for the rest.
func Environment(p api.BuildProfile) string {
	switch {
	case p.Environment != "":
		return p.Environment
	case p.Distribution == "store":
		return api.EnvironmentProduction
	case p.DevelopmentClient != nil && *p.DevelopmentClient:
		return api.EnvironmentDevelopment
	}
	return api.EnvironmentPreview
}

// Android is what an Android build of this profile runs and keeps. An
// internal-distribution profile that names neither a buildType nor a
// gradleCommand builds an APK, as eas-cli decides; the Gradle task is the
// profile's gradleCommand, else a debug APK for a development client,
// else assembleRelease for an APK and bundleRelease for an app bundle.
func Android(p api.BuildProfile) *api.AndroidBuild {
	buildType := p.BuildType
	if buildType == "" && p.GradleCommand == "" && p.Distribution == "internal" {
		buildType = api.AndroidAPK
	}
	var gradle string
	switch {
	case p.GradleCommand != "":
		gradle, buildType = p.GradleCommand, ""
	case p.DevelopmentClient != nil && *p.DevelopmentClient:
		gradle, buildType = ":app:assembleDebug", api.AndroidAPK
	case buildType == api.AndroidAPK:
		gradle = ":app:assembleRelease"
	default:
		gradle, buildType = ":app:bundleRelease", api.AndroidAppBundle
	}
	archive := p.ApplicationArchivePath
	if archive == "" {
		archive = p.ArtifactPath
	}
	if archive == "" {
		archive = DefaultApplicationArchivePath
	}
	b := &api.AndroidBuild{
		GradleCommand:           gradle,
		BuildType:               buildType,
		ApplicationArchivePaths: []string{archive},
	}
	if len(p.BuildArtifactPaths) > 0 {
		b.BuildArtifactPaths = append([]string(nil), p.BuildArtifactPaths...)
	}
	return b
}
