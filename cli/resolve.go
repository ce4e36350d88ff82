package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/cli/appconfig"
	"github.com/freeagent-build/freeagent/cli/credentials"
	"github.com/freeagent-build/freeagent/cli/easjson"
	proj "github.com/freeagent-build/freeagent/cli/project"
	"github.com/freeagent-build/freeagent/internal/cachekey"
)

// resolved is a build decided on the developer's machine: what the
// controller stores and the VM applies, the credentials that travel
// sealed beside it, and what the archive must hold.
type resolved struct {
	spec        api.BuildSpec
	credentials *api.BuildCredentials
	// certs is the iOS certs zip of --p12/--certs, sent beside it.
	certs []byte
	// uploadRoot is the directory packed (the workspace root).
	uploadRoot string
	// exclude are paths relative to uploadRoot that must never be
	// uploaded (credentials.json and the files it names).
	exclude  []string
	warnings []string
	// bump is the local version source's autoIncrement, made before the
	// upload; nil when nothing is bumped.
	bump *versionBump
	// autoSubmit is the submission queued with the build (--auto-submit).
	autoSubmit *api.SubmissionRequest
}

// farm is what resolving a build asks the controller: a project's
// credentials, its variables of one environment, and what the online
// workers of the pools it may use offer.
type farm struct {
	credentials func(ctx context.Context, project string) ([]api.Credential, error)
	variables   func(ctx context.Context, project, environment string) ([]api.Variable, error)
	offers      func(ctx context.Context, project string) ([]api.Offer, error)
}

// resolveBuild decides everything about one build of the app in appRoot:
// the eas.json profile for the platform, the app's identity, the farm
// project (projectName, from --project, else the app's slug: this is the
// one place that decides, recorded as the spec's ProjectName), the layout
// and package manager, the credentials. Every problem is an error before
// anything is uploaded.
func resolveBuild(ctx context.Context, appRoot, platform, profileName, projectName, resourceClass string, farm farm) (*resolved, error) {
	r := &resolved{}
	profile, versionSource, err := resolveProfile(appRoot, platform, profileName, &r.warnings)
	if err != nil {
		return nil, err
	}
	if resourceClass != "" { // eas build's deprecated --resource-class, with eas-cli's words
		if profile.ResourceClass != "" && profile.ResourceClass != resourceClass {
			r.warnings = append(r.warnings, fmt.Sprintf("Build profile specifies the %q resource class but you passed %q to --resource-class. Using %q as the override.",
				profile.ResourceClass, resourceClass, resourceClass))
		}
		profile.ResourceClass = resourceClass
	}
	if profileName == "" {
		profileName = "production"
	}
	if err := checkApplicable(profile, profileName, platform, &r.warnings); err != nil {
		return nil, err
	}
	layout, err := proj.Detect(appRoot, proj.Options{Corepack: profile.Corepack, Yarn: profile.Yarn, Pnpm: profile.Pnpm, Bun: profile.Bun})
	if err != nil {
		return nil, &cliError{code: ExitUsage, msg: "decide the package manager", err: err}
	}
	r.uploadRoot = layout.WorkspaceRoot
	spec := api.BuildSpec{
		Version: api.SpecVersion, Platform: platform, ProfileName: profileName, Profile: profile,
		Environment: easjson.Environment(profile), Project: layout.Project,
	}
	if spec.Workflow, err = resolveWorkflow(layout.WorkspaceRoot, layout.Project, platform); err != nil {
		return nil, &cliError{code: ExitUsage, msg: "decide whether the app is bare or managed", err: err}
	}
	if platform == api.PlatformAndroid {
		spec.Android = easjson.Android(profile)
	}

	// The app config sees the profile's env, as EAS evaluates it.
	env := append(os.Environ(), "EAS_BUILD_PROFILE="+profileName, "EAS_BUILD_PLATFORM="+platform)
	profileEnv := make([]string, 0, len(profile.Env))
	for k, v := range profile.Env {
		profileEnv = append(profileEnv, k+"="+v)
	}
	if spec.App, err = readAppConfig(ctx, appRoot, slices.Concat(env, profileEnv)); err != nil {
		return nil, err
	}
	// A dynamic config also sees the farm's plaintext and sensitive
	// variables of the build's environment, under the profile's env (as
	// eas-cli evaluates it; secret ones never leave the farm). Its slug
	// names the project, so it is read once more with them.
	if spec.App.ConfigSource == appconfig.SourceExpoConfig && cmp.Or(projectName, spec.App.Slug) != "" {
		vars, err := farm.variables(ctx, cmp.Or(projectName, spec.App.Slug), spec.Environment)
		if err != nil {
			return nil, err
		}
		var farmEnv, names []string
		for _, v := range vars {
			if v.Visibility != api.VisibilitySecret && v.Type == api.VariableString {
				farmEnv, names = append(farmEnv, v.Name+"="+v.Value), append(names, v.Name)
			}
		}
		if len(farmEnv) > 0 {
			r.warnings = append(r.warnings, fmt.Sprintf("the app config is evaluated with the farm's variables of %q: %s", spec.Environment, strings.Join(names, ", ")))
			if spec.App, err = readAppConfig(ctx, appRoot, slices.Concat(env, farmEnv, profileEnv)); err != nil {
				return nil, err
			}
		}
	}
	if spec.App.Slug == "" {
		return nil, usageErr("the app config has no slug: set expo.slug in app.json (it names the project whose variables and credentials the build uses)")
	}
	spec.ProjectName = cmp.Or(projectName, spec.App.Slug)
	// What a worker must offer, and whether an online one does, asking
	// the controller at most once.
	var offered []api.Offer
	offers := func(ctx context.Context) ([]api.Offer, error) {
		if offered == nil {
			list, err := farm.offers(ctx, spec.BuildProject())
			if err != nil {
				return nil, err
			}
			offered = append([]api.Offer{}, list...)
		}
		return offered, nil
	}
	if spec.Requires, err = requirements(ctx, profile, platform, offers); err != nil {
		return nil, err
	}
	if err := checkOffered(ctx, spec, offers); err != nil {
		return nil, err
	}
	custom := hasCustomBuild(appRoot)
	if platform == api.PlatformAndroid && spec.App.AndroidPackage == "" && spec.Workflow == api.WorkflowManaged && !custom {
		return nil, usageErr("the app config has no android.package: set expo.android.package in app.json (e.g. com.example.app); expo prebuild needs it")
	}

	// A custom build decides its own iOS build, but local credentials are
	// checked against the app's targets and delivered all the same.
	if platform == api.PlatformIOS && (!custom || profile.CredentialsSource == api.CredentialsLocal) {
		if spec.IOS, err = resolveIOS(appRoot, spec.Workflow, profile, spec.App); err != nil {
			return nil, err
		}
	}

	// A path relative to the app, as a path in the archive.
	toUpload := func(rel string) string { return path.Join(layout.Project.AppDir, rel) }

	if err := r.resolveCredentials(ctx, &spec, appRoot, farm, toUpload); err != nil {
		return nil, err
	}
	if spec.Versions, r.bump, err = decideVersions(appRoot, versionSource, &spec, &r.warnings); err != nil {
		return nil, err
	}
	spec.GitCommit = gitCommit(ctx, appRoot)
	if spec.Caches, err = cachekey.Entries(spec, cachekey.Dir(layout.WorkspaceRoot)); err != nil {
		return nil, err
	}
	r.spec = spec
	return r, nil
}

// readAppConfig reads the app config (appconfig bounds the one slow
// part, expo config).
func readAppConfig(ctx context.Context, appRoot string, env []string) (api.App, error) {
	app, err := appconfig.Read(ctx, appRoot, env)
	if err != nil {
		return api.App{}, &cliError{code: ExitUsage, msg: "read the app config", err: err}
	}
	return app, nil
}

// resolveProfile loads eas.json and resolves the profile; versionSource is
// its cli.appVersionSource. A project without eas.json builds with EAS's
// defaults, as an empty profile.
func resolveProfile(appRoot, platform, name string, warnings *[]string) (profile api.BuildProfile, versionSource string, err error) {
	f, err := easjson.Load(appRoot)
	if errors.Is(err, easjson.ErrMissing) {
		if name != "" {
			return api.BuildProfile{}, "", usageErr("--profile %s: there is no eas.json in %s to define it", name, appRoot)
		}
		*warnings = append(*warnings, "no eas.json: building with EAS's defaults (store distribution, remote credentials)")
		f, err = easjson.Parse([]byte(`{"build":{"production":{}}}`))
	}
	if err != nil {
		return api.BuildProfile{}, "", &cliError{code: ExitUsage, msg: "eas.json", err: err}
	}
	p, err := f.Resolve(platform, name)
	if err != nil {
		return api.BuildProfile{}, "", &cliError{code: ExitUsage, msg: "eas.json", err: err}
	}
	return p, f.AppVersionSource(), nil
}

// checkApplicable refuses the profile keys this farm cannot honour, each
// with why, and warns about those that change nothing here.
func checkApplicable(p api.BuildProfile, profileName, platform string, warnings *[]string) error {
	var refused []string
	refuse := func(key, why string) { refused = append(refused, fmt.Sprintf("%s: %s", key, why)) }
	if p.ExpoCli != "" {
		*warnings = append(*warnings, fmt.Sprintf("expoCli %s: the project's own Expo CLI (npx expo, from its expo package) runs prebuild, as EAS does since SDK 46; the global expo-cli is not installed", p.ExpoCli))
	}
	if p.Config != "" {
		refuse("config", "custom build YAML (.eas/build) is not supported; define a \"freeagent:build\" script in package.json instead")
	}
	if p.WithoutCredentialsSet() && platform == api.PlatformAndroid {
		// Honoured: the credentials step is skipped (debug signing).
		*warnings = append(*warnings, "withoutCredentials: the build is signed as the project's Gradle files say (the debug key in Expo's template)")
	}
	if p.ReleaseChannel != "" {
		refuse("releaseChannel", "classic updates' release channels ended with SDK 49; use channel (EAS Update)")
	}
	if p.UploadSourceMaps != nil && *p.UploadSourceMaps {
		*warnings = append(*warnings, "uploadSourceMaps: source maps are not uploaded by this farm; add them to buildArtifactPaths to keep them")
	}
	if len(refused) > 0 {
		slices.Sort(refused)
		return usageErr("eas.json: build profile %q has settings this farm cannot apply (remove them from the profile or the profiles it extends):\n  - %s", profileName, strings.Join(refused, "\n  - "))
	}
	return nil
}

// resolveCredentials decides which credentials sign the build: the local
// credentials.json, the farm's for the project, or none (debug signing,
// with a warning: never refused for that alone).
func (r *resolved) resolveCredentials(ctx context.Context, spec *api.BuildSpec, appRoot string, farm farm, toUpload func(string) string) error {
	spec.Credentials = api.CredentialsInfo{Source: api.CredentialsNone}
	// credentials.json never travels in the archive, whichever source is used.
	local, err := credentials.Load(appRoot)
	switch {
	case err == nil:
		for _, p := range local.Paths() {
			if rel := toUpload(p); rel != ".." && !strings.HasPrefix(rel, "../") {
				r.exclude = append(r.exclude, rel)
			}
		}
	case errors.Is(err, credentials.ErrNoFile):
		local = nil
	case spec.Profile.CredentialsSource == api.CredentialsLocal:
		return &cliError{code: ExitUsage, err: err}
	default:
		r.exclude = append(r.exclude, toUpload(credentials.FileName))
		r.warnings = append(r.warnings, fmt.Sprintf("credentials.json is not used (credentialsSource is %q) and could not be read: %v", spec.Profile.CredentialsSource, err))
		local = nil
	}
	if spec.Platform == api.PlatformIOS {
		return r.resolveIOSCredentials(spec, appRoot, local)
	}
	if spec.Profile.WithoutCredentialsSet() {
		return nil
	}
	noneHint := "the build is signed with the debug key; for a store build add credentials.json (android.keystore) with credentialsSource \"local\", or run `expo-build credentials set --platform android`"
	if spec.Profile.CredentialsSource == api.CredentialsLocal {
		if local == nil || !local.HasAndroid() {
			return usageErr("eas.json: credentialsSource is \"local\" but %s has no credentials.json with android.keystore (https://docs.expo.dev/app-signing/local-credentials/)", appRoot)
		}
		ks, info, err := local.Android()
		if err != nil {
			return &cliError{code: ExitUsage, err: err}
		}
		spec.Credentials = api.CredentialsInfo{Source: api.CredentialsLocal, Android: &info}
		r.credentials = &api.BuildCredentials{Android: &ks}
		return nil
	}
	// Remote: the farm's keystore for the project.
	name := spec.Profile.KeystoreName
	if name == "" {
		name = "default"
	}
	list, err := farm.credentials(ctx, spec.BuildProject())
	if err != nil {
		return err
	}
	for _, c := range list {
		if c.Platform == api.PlatformAndroid && c.Name == name && c.Android != nil {
			info := *c.Android
			info.Name = name
			spec.Credentials = api.CredentialsInfo{Source: api.CredentialsRemote, Android: &info}
			return nil
		}
	}
	if spec.Profile.KeystoreName != "" {
		return usageErr("eas.json: keystoreName %q: the farm has no Android keystore of that name for project %q; add it with `expo-build credentials set --platform android --name %s`", name, spec.BuildProject(), name)
	}
	r.warnings = append(r.warnings, fmt.Sprintf("no Android keystore on the farm for project %q: %s", spec.BuildProject(), noneHint))
	return nil
}

// hasCustomBuild reports whether the app's package.json defines the
// script that replaces the default pipeline (which then needs no
// android.package, and no iOS decisions: expo prebuild does not run).
func hasCustomBuild(appRoot string) bool {
	b, err := os.ReadFile(filepath.Join(appRoot, "package.json"))
	if err != nil {
		return false
	}
	var pkg struct {
		Scripts map[string]any `json:"scripts"`
	}
	if json.Unmarshal(b, &pkg) != nil {
		return false
	}
	script, _ := pkg.Scripts[api.CustomBuildScript].(string)
	return script != "" // a non-empty command, as freeagent-vm decides it
}

// gitCommit is the project's HEAD commit, or "" outside a git checkout.
func gitCommit(ctx context.Context, dir string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "--verify", "-q", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
