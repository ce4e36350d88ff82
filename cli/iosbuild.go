package cli

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/cli/credentials"
	"github.com/freeagent-build/freeagent/internal/xcode"
)

// resolveIOS decides an iOS build as eas-cli does: in a bare app (the
// generic workflow: its own ios/ is uploaded) from the Xcode project (the
// scheme, its archive configuration, its application target and the
// extensions it embeds), in a managed one from the app config (the
// sanitized app name, the bundle identifier and
// extra.eas.build.experimental.ios.appExtensions), which expo prebuild
// turns into the same project in the VM.
func resolveIOS(appRoot, workflow string, p api.BuildProfile, app api.App) (*api.IOSBuild, error) {
	b := &api.IOSBuild{Simulator: p.Simulator != nil && *p.Simulator, BuildArtifactPaths: p.BuildArtifactPaths}
	defaultConfig := "Release"
	if p.DevelopmentClient != nil && *p.DevelopmentClient {
		defaultConfig = "Debug"
	}
	var targets []api.IOSTarget
	if workflow == api.WorkflowGeneric {
		iosDir := filepath.Join(appRoot, "ios")
		xcodeproj, err := xcode.FindProject(iosDir)
		if err != nil {
			return nil, usageErr("ios/: %v", err)
		}
		schemes, err := xcode.Schemes(xcodeproj)
		if err != nil {
			return nil, usageErr("ios/: %v", err)
		}
		switch {
		case p.Scheme == "":
			if b.Scheme, err = xcode.PickScheme(schemes); err != nil {
				return nil, usageErr("ios/%s: %v", filepath.Base(xcodeproj), err)
			}
		case !slices.Contains(schemes, p.Scheme):
			return nil, usageErr("eas.json: ios.scheme %q is not a shared scheme of ios/%s (it has: %s); share it in Xcode (Manage Schemes → Shared) or fix the name",
				p.Scheme, filepath.Base(xcodeproj), strings.Join(schemes, ", "))
		default:
			b.Scheme = p.Scheme
		}
		scheme, err := xcode.LoadScheme(xcodeproj, b.Scheme)
		if err != nil {
			return nil, usageErr("ios/: %v", err)
		}
		b.BuildConfiguration = cmp.Or(p.BuildConfiguration, scheme.ArchiveConfiguration, defaultConfig)
		proj, err := xcode.LoadProject(xcodeproj)
		if err != nil {
			return nil, usageErr("ios/: %v", err)
		}
		appTargets, err := xcode.AppTargets(proj, scheme)
		if err != nil {
			return nil, usageErr("ios/%s: scheme %s: %v", filepath.Base(xcodeproj), b.Scheme, err)
		}
		for _, t := range appTargets {
			id, err := proj.BundleID(t.Name, b.BuildConfiguration)
			if err != nil {
				return nil, usageErr("ios/%s: %v", filepath.Base(xcodeproj), err)
			}
			targets = append(targets, api.IOSTarget{Name: t.Name, BundleID: id})
		}
	} else {
		name := xcode.SanitizedName(app.Name)
		if name == "" {
			return nil, usageErr("the app config's name %q has no letters or digits: expo prebuild names the Xcode target after it; give expo.name some", app.Name)
		}
		if app.IOSBundleID == "" {
			return nil, usageErr("the app config has no ios.bundleIdentifier: set expo.ios.bundleIdentifier in app.json (e.g. com.example.app); expo prebuild and signing need it")
		}
		b.Scheme = cmp.Or(p.Scheme, name)
		b.BuildConfiguration = cmp.Or(p.BuildConfiguration, defaultConfig)
		targets = append([]api.IOSTarget{{Name: name, BundleID: app.IOSBundleID}}, app.IOSAppExtensions...)
	}
	if !b.Simulator {
		b.Targets = targets
	}
	switch archive := cmp.Or(p.ApplicationArchivePath, p.ArtifactPath); {
	case archive != "":
		b.ApplicationArchivePaths = []string{archive}
	case b.Simulator:
		b.ApplicationArchivePaths = []string{api.IOSSimulatorArchivePath}
	default:
		b.ApplicationArchivePaths = []string{api.IOSArchivePath}
	}
	return b, nil
}

// describeTargets lists targets for messages.
func describeTargets(ts []api.IOSTarget) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = fmt.Sprintf("%s (%s)", t.Name, t.BundleID)
	}
	return strings.Join(parts, ", ")
}

// resolveIOSCredentials reads credentials.json's ios section for a
// device build with credentialsSource local, validated for the build's
// targets and distribution. Other sources leave the signing to the
// submit's --p12/--certs (see requireIOSSigning).
func (r *resolved) resolveIOSCredentials(spec *api.BuildSpec, appRoot string, local *credentials.File) error {
	b := spec.IOS
	// As eas-cli: a simulator build or withoutCredentials needs none.
	if b == nil || b.Simulator || spec.Profile.WithoutCredentialsSet() || spec.Profile.CredentialsSource != api.CredentialsLocal {
		return nil
	}
	if local == nil || len(local.IOS()) == 0 {
		return usageErr("eas.json: credentialsSource is \"local\" but %s has no credentials.json with an ios section for %s (https://docs.expo.dev/app-signing/local-credentials/)", appRoot, describeTargets(b.Targets))
	}
	creds, info, err := local.IOSCredentials(b.Targets, spec.Profile.Distribution, spec.Profile.EnterpriseProvisioning, time.Now())
	if err != nil {
		return &cliError{code: ExitUsage, err: err}
	}
	spec.Credentials = api.CredentialsInfo{Source: api.CredentialsLocal, IOS: info}
	r.credentials = &api.BuildCredentials{IOS: creds}
	return nil
}

// requireIOSSigning checks that a device build of iOS has exactly one
// source of signing: credentials.json (local) or the submit's certs zip.
func requireIOSSigning(r *resolved, certs []byte) error {
	b := r.spec.IOS
	switch {
	case r.credentials != nil && certs != nil:
		return usageErr("both credentials.json (credentialsSource \"local\") and --p12/--certs give iOS signing: use one of them")
	case b == nil || b.Simulator || r.credentials != nil || certs != nil || r.spec.Profile.WithoutCredentialsSet():
		return nil
	}
	return usageErr("build profile %q builds iOS for devices with credentialsSource %q, but this farm keeps no iOS credentials yet: add credentials.json (ios.provisioningProfilePath and ios.distributionCertificate, https://docs.expo.dev/app-signing/local-credentials/) with \"credentialsSource\": \"local\" in eas.json, pass --p12 with --provisioning-profile, or build for the simulator (\"ios\": {\"simulator\": true})",
		r.spec.ProfileName, r.spec.Profile.CredentialsSource)
}
