package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// SpecVersion is the format of BuildSpec this code writes and reads.
const SpecVersion = 1

// CustomBuildScript is the package.json script that replaces the default
// pipeline: it owns installing, building and leaving its outputs in
// FREEAGENT_ARTIFACTS_DIR.
const CustomBuildScript = "freeagent:build"

// BuildSpec is what a build is: decided once, by expo-build on the
// developer's machine (eas.json resolved, the app config read, the package
// manager and credentials chosen), sent with the submit, stored with the
// build, shown by the CLI and the dashboard, and applied by the VM, which
// never resolves anything again. See docs/build-spec.md.
type BuildSpec struct {
	Version  int    `json:"version"`
	Platform string `json:"platform"`
	// ProfileName is the eas.json build profile ("production").
	ProfileName string `json:"profile_name"`
	// Profile is that profile resolved for Platform exactly as
	// @expo/eas-json's resolveBuildProfile returns it: extends applied,
	// the platform section merged over the common keys, defaults filled.
	Profile BuildProfile `json:"profile"`
	// Environment selects the farm's variables: Profile.Environment, else
	// production for store distribution, development for a development
	// client, preview otherwise (as eas-cli derives it).
	Environment string  `json:"environment"`
	App         App     `json:"app"`
	Project     Project `json:"project"`
	// ProjectName is the farm project the build belongs to: its builds,
	// variables, credentials and allowed pools. expo-build sets it (the
	// app's slug, or `submit --project NAME`); empty in a spec from an older
	// CLI, which means App.Slug. See BuildProject.
	ProjectName string `json:"project_name,omitempty"`
	// Workflow is where the native project of Platform comes from, as
	// eas-cli's resolveWorkflowAsync decides it: WorkflowGeneric (a bare
	// app: the upload holds it) or WorkflowManaged (expo prebuild makes it
	// on the farm). Empty in a spec from an older CLI or a raw API submit:
	// the VM decides it once from the archive (the native directory is
	// there or not).
	Workflow string `json:"workflow,omitempty"`
	// Android is set for Android builds: the decisions taken from Profile.
	Android *AndroidBuild `json:"android,omitempty"`
	// IOS is set for iOS builds: the decisions taken from Profile and
	// the Xcode project (or, before prebuild, the app config).
	IOS         *IOSBuild       `json:"ios,omitempty"`
	Credentials CredentialsInfo `json:"credentials"`
	// Message is the submitter's note (expo-build build --message).
	Message string `json:"message,omitempty"`
	// GitCommit is the project's HEAD when it is a git checkout.
	GitCommit string `json:"git_commit,omitempty"`
	// SourceFingerprint is the hex SHA-256 of the uploaded tree's content
	// (each packed file's path, mode and bytes, in archive order), so two
	// uploads of one tree match however the archive's bytes differ.
	// `submit --reuse` looks for a completed build with the same one.
	SourceFingerprint string `json:"source_fingerprint,omitempty"`
	// Caches are the dependency caches the build may restore and, when it
	// succeeds, refresh; empty when the profile's cache is disabled. The
	// keys travel so the controller can place a build on a worker that
	// holds them warm (see docs/build-spec.md, "Warm builds").
	Caches []CacheEntry `json:"caches,omitzero"`
	// ClearCache (expo-build build --clear-cache, as eas build's): the
	// build restores none of Caches and, when it succeeds, saves them
	// afresh, replacing what the workers held.
	ClearCache bool `json:"clear_cache,omitempty"`
	// Versions are the app version and build version the build is made
	// with (nil in a spec from an older CLI: the project's own files decide).
	Versions *AppVersions `json:"versions,omitempty"`
	// Requires is what a worker must offer to run the build, as
	// expo-build derived it from the profile's resourceClass, image and
	// tool pins (docs/build-spec.md, "Workers"); nil: any worker of the
	// platform. The controller's claim routes on it.
	Requires *Requirements `json:"requires,omitempty"`
}

// Requirements are the conditions on a worker's Capabilities a build
// needs. Every field set must hold.
type Requirements struct {
	// CPUCores and MemoryGB are minimums (eas.json resourceClass).
	CPUCores int `json:"cpu_cores,omitempty"`
	MemoryGB int `json:"memory_gb,omitempty"`
	// Image is the worker's Capabilities.Image, exactly (an eas.json image
	// naming a template).
	Image string `json:"image,omitempty"`
	// Xcode is the template's Xcode version or its leading components
	// ("16" takes any 16.x; eas.json image latest, sdk-NN or an EAS image
	// name).
	Xcode string `json:"xcode,omitempty"`
	// Tools maps a tool (a key of Capabilities.Tools) to the version one
	// of the worker's versions must be, or begin with (eas.json node, ndk,
	// cocoapods, bundler, fastlane).
	Tools map[string]string `json:"tools,omitempty"`
}

// Unmet lists what c lacks of r, each as "what is needed (what c has)";
// empty: c can run the build. The controller's claim checks the same
// conditions in SQL (store's requirementsMet).
func (r *Requirements) Unmet(c Capabilities) []string {
	if r == nil {
		return nil
	}
	var out []string
	if c.CPUCores < r.CPUCores {
		out = append(out, fmt.Sprintf("%d CPU cores (has %d)", r.CPUCores, c.CPUCores))
	}
	if c.MemoryGB < r.MemoryGB {
		out = append(out, fmt.Sprintf("%d GB of memory (has %d)", r.MemoryGB, c.MemoryGB))
	}
	if r.Image != "" && c.Image != r.Image {
		out = append(out, fmt.Sprintf("image %s (has %s)", r.Image, orNone(c.Image)))
	}
	if r.Xcode != "" && !VersionMatches(r.Xcode, c.XcodeVersion) {
		out = append(out, fmt.Sprintf("Xcode %s (has %s)", r.Xcode, orNone(c.XcodeVersion)))
	}
	for _, name := range slices.Sorted(maps.Keys(r.Tools)) {
		want := r.Tools[name]
		if !slices.ContainsFunc(c.Tools[name], func(have string) bool { return VersionMatches(want, have) }) {
			out = append(out, fmt.Sprintf("%s %s (has %s)", name, want, orNone(strings.Join(c.Tools[name], ", "))))
		}
	}
	return out
}

// String names what r requires: "8 CPU cores, 16 GB of memory, Xcode 16.4, node 20.19.4".
func (r *Requirements) String() string {
	if r == nil {
		return "nothing"
	}
	var out []string
	if r.CPUCores > 0 {
		out = append(out, fmt.Sprintf("%d CPU cores", r.CPUCores))
	}
	if r.MemoryGB > 0 {
		out = append(out, fmt.Sprintf("%d GB of memory", r.MemoryGB))
	}
	if r.Image != "" {
		out = append(out, "image "+r.Image)
	}
	if r.Xcode != "" {
		out = append(out, "Xcode "+r.Xcode)
	}
	for _, name := range slices.Sorted(maps.Keys(r.Tools)) {
		out = append(out, name+" "+r.Tools[name])
	}
	if len(out) == 0 {
		return "nothing"
	}
	return strings.Join(out, ", ")
}

// VersionMatches says whether an installed version satisfies a wanted
// one: the same version, or one the wanted version's leading components
// name ("16" matches "16.4"; "2" does not match "20.1").
func VersionMatches(want, have string) bool {
	return have != "" && (have == want || strings.HasPrefix(have, want+"."))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// CacheEntry is one dependency cache of a build: what it holds, under
// which key, at which paths of the VM.
type CacheEntry struct {
	// Name says what the cache holds: npm, yarn, pnpm, bun (the package
	// manager's store), node_modules (the installed tree: see
	// CacheNodeModules), pods, gradle or custom (eas.json cache.paths).
	Name string `json:"name"`
	// Key is the hex SHA-256 over the project name, the platform, Name,
	// the package manager and the hash of the files that decide the
	// cache's content (the lockfile, with package.json for node_modules;
	// Podfile.lock; the Gradle files) and eas.json cache.key. The project is part of the key, and the worker
	// files caches under the build's project too, so no project's build
	// can read another's cache.
	Key string `json:"key"`
	// Paths are the directories the cache restores and saves, absolute
	// in the VM, under the build user's home ("~/…"), under the VM's cache
	// directory (CacheDirVar + "/…") or relative to the app directory.
	Paths []string `json:"paths"`
}

// CacheDirVar starts the paths of the default caches: the VM's cache
// directory, in the build's work tree, where freeagent-vm points each tool
// by environment variable (npm_config_cache, YARN_CACHE_FOLDER, …) so that
// restoring a cache is extracting it there.
const CacheDirVar = "$FREEAGENT_CACHE_DIR"

// CacheNodeModules names the cache of the installed node_modules tree.
// Its key covers the lockfile and package.json, so the VM restores it in
// place of the install only under that exact key, and only when the
// archive's stamp (node and package-manager versions, OS and
// architecture) matches the VM.
const CacheNodeModules = "node_modules"

// BuildProfile is a resolved eas.json build profile. The JSON names are
// eas.json's, so the object marshals to what @expo/eas-json resolves.
// Booleans are pointers: an explicit false is part of the profile. The
// maps and slices are omitzero, not omitempty: an empty "env": {} or
// "buildArtifactPaths": [] is part of the profile too (nil is absent).
type BuildProfile struct {
	// Common keys.
	ResourceClass      string            `json:"resourceClass,omitempty"`
	Env                map[string]string `json:"env,omitzero"`
	Node               string            `json:"node,omitempty"`
	Corepack           *bool             `json:"corepack,omitempty"`
	Pnpm               string            `json:"pnpm,omitempty"`
	Bun                string            `json:"bun,omitempty"`
	Yarn               string            `json:"yarn,omitempty"`
	ExpoCli            string            `json:"expoCli,omitempty"`
	CredentialsSource  string            `json:"credentialsSource,omitempty"`
	Distribution       string            `json:"distribution,omitempty"`
	ReleaseChannel     string            `json:"releaseChannel,omitempty"`
	Channel            string            `json:"channel,omitempty"`
	DevelopmentClient  *bool             `json:"developmentClient,omitempty"`
	PrebuildCommand    string            `json:"prebuildCommand,omitempty"`
	AutoIncrement      *AutoIncrement    `json:"autoIncrement,omitempty"`
	BuildArtifactPaths []string          `json:"buildArtifactPaths,omitzero"`
	UploadSourceMaps   *bool             `json:"uploadSourceMaps,omitempty"`
	Cache              *BuildCache       `json:"cache,omitempty"`
	Config             string            `json:"config,omitempty"`
	WithoutCredentials *bool             `json:"withoutCredentials,omitempty"`
	Environment        string            `json:"environment,omitempty"`

	// Keys of a platform section.
	Image                  string `json:"image,omitempty"`
	ArtifactPath           string `json:"artifactPath,omitempty"`
	ApplicationArchivePath string `json:"applicationArchivePath,omitempty"`

	// Android.
	Ndk           string `json:"ndk,omitempty"`
	GradleCommand string `json:"gradleCommand,omitempty"`
	BuildType     string `json:"buildType,omitempty"`
	KeystoreName  string `json:"keystoreName,omitempty"`

	// iOS.
	Bundler                string `json:"bundler,omitempty"`
	Fastlane               string `json:"fastlane,omitempty"`
	Cocoapods              string `json:"cocoapods,omitempty"`
	EnterpriseProvisioning string `json:"enterpriseProvisioning,omitempty"`
	Simulator              *bool  `json:"simulator,omitempty"`
	Scheme                 string `json:"scheme,omitempty"`
	BuildConfiguration     string `json:"buildConfiguration,omitempty"`
}

// WithoutCredentialsSet is eas.json's withoutCredentials: true: the
// build resolves no credentials (eas-cli's rule) and signs as the project
// says.
func (p BuildProfile) WithoutCredentialsSet() bool {
	return p.WithoutCredentials != nil && *p.WithoutCredentials
}

// AutoIncrement is eas.json's autoIncrement: true, false, or one of
// "version", "versionCode", "buildNumber".
type AutoIncrement struct {
	Bool  *bool
	Field string
}

// MarshalJSON writes the boolean or the string.
func (a AutoIncrement) MarshalJSON() ([]byte, error) {
	if a.Bool != nil {
		return json.Marshal(*a.Bool)
	}
	return json.Marshal(a.Field)
}

// UnmarshalJSON reads a boolean or a string.
func (a *AutoIncrement) UnmarshalJSON(b []byte) error {
	var v bool
	if err := json.Unmarshal(b, &v); err == nil {
		*a = AutoIncrement{Bool: &v}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("autoIncrement must be a boolean or a string: %w", err)
	}
	*a = AutoIncrement{Field: s}
	return nil
}

// BuildCache is eas.json's cache object.
type BuildCache struct {
	Disabled          *bool    `json:"disabled,omitempty"`
	Key               string   `json:"key,omitempty"`
	CacheDefaultPaths *bool    `json:"cacheDefaultPaths,omitempty"`
	Paths             []string `json:"paths,omitzero"`
}

// App is the identity of the app, read from app.json or from the
// project's own `expo config --json` (app.config.js/ts).
type App struct {
	Name    string `json:"name"`
	Slug    string `json:"slug"`
	Version string `json:"version,omitempty"`
	Owner   string `json:"owner,omitempty"`
	// SDKVersion is expo.sdkVersion as @expo/config gives it: the config's
	// own, else the installed expo package's major version as "NN.0.0";
	// "" when neither is known.
	SDKVersion string `json:"sdk_version,omitempty"`
	// ReactNativeVersion is the version of the react-native package
	// installed for the app on the developer's machine, as eas-cli's build
	// metadata reports it; "" when none is installed.
	ReactNativeVersion string `json:"react_native_version,omitempty"`
	AndroidPackage     string `json:"android_package,omitempty"`
	AndroidVersionCode int    `json:"android_version_code,omitempty"`
	IOSBundleID        string `json:"ios_bundle_identifier,omitempty"`
	IOSBuildNumber     string `json:"ios_build_number,omitempty"`
	// IOSAppExtensions are extra.eas.build.experimental.ios.appExtensions:
	// a managed project's app extensions, which eas-cli signs with the app.
	IOSAppExtensions []IOSTarget `json:"ios_app_extensions,omitempty"`
	// ConfigSource says where these came from: "app.json", or
	// "expo config" for a dynamic app.config.js/ts.
	ConfigSource string `json:"config_source"`
}

// Package managers a project can use.
const (
	PackageManagerNPM  = "npm"
	PackageManagerYarn = "yarn"
	PackageManagerPNPM = "pnpm"
	PackageManagerBun  = "bun"
)

// Project is the layout of the uploaded source: the archive's root is the
// workspace root (the monorepo's root, or the app itself).
type Project struct {
	// AppDir is the app's directory relative to the archive root, with
	// forward slashes; "" when the app is the root.
	AppDir string `json:"app_dir"`
	// PackageManager is npm, yarn, pnpm or bun.
	PackageManager string `json:"package_manager"`
	// PackageManagerVersion is the version to use, when one is pinned
	// (package.json's packageManager, or the profile's yarn/pnpm/bun).
	PackageManagerVersion string `json:"package_manager_version,omitempty"`
	// Lockfile is the lockfile that decided PackageManager, relative to
	// the root ("" when there is none: the install cannot be frozen).
	Lockfile string `json:"lockfile,omitempty"`
	// YarnBerry is set for Yarn 2 and later (--immutable, not --frozen-lockfile).
	YarnBerry bool `json:"yarn_berry,omitempty"`
	// Corepack: run `corepack enable` before installing (the profile's
	// corepack, or a packageManager field).
	Corepack bool `json:"corepack,omitempty"`
	// Workspace: the root is a monorepo whose workspaces include AppDir.
	Workspace bool `json:"workspace,omitempty"`
}

// Workflows (BuildSpec.Workflow), with eas-cli's names.
const (
	// WorkflowGeneric: the app's own native project is uploaded and built.
	WorkflowGeneric = "generic"
	// WorkflowManaged: continuous native generation; expo prebuild writes
	// the native project in the VM, and no local one is used.
	WorkflowManaged = "managed"
)

// Android build types (eas.json buildType).
const (
	AndroidAPK       = "apk"
	AndroidAppBundle = "app-bundle"
)

// AndroidBuild is what the VM runs for an Android build.
type AndroidBuild struct {
	// GradleCommand is what follows ./gradlew ("':app:bundleRelease'").
	GradleCommand string `json:"gradle_command"`
	// BuildType is apk or app-bundle, "" with a custom gradleCommand.
	BuildType string `json:"build_type,omitempty"`
	// ApplicationArchivePaths are the globs (relative to the app) of
	// the application archive: applicationArchivePath, else
	// android/app/build/outputs/**/*.{apk,aab}.
	ApplicationArchivePaths []string `json:"application_archive_paths"`
	// BuildArtifactPaths are the profile's buildArtifactPaths, uploaded too.
	BuildArtifactPaths []string `json:"build_artifact_paths,omitempty"`
}

// iOS export methods (ExportOptions.plist's method), decided by the
// application target's provisioning profile as EAS does: one that
// provisions all devices is enterprise, one with devices is development
// when it allows debugging (get-task-allow) else ad-hoc, and one without
// devices is app-store.
const (
	ExportAppStore    = "app-store"
	ExportAdHoc       = "ad-hoc"
	ExportEnterprise  = "enterprise"
	ExportDevelopment = "development"
)

// IOSBuild is what the VM runs for an iOS build.
type IOSBuild struct {
	// Scheme is the profile's scheme, else the one EAS picks: the
	// sanitized app name before prebuild, else the Xcode project's only
	// shared scheme (of several, the first by name that is not tvOS).
	Scheme string `json:"scheme"`
	// BuildConfiguration is the profile's buildConfiguration, else the
	// scheme's archive configuration in a native project, else Debug for
	// a development client and Release otherwise.
	BuildConfiguration string `json:"build_configuration"`
	// Simulator: an iphonesimulator build of the .app, with no
	// credentials, packed as .tar.gz.
	Simulator bool `json:"simulator,omitempty"`
	// Targets are the targets that are signed: the application target
	// first, then the app extensions it embeds. Empty for a simulator
	// build.
	Targets []IOSTarget `json:"targets,omitempty"`
	// ApplicationArchivePaths are the globs (relative to the app) of the
	// application archive: applicationArchivePath, else ios/build/*.ipa
	// (simulator: ios/build/Build/Products/*simulator/*.app).
	ApplicationArchivePaths []string `json:"application_archive_paths"`
	// BuildArtifactPaths are the profile's buildArtifactPaths, uploaded too.
	BuildArtifactPaths []string `json:"build_artifact_paths,omitempty"`
}

// Where an iOS build leaves its application archive, relative to the app:
// EAS's default applicationArchivePath. The VM exports the .ipa to
// ios/build, and a simulator build's derived data is ios/build too.
const (
	IOSArchivePath          = "ios/build/*.ipa"
	IOSSimulatorArchivePath = "ios/build/Build/Products/*simulator/*.app"
)

// IOSTarget is a target of the app's Xcode project that is signed.
type IOSTarget struct {
	Name     string `json:"name"`
	BundleID string `json:"bundle_identifier"`
}

// Credentials sources.
const (
	CredentialsLocal  = "local"  // credentials.json, sent sealed with the submit
	CredentialsRemote = "remote" // kept on the farm for the project
	CredentialsNone   = "none"   // neither: Android signs with the debug key
)

// CredentialsInfo says which credentials sign the build, by fingerprint:
// never the secrets themselves.
type CredentialsInfo struct {
	Source  string        `json:"source"`
	Android *KeystoreInfo `json:"android,omitempty"`
	IOS     *IOSSigning   `json:"ios,omitempty"`
}

// IOSSigning identifies the signing of an iOS build, one entry per
// target in IOSBuild.Targets' order.
type IOSSigning struct {
	// ExportMethod is app-store, ad-hoc, enterprise or development: the
	// application target's profile type.
	ExportMethod string             `json:"export_method"`
	TeamID       string             `json:"team_id"`
	Targets      []IOSTargetSigning `json:"targets"`
}

// IOSTargetSigning identifies one target's provisioning profile and
// distribution certificate.
type IOSTargetSigning struct {
	Target      string    `json:"target"`
	BundleID    string    `json:"bundle_identifier"`
	ProfileUUID string    `json:"profile_uuid"`
	ProfileName string    `json:"profile_name"`
	ProfileType string    `json:"profile_type"` // an export method
	Expires     time.Time `json:"profile_expires"`
	// CertificateSHA1 is the uppercase hex SHA-1 of the distribution
	// certificate (DER), as Keychain Access and codesign show it.
	CertificateSHA1 string `json:"certificate_sha1"`
	// CertificateName is the certificate's common name ("Apple
	// Distribution: Example Ltd (TEAM123456)").
	CertificateName string `json:"certificate_name"`
}

// KeystoreInfo identifies an Android upload keystore.
type KeystoreInfo struct {
	// Name is the remote keystore's name on the farm ("" for local).
	Name     string `json:"name,omitempty"`
	Type     string `json:"type"` // JKS or PKCS12
	KeyAlias string `json:"key_alias"`
	// CertificateSHA256 is the lowercase hex SHA-256 of the signing key's
	// certificate (DER): the artifact must be signed with this one.
	CertificateSHA256 string `json:"certificate_sha256"`
	// Subject is the certificate's subject, for people.
	Subject string `json:"subject,omitempty"`
}

// AndroidKeystore is the secret part of an Android credential: sealed at
// rest, sent only to the build's VM.
type AndroidKeystore struct {
	Keystore         []byte `json:"keystore"`
	KeystorePassword string `json:"keystore_password"`
	KeyAlias         string `json:"key_alias"`
	KeyPassword      string `json:"key_password"`
}

// BuildCredentials is the sealed "credentials" file of a submit and the
// answer of GET /api/builds/:id/credentials (X-VM-Token).
type BuildCredentials struct {
	Android *AndroidKeystore `json:"android,omitempty"`
	// IOS maps a target's name to its credentials.
	IOS map[string]IOSTargetCredentials `json:"ios,omitempty"`
}

// IOSTargetCredentials is the secret part of one target's iOS
// credentials: sealed at rest, sent only to the build's VM.
type IOSTargetCredentials struct {
	ProvisioningProfile []byte `json:"provisioning_profile"` // the .mobileprovision
	Certificate         []byte `json:"certificate"`          // the distribution certificate's .p12
	CertificatePassword string `json:"certificate_password"`
}

// Variable visibilities (as EAS names them).
const (
	VisibilityPlaintext = "plaintext" // shown everywhere
	VisibilitySensitive = "sensitive" // shown to developers, masked in build logs
	VisibilitySecret    = "secret"    // never shown after it is set; masked in build logs
)

// MinSecretLength is the fewest bytes a sensitive or secret variable may
// hold (GitLab asks 8 characters of a masked variable too): the build log
// masks such values, and a shorter one would match ordinary text, so that
// where the log was blanked would spell it out.
const MinSecretLength = 8

// PublicPrefix marks the variables Metro inlines into the app's
// JavaScript bundle wherever the code reads them.
const PublicPrefix = "EXPO_PUBLIC_"

// CheckPublicSecret refuses a secret variable named EXPO_PUBLIC_…: the
// app's bundle, which anyone with the app can read, would carry its value.
// The controller and expo-build give the same answer.
func CheckPublicSecret(name, visibility string) error {
	if visibility != VisibilitySecret || !strings.HasPrefix(name, PublicPrefix) {
		return nil
	}
	return fmt.Errorf("%s cannot be secret: Metro inlines every %s variable the app's code reads into its JavaScript bundle, which anyone with the app can read; use --visibility sensitive (masked in build logs) or plaintext, or a name without %s if the app must not see it",
		name, PublicPrefix, PublicPrefix)
}

// CheckSecretLength refuses a sensitive or secret variable value (a file
// variable's content) shorter than MinSecretLength, saying why and what
// to do; the controller and expo-build give the same answer.
func CheckSecretLength(name, visibility string, value []byte) error {
	if visibility == VisibilityPlaintext || len(value) >= MinSecretLength {
		return nil
	}
	return fmt.Errorf("the value of %s is %d bytes long; a %s variable needs at least %d, since the build log masks it and a shorter value cannot be masked without blanking ordinary text that gives it away: use a longer value, or --visibility plaintext if it is no secret",
		name, len(value), visibility, MinSecretLength)
}

// Variable types.
const (
	VariableString = "string"
	VariableFile   = "file" // the build gets a file; the variable holds its path
)

// The standard environments; a profile may name any other.
const (
	EnvironmentDevelopment = "development"
	EnvironmentPreview     = "preview"
	EnvironmentProduction  = "production"
)

// Variable is one environment variable of a project in one environment.
// Value is empty in lists for secret variables; for a file variable it is
// the file's content, base64-encoded.
type Variable struct {
	Project     string    `json:"project"`
	Environment string    `json:"environment"`
	Name        string    `json:"name"`
	Value       string    `json:"value,omitempty"`
	Visibility  string    `json:"visibility"`
	Type        string    `json:"type"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// VariableList answers GET /api/projects/:project/env.
type VariableList struct {
	Variables []Variable `json:"variables"`
}

// BuildJob answers GET /api/builds/:id/spec (X-VM-Token): the build's spec
// and its project's variables for the spec's environment, values included.
// Spec is nil for a build submitted without one (the raw API).
type BuildJob struct {
	Spec      *BuildSpec `json:"spec"`
	Variables []Variable `json:"variables"`
}

// Credential is a credential kept on the farm for a project (expo-build
// credentials set), shown by fingerprint only.
type Credential struct {
	Project   string        `json:"project"`
	Platform  string        `json:"platform"`
	Name      string        `json:"name"`
	Android   *KeystoreInfo `json:"android,omitempty"`
	CreatedAt time.Time     `json:"created_at"`
}

// CredentialList answers GET /api/projects/:project/credentials.
type CredentialList struct {
	Credentials []Credential `json:"credentials"`
}

// BuildProject is the farm project the spec's build belongs to:
// ProjectName, else the app's slug. Every reader of a spec's project uses
// it, so the CLI's decision (ProjectName) is the only one.
func (s *BuildSpec) BuildProject() string {
	if s.ProjectName != "" {
		return s.ProjectName
	}
	return s.App.Slug
}
