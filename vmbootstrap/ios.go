package vmbootstrap

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/provisioning"
	"github.com/freeagent-build/freeagent/internal/vmshare"
	"github.com/freeagent-build/freeagent/internal/xcode"
)

// iosBuildDir is where the build exports the .ipa and keeps a simulator
// build's derived data, relative to the app: where api.IOSArchivePath
// and api.IOSSimulatorArchivePath look.
const iosBuildDir = "ios/build"

// ios runs EAS's iOS build: install, prebuild, pod install, then either a
// simulator build of the .app, or per-target signing in the Xcode project,
// xcodebuild archive and -exportArchive with the profile's export method.
// Signing is never passed as global xcodebuild settings: those would apply
// to the CocoaPods targets too, which Xcode refuses.
func (p *pipeline) ios(ctx context.Context) ([]string, error) {
	b := p.spec.IOS
	if b == nil {
		return nil, fmt.Errorf("%w: the build spec has no ios section", errConfig)
	}
	if !b.Simulator && p.signing == nil && !p.spec.Profile.WithoutCredentialsSet() {
		return nil, fmt.Errorf("%w: a device build of iOS needs credentials: add credentials.json (ios) with credentialsSource \"local\" in eas.json, build for the simulator (\"ios\": {\"simulator\": true}), or define a %q script in package.json",
			errConfig, CustomBuildScript)
	}
	if err := p.install(ctx); err != nil {
		return nil, err
	}
	versionsSet, err := p.prebuild(ctx, "ios")
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(p.root, "ios")
	if fileExists(filepath.Join(dir, "Podfile")) {
		p.phase(vmshare.PhasePrebuild, 45, "pod install")
		if err := p.runner.run(ctx, p.step(dir, "pod", "install")); err != nil {
			return nil, err
		}
	}
	// EAS's iOS order: the hook sees the installed Pods, and the
	// expo-updates configuration comes after it.
	if err := p.hook(ctx, HookPostInstall); err != nil {
		return nil, err
	}
	if ch := p.spec.Profile.Channel; ch != "" {
		if err := p.iosChannel(dir, ch); err != nil {
			return nil, err
		}
	}
	workspace, err := xcode.FindWorkspace(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errConfig, err)
	}
	if workspace == "" {
		return nil, fmt.Errorf("%w: no .xcworkspace in ios/ after pod install (is there a Podfile?)", errConfig)
	}
	scheme := b.Scheme
	if scheme == "" { // a raw API submit: Expo names the workspace and the scheme after the app
		scheme = strings.TrimSuffix(filepath.Base(workspace), ".xcworkspace")
	}
	config := b.BuildConfiguration
	if config == "" {
		config = "Release"
	}
	if !versionsSet {
		if err := p.iosVersionsInNative(dir, scheme, config); err != nil {
			return nil, err
		}
	}
	build := p.iosDevice
	if b.Simulator {
		build = p.iosSimulator
	}
	if err := build(ctx, dir, workspace, scheme, config); err != nil {
		return nil, err
	}
	if err := p.hook(ctx, HookPreUploadArtifacts); err != nil {
		return nil, err
	}
	return p.iosArtifacts()
}

// iosSimulator builds the .app for the simulator, as EAS does.
func (p *pipeline) iosSimulator(ctx context.Context, dir, workspace, scheme, config string) error {
	p.phase(vmshare.PhaseBuild, 50, "xcodebuild build (simulator)")
	if err := p.runner.run(ctx, p.step(dir, "xcodebuild", "build",
		"-workspace", workspace, "-scheme", scheme, "-configuration", config,
		"-destination", "generic/platform=iOS Simulator",
		"-derivedDataPath", filepath.Join(p.root, filepath.FromSlash(iosBuildDir)))); err != nil {
		return err
	}
	return nil
}

// iosDevice signs each target in the project, archives and exports.
//
// With eas.json withoutCredentials (and no credentials) nothing is signed
// by the farm, as eas-cli then resolves no credentials: the archive and its
// export keep the project's own signing settings (what its hooks set up),
// exported for the distribution (app-store, or ad-hoc for internal).
func (p *pipeline) iosDevice(ctx context.Context, dir, workspace, scheme, config string) error {
	var targets []signedTarget
	method, team := api.ExportAppStore, ""
	if p.spec.Profile.Distribution == "internal" {
		method = api.ExportAdHoc
	}
	if p.signing != nil {
		var err error
		if targets, err = p.configureSigning(dir, scheme, config); err != nil {
			return err
		}
		method, team = targets[0].profile.Type, targets[0].profile.TeamID
	} else {
		fmt.Fprintf(p.runner.out, "\n▸ withoutCredentials: the archive is signed as the Xcode project says\n")
	}
	if info := p.spec.Credentials.IOS; info != nil && info.ExportMethod != "" {
		method = info.ExportMethod
	}
	archive := filepath.Join(p.workDir, scheme+".xcarchive")
	p.phase(vmshare.PhaseBuild, 50, "xcodebuild archive")
	if err := p.runner.run(ctx, p.step(dir, "xcodebuild", "archive",
		"-workspace", workspace, "-scheme", scheme, "-configuration", config,
		"-destination", "generic/platform=iOS", "-archivePath", archive)); err != nil {
		return err
	}
	profiles := map[string]string{}
	for _, t := range targets {
		profiles[t.bundleID] = t.profile.UUID
	}
	options := filepath.Join(p.workDir, "ExportOptions.plist")
	if err := os.WriteFile(options, exportOptionsPlist(method, team, profiles), 0o644); err != nil {
		return fmt.Errorf("write ExportOptions.plist: %w", err)
	}
	p.phase(vmshare.PhaseBuild, 80, "xcodebuild -exportArchive")
	if err := p.runner.run(ctx, p.step(dir, "xcodebuild", "-exportArchive", "-archivePath", archive,
		"-exportPath", filepath.Join(p.root, filepath.FromSlash(iosBuildDir)), "-exportOptionsPlist", options)); err != nil {
		return err
	}
	return nil
}

// signedTarget is a target of the Xcode project with the profile that signs it.
type signedTarget struct {
	name, bundleID string
	profile        provisioning.Profile
}

// configureSigning gives each signed target manual signing with its own
// profile in the Xcode project, for the build configuration only, as EAS
// does. The application target comes first.
func (p *pipeline) configureSigning(dir, scheme, config string) ([]signedTarget, error) {
	xcodeproj, err := xcode.FindProject(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errConfig, err)
	}
	proj, err := xcode.LoadProject(xcodeproj)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errConfig, err)
	}
	names, err := p.signedTargetNames(proj, xcodeproj, scheme)
	if err != nil {
		return nil, err
	}
	var out []signedTarget
	for _, name := range names {
		bundleID, err := proj.BundleID(name, config)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errConfig, err)
		}
		prof, err := p.signing.profileFor(name, bundleID)
		if err != nil {
			return nil, err
		}
		if !prof.Matches(bundleID) {
			return nil, fmt.Errorf("%w: target %q has bundle identifier %s in the Xcode project, but its provisioning profile %q is for %s; make the app config's bundle identifier and the profile agree",
				errConfig, name, bundleID, prof.Name, prof.BundleID)
		}
		identity := "iPhone Distribution" // what EAS sets; Xcode matches Apple Distribution certificates with it
		if prof.Type == api.ExportDevelopment {
			identity = p.certificateName(name)
		}
		if err := proj.SetManualSigning(name, config, xcode.Signing{TeamID: prof.TeamID, ProfileName: prof.Name, Identity: identity}); err != nil {
			return nil, fmt.Errorf("%w: %v", errConfig, err)
		}
		fmt.Fprintf(p.runner.out, "▸ target %s (%s, %s): provisioning profile %q (%s, team %s)\n", name, bundleID, config, prof.Name, prof.Type, prof.TeamID)
		out = append(out, signedTarget{name: name, bundleID: bundleID, profile: prof})
	}
	if err := proj.Save(xcodeproj); err != nil {
		return nil, fmt.Errorf("save the Xcode project's signing settings: %w", err)
	}
	return out, nil
}

// signedTargetNames are the targets to sign: the spec's, else (a raw API
// submit) the scheme's application target and the extensions it embeds.
func (p *pipeline) signedTargetNames(proj *xcode.Project, xcodeproj, scheme string) ([]string, error) {
	if b := p.spec.IOS; len(b.Targets) > 0 {
		names := make([]string, len(b.Targets))
		for i, t := range b.Targets {
			names[i] = t.Name
		}
		return names, nil
	}
	s, err := xcode.LoadScheme(xcodeproj, scheme)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errConfig, err)
	}
	targets, err := xcode.AppTargets(proj, s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errConfig, err)
	}
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Name
	}
	return names, nil
}

// iosArtifacts collects the application archives (a directory, such as a
// simulator .app, is packed as .tar.gz) and the buildArtifactPaths.
func (p *pipeline) iosArtifacts() ([]string, error) {
	b := p.spec.IOS
	patterns := b.ApplicationArchivePaths
	found, err := globPaths(p.root, patterns, true)
	if err != nil {
		return nil, fmt.Errorf("%w: applicationArchivePath: %v", errConfig, err)
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("%w: nothing matches %s in the app's directory", ErrNoArtifacts, strings.Join(patterns, ", "))
	}
	var files []string
	for _, f := range found {
		st, err := os.Stat(f)
		if err != nil {
			return nil, fmt.Errorf("look at the artifact %s: %w", relOrDot(p.root, f), err)
		}
		if !st.IsDir() {
			files = append(files, f)
			continue
		}
		packed := filepath.Join(p.workDir, filepath.Base(f)+".tar.gz")
		if err := tarGzDir(f, packed); err != nil {
			return nil, fmt.Errorf("pack %s: %w", relOrDot(p.root, f), err)
		}
		fmt.Fprintf(p.runner.out, "▸ packed %s as %s\n", relOrDot(p.root, f), filepath.Base(packed))
		files = append(files, packed)
	}
	extra, err := globFiles(p.root, b.BuildArtifactPaths)
	if err != nil {
		return nil, fmt.Errorf("%w: buildArtifactPaths: %v", errConfig, err)
	}
	return append(files, slices.DeleteFunc(extra, func(f string) bool { return slices.Contains(files, f) })...), nil
}

// certificateName is the distribution certificate's common name for
// target (what a development profile's CODE_SIGN_IDENTITY must name, as
// EAS sets it), else the identity's SHA-1, which Xcode accepts too.
func (p *pipeline) certificateName(target string) string {
	if info := p.spec.Credentials.IOS; info != nil {
		for _, t := range info.Targets {
			if t.Target == target && t.CertificateName != "" {
				return t.CertificateName
			}
		}
	}
	return p.signing.identity
}
