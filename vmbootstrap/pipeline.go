package vmbootstrap

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/freeagent-build/freeagent/controller/api"
)

// ErrNoArtifacts: the build ran but left nothing to upload.
var ErrNoArtifacts = errors.New("the build produced no artifact")

// pipeline runs the build of one project and returns the artifact paths.
type pipeline struct {
	root         string // project root
	workDir      string // scratch space outside the project (archives, export)
	artifactsDir string // FREEAGENT_ARTIFACTS_DIR
	platform     string
	signing      *signing // iOS with certificates, else nil
	runner       *stepRunner
	// phase announces a phase (progress.json and the log).
	phase func(phase string, progress int, message string)
}

func (p *pipeline) run(ctx context.Context) ([]string, error) {
	pkg, err := readPackageJSON(p.root)
	if err != nil {
		return nil, err
	}
	if _, ok := pkg.Scripts[CustomBuildScript]; ok {
		return p.custom(ctx)
	}
	if p.platform == api.PlatformIOS {
		return p.ios(ctx)
	}
	return p.android(ctx)
}

func (p *pipeline) step(dir string, argv ...string) Step {
	s := Step{Argv: argv, Dir: dir}
	if rel := relDir(p.root, dir); rel != "" {
		s.Shown = "cd " + shellJoin([]string{rel}) + " && " + shellJoin(argv)
	}
	return s
}

// custom runs the project's own build script; it owns installing,
// building and putting its outputs into FREEAGENT_ARTIFACTS_DIR.
func (p *pipeline) custom(ctx context.Context) ([]string, error) {
	p.phase(PhaseBuild, 30, "npm run "+CustomBuildScript)
	if err := p.runner.run(ctx, p.step(p.root, "npm", "run", CustomBuildScript)); err != nil {
		return nil, err
	}
	files, err := regularFiles(p.artifactsDir, "")
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: `npm run %s` left no regular file in FREEAGENT_ARTIFACTS_DIR", ErrNoArtifacts, CustomBuildScript)
	}
	return files, nil
}

// install runs npm ci (npm install when the project has no lockfile).
func (p *pipeline) install(ctx context.Context) error {
	p.phase(PhaseInstall, 20, "installing npm packages")
	argv := []string{"npm", "ci"}
	if !fileExists(filepath.Join(p.root, "package-lock.json")) && !fileExists(filepath.Join(p.root, "npm-shrinkwrap.json")) {
		argv = []string{"npm", "install"}
	}
	return p.runner.run(ctx, p.step(p.root, argv...))
}

// prebuild generates the native project unless the project carries its
// own (a bare React Native project), as EAS Build does. --no-install: the
// packages are installed already and CocoaPods runs as its own step; the
// Expo CLI is non-interactive because CI=1 (it has no --non-interactive).
func (p *pipeline) prebuild(ctx context.Context, platform string) error {
	if fileExists(filepath.Join(p.root, platform)) {
		p.phase(PhasePrebuild, 35, "using the project's own "+platform+"/ directory")
		fmt.Fprintf(p.runner.out, "\n▸ %s/ exists: skipping expo prebuild\n", platform)
		return nil
	}
	p.phase(PhasePrebuild, 35, "expo prebuild")
	return p.runner.run(ctx, p.step(p.root, "npx", "expo", "prebuild", "--platform", platform, "--no-install"))
}

func (p *pipeline) android(ctx context.Context) ([]string, error) {
	if err := p.install(ctx); err != nil {
		return nil, err
	}
	if err := p.prebuild(ctx, "android"); err != nil {
		return nil, err
	}
	dir := filepath.Join(p.root, "android")
	gradlew := filepath.Join(dir, "gradlew")
	if !fileExists(gradlew) {
		return nil, fmt.Errorf("%w: android/gradlew is missing", ErrNoArtifacts)
	}
	os.Chmod(gradlew, 0o755) //nolint:errcheck // archives made on Windows lose the x bit; run fails clearly otherwise
	p.phase(PhaseBuild, 50, "gradle assembleRelease")
	if err := p.runner.run(ctx, Step{Argv: []string{gradlew, "assembleRelease"}, Dir: dir, Shown: "cd android && ./gradlew assembleRelease"}); err != nil {
		return nil, err
	}
	files, err := regularFiles(filepath.Join(dir, "app", "build", "outputs", "apk", "release"), ".apk")
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no .apk in android/app/build/outputs/apk/release", ErrNoArtifacts)
	}
	return files, nil
}

func (p *pipeline) ios(ctx context.Context) ([]string, error) {
	if p.signing == nil {
		return nil, fmt.Errorf("%w: an iOS build with the default pipeline needs signing certificates (submit a certs zip with a .p12, password.txt and the provisioning profile) or a %q script in package.json",
			errConfig, CustomBuildScript)
	}
	if len(p.signing.profiles) == 0 {
		return nil, fmt.Errorf("%w: the certificates hold no provisioning profile (.mobileprovision)", errConfig)
	}
	if err := p.install(ctx); err != nil {
		return nil, err
	}
	if err := p.prebuild(ctx, "ios"); err != nil {
		return nil, err
	}
	dir := filepath.Join(p.root, "ios")
	if fileExists(filepath.Join(dir, "Podfile")) {
		p.phase(PhasePrebuild, 45, "pod install")
		if err := p.runner.run(ctx, p.step(dir, "pod", "install")); err != nil {
			return nil, err
		}
	}
	workspace, err := findWorkspace(dir)
	if err != nil {
		return nil, err
	}
	scheme := strings.TrimSuffix(filepath.Base(workspace), ".xcworkspace")
	main := p.signing.profiles[0]
	archive := filepath.Join(p.workDir, scheme+".xcarchive")
	p.phase(PhaseBuild, 50, "xcodebuild archive")
	archiveArgs := []string{"xcodebuild", "archive",
		"-workspace", workspace, "-scheme", scheme, "-configuration", "Release",
		"-destination", "generic/platform=iOS", "-archivePath", archive,
		"CODE_SIGN_STYLE=Manual",
		"CODE_SIGN_IDENTITY=" + p.signing.identity,
		"PROVISIONING_PROFILE_SPECIFIER=" + main.UUID,
		"OTHER_CODE_SIGN_FLAGS=--keychain " + p.signing.keychain.Path(),
	}
	if main.TeamID != "" {
		archiveArgs = append(archiveArgs, "DEVELOPMENT_TEAM="+main.TeamID)
	}
	if err := p.runner.run(ctx, p.step(dir, archiveArgs...)); err != nil {
		return nil, err
	}
	profiles := map[string]string{}
	for _, pr := range p.signing.profiles {
		if pr.BundleID != "" {
			profiles[pr.BundleID] = pr.UUID
		}
	}
	options := filepath.Join(p.workDir, "ExportOptions.plist")
	if err := os.WriteFile(options, exportOptionsPlist(main.Method, main.TeamID, p.signing.identity, profiles), 0o644); err != nil {
		return nil, fmt.Errorf("write ExportOptions.plist: %w", err)
	}
	export := filepath.Join(p.workDir, "export")
	p.phase(PhaseBuild, 80, "xcodebuild -exportArchive")
	if err := p.runner.run(ctx, p.step(dir, "xcodebuild", "-exportArchive", "-archivePath", archive,
		"-exportPath", export, "-exportOptionsPlist", options)); err != nil {
		return nil, err
	}
	files, err := regularFiles(export, ".ipa")
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: xcodebuild -exportArchive wrote no .ipa", ErrNoArtifacts)
	}
	return files, nil
}

// errConfig: the project or its submission cannot be built as given.
var errConfig = errors.New("the build cannot run")

// findWorkspace returns the app's workspace in ios/ (Expo names it after
// the app; the scheme has the same name).
func findWorkspace(dir string) (string, error) {
	matches, err := filepath.Glob(filepath.Join(dir, "*.xcworkspace"))
	if err != nil {
		return "", fmt.Errorf("find the Xcode workspace: %w", err)
	}
	matches = slices.DeleteFunc(matches, func(m string) bool { return filepath.Base(m) == "Pods.xcworkspace" })
	if len(matches) == 0 {
		return "", fmt.Errorf("%w: no .xcworkspace in ios/", errConfig)
	}
	return matches[0], nil
}

// regularFiles lists the regular files directly in dir (with suffix, when
// given), sorted; a missing dir has none. Symlinks are skipped: an
// artifact must be a file the build wrote, never a link to elsewhere.
func regularFiles(dir, suffix string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list artifacts: %w", err)
	}
	var out []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), suffix) && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, nil
}
