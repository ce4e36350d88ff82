package vmbootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/vmshare"
)

// ErrNoArtifacts: the build ran but left nothing to upload.
var ErrNoArtifacts = errors.New("the build produced no artifact")

// pipeline runs the build of one project as its spec says and returns
// the artifact paths.
type pipeline struct {
	tree         string // the source's root: the workspace root
	root         string // the app's directory inside tree
	workDir      string // scratch space outside the project (archives, export, keystore)
	artifactsDir string // FREEAGENT_ARTIFACTS_DIR
	spec         api.BuildSpec
	keystore     *api.AndroidKeystore // Android upload key; nil: the project's own signing (debug)
	signing      *signing             // iOS with certificates, else nil
	runner       *stepRunner
	caches       *depCaches // nil: none
	// phase announces a phase (progress.json and the log).
	phase func(phase string, progress int, message string)
}

// hookTimeout is the end hooks' own budget once the build's context has ended.
const hookTimeout = 10 * time.Minute

func (p *pipeline) run(ctx context.Context) ([]string, error) {
	pkg, err := readPackageJSON(p.root)
	if err != nil {
		return nil, err
	}
	if pkg.customBuild() {
		// The project installs by itself: its store, never node_modules.
		if p.caches.restoreDeferred(ctx) > 0 {
			p.runner.env = p.caches.restoredEnv(p.runner.env)
		}
		return p.custom(ctx)
	}
	build := p.android
	if p.spec.Platform == api.PlatformIOS {
		build = p.ios
	}
	files, err := build(ctx)
	p.endHooks(ctx, err)
	return files, err
}

// endHooks runs eas-build-on-success or -on-error (or -on-cancel when the
// build was stopped), then eas-build-on-complete with EAS_BUILD_STATUS, as
// EAS does. Their failures are logged: the build's outcome stands.
func (p *pipeline) endHooks(ctx context.Context, buildErr error) {
	status := "finished"
	hook := HookOnBuildSuccess
	switch {
	case ctx.Err() != nil:
		status, hook = "canceled", HookOnBuildCancel
	case buildErr != nil:
		status, hook = "errored", HookOnBuildError
	}
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hookTimeout)
	defer cancel()
	for _, h := range []string{hook, HookOnBuildComplete} {
		if err := p.hook(hctx, h, "EAS_BUILD_STATUS="+status); err != nil {
			fmt.Fprintf(p.runner.out, "\n▸ warning: %s failed: %v\n", h, err)
		}
	}
}

// hook runs a package.json script of the app when it defines one.
func (p *pipeline) hook(ctx context.Context, name string, env ...string) error {
	pkg, err := readPackageJSON(p.root) // fresh: an earlier step may have changed it
	if err != nil {
		return err
	}
	if pkg.Scripts[name] == "" {
		return nil
	}
	fmt.Fprintf(p.runner.out, "\n▸ script %q is present in package.json: running it\n", name)
	s := p.command(ScriptCommand(p.spec.Project, name))
	s.Env = env
	return p.runner.run(ctx, s)
}

// command turns a JavaScript-side command (its Dir relative to the
// source's root) into a step.
func (p *pipeline) command(c Command) Step {
	return p.step(filepath.Join(p.tree, filepath.FromSlash(c.Dir)), c.Argv...)
}

func (p *pipeline) step(dir string, argv ...string) Step {
	s := Step{Argv: argv, Dir: dir}
	if rel := relDir(p.tree, dir); rel != "" {
		s.Shown = "cd " + shellJoin([]string{rel}) + " && " + shellJoin(argv)
	}
	return s
}

// custom runs the project's own build script; it owns installing,
// building and putting its outputs into FREEAGENT_ARTIFACTS_DIR.
func (p *pipeline) custom(ctx context.Context) ([]string, error) {
	p.phase(vmshare.PhaseBuild, 30, "npm run "+CustomBuildScript)
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

// install runs the pre-install hook, then the frozen install at the
// workspace root with the project's package manager, as EAS does.
func (p *pipeline) install(ctx context.Context) error {
	if err := p.applyPins(ctx); err != nil {
		return err
	}
	if err := p.hook(ctx, HookPreInstall); err != nil {
		return err
	}
	pm := p.spec.Project.PackageManager
	p.phase(vmshare.PhaseInstall, 20, "installing dependencies with "+pm)
	// Read again: the pre-install hook may have changed package.json.
	pkg, err := readPackageJSON(p.root)
	if err != nil {
		return err
	}
	frozen, why := frozenInstall(p.runner.env, p.spec.App, pkg)
	switch {
	case p.spec.Project.Lockfile == "":
		fmt.Fprintf(p.runner.out, "\n▸ warning: no lockfile: the install cannot be frozen, dependency versions may differ from the developer's\n")
	case !frozen:
		fmt.Fprintf(p.runner.out, "\n▸ the install is not frozen, as on EAS: %s\n", why)
	}
	cmds := InstallCommands(p.spec.Project, frozen)
	for _, c := range cmds[:len(cmds)-1] { // corepack, the manager's version
		if err := p.runner.run(ctx, p.command(c)); err != nil {
			return err
		}
	}
	install := cmds[len(cmds)-1]
	if c := p.caches.modules(); c != nil {
		staged := p.caches.stageModules(ctx) // extracts while the tools say their versions
		stamp, err := p.modulesStamp(ctx, c.Key)
		if err != nil {
			staged.discard()
			if ctx.Err() != nil {
				return err
			}
			fmt.Fprintf(p.runner.out, "\n▸ warning: cache node_modules: cannot tell the tools' versions, installing: %v\n", err)
		} else if key := p.caches.restoreModules(staged, stamp); key != "" {
			fmt.Fprintf(p.runner.out, "▸ node_modules restored from cache %s, %s skipped\n", short(key), strings.Join(install.Argv[:2], " "))
			return nil
		}
	}
	if p.caches.restoreDeferred(ctx) > 0 {
		p.runner.env = p.caches.restoredEnv(p.runner.env)
	}
	if err := p.runner.run(ctx, p.command(install)); err != nil {
		return err
	}
	p.caches.installedModules()
	return nil
}

// prebuild generates the native project of a managed app, whatever of
// it the archive holds (the spec's workflow decided, on the developer's
// side, that it is not the app's own), as EAS Build does, then installs
// again (prebuild may change package.json) unfrozen. The Expo CLI is
// non-interactive because CI=1. A remote-source build version goes into
// app.json first; versionsSet reports that it did (else the native files
// get it).
func (p *pipeline) prebuild(ctx context.Context, platform string) (versionsSet bool, err error) {
	if p.spec.Workflow == api.WorkflowGeneric {
		p.phase(vmshare.PhasePrebuild, 35, "using the project's own "+platform+"/ directory")
		fmt.Fprintf(p.runner.out, "\n▸ a bare app (its own %s/ directory): skipping expo prebuild\n", platform)
		return false, nil
	}
	if versionsSet, err = p.versionsBeforePrebuild(); err != nil {
		return false, err
	}
	p.phase(vmshare.PhasePrebuild, 35, "expo prebuild")
	if err := p.runner.run(ctx, p.command(PrebuildCommand(p.spec.Project, p.spec.Profile.PrebuildCommand, platform))); err != nil {
		return false, err
	}
	return versionsSet, p.runner.run(ctx, p.command(ReinstallCommand(p.spec.Project)))
}

func (p *pipeline) android(ctx context.Context) ([]string, error) {
	ab := p.spec.Android
	if ab == nil {
		return nil, fmt.Errorf("%w: the build spec has no android section", errConfig)
	}
	if err := p.install(ctx); err != nil {
		return nil, err
	}
	versionsSet, err := p.prebuild(ctx, "android")
	if err != nil {
		return nil, err
	}
	if err := p.hook(ctx, HookPostInstall); err != nil {
		return nil, err
	}
	dir := filepath.Join(p.root, "android")
	gradlew := filepath.Join(dir, "gradlew")
	if !fileExists(gradlew) {
		return nil, fmt.Errorf("%w: android/gradlew is missing", ErrNoArtifacts)
	}
	if err := fixGradlew(gradlew); err != nil {
		return nil, err
	}
	if !versionsSet {
		if err := p.androidVersionsInNative(dir); err != nil {
			return nil, err
		}
	}
	if ch := p.spec.Profile.Channel; ch != "" {
		if !expoUpdatesInstalled(p.tree, p.root) {
			fmt.Fprintf(p.runner.out, "\n▸ channel %q: expo-updates is not installed, so the channel has no effect\n", ch)
		} else {
			fmt.Fprintf(p.runner.out, "\n▸ setting the EAS Update channel %q in AndroidManifest.xml\n", ch)
			if err := setAndroidChannel(filepath.Join(dir, "app", "src", "main", "AndroidManifest.xml"), ch); err != nil {
				return nil, fmt.Errorf("%w: %v", errConfig, err)
			}
		}
	}
	args, err := splitCommand(ab.GradleCommand)
	if err != nil {
		return nil, fmt.Errorf("%w: gradleCommand %q: %v", errConfig, ab.GradleCommand, err)
	}
	if p.keystore != nil {
		initScript, err := writeGradleSigning(filepath.Join(p.workDir, "credentials"), *p.keystore)
		if err != nil {
			return nil, err
		}
		if p.runner.user != nil { // Gradle reads them as the build user
			if err := p.runner.user.shareTree(filepath.Dir(initScript)); err != nil {
				return nil, err
			}
		}
		args = append(args, "--init-script", initScript)
		fmt.Fprintf(p.runner.out, "\n▸ signing with the %s upload keystore (key %q, certificate SHA-256 %s)\n",
			p.spec.Credentials.Source, p.keystore.KeyAlias, keystoreFingerprint(p.spec))
	} else {
		fmt.Fprintf(p.runner.out, "\n▸ warning: no Android credentials: the app is signed as the project's Gradle files say (the debug key in Expo's template); add credentials.json or run `expo-build credentials set --platform android` for a store build\n")
	}
	step := Step{Argv: append([]string{gradlew}, args...), Dir: dir, Shown: "cd " + shellJoin([]string{relDir(p.tree, dir)}) + " && ./gradlew " + shellJoin(args)}
	p.phase(vmshare.PhaseBuild, 50, "gradlew "+ab.GradleCommand)
	if err := p.runner.run(ctx, step); err != nil {
		return nil, err
	}
	if err := p.hook(ctx, HookPreUploadArtifacts); err != nil {
		return nil, err
	}
	files, err := globFiles(p.root, ab.ApplicationArchivePaths)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errConfig, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: nothing matches %s in %s", ErrNoArtifacts, strings.Join(ab.ApplicationArchivePaths, ", "), relOrDot(p.tree, p.root))
	}
	if want := p.spec.Credentials.Android; p.keystore != nil && want != nil {
		for _, f := range files {
			if ext := filepath.Ext(f); ext != ".apk" && ext != ".aab" {
				continue
			}
			if err := verifyAndroidArtifact(f, *want); err != nil {
				if errors.As(err, new(*SigningMismatchError)) {
					return nil, err
				}
				return nil, fmt.Errorf("%w: %s: %v", errConfig, relOrDot(p.root, f), err)
			}
			fmt.Fprintf(p.runner.out, "▸ %s is signed with the upload key (certificate SHA-256 %s)\n", relOrDot(p.root, f), want.CertificateSHA256)
		}
	}
	extra, err := globFiles(p.root, ab.BuildArtifactPaths)
	if err != nil {
		return nil, fmt.Errorf("%w: buildArtifactPaths: %v", errConfig, err)
	}
	return append(files, slices.DeleteFunc(extra, func(f string) bool { return slices.Contains(files, f) })...), nil
}

// iosChannel sets the EAS Update channel in the app's Expo.plist when
// expo-updates is installed, as EAS Build does.
func (p *pipeline) iosChannel(dir, channel string) error {
	if !expoUpdatesInstalled(p.tree, p.root) {
		fmt.Fprintf(p.runner.out, "\n▸ channel %q: expo-updates is not installed, so the channel has no effect\n", channel)
		return nil
	}
	plists, _ := filepath.Glob(filepath.Join(dir, "*", "Supporting", "Expo.plist"))
	if len(plists) != 1 {
		return fmt.Errorf("%w: channel %q: expected one ios/<app>/Supporting/Expo.plist to carry it, found %d", errConfig, channel, len(plists))
	}
	fmt.Fprintf(p.runner.out, "\n▸ setting the EAS Update channel %q in %s\n", channel, relOrDot(p.tree, plists[0]))
	if err := setIOSChannel(plists[0], channel); err != nil {
		return fmt.Errorf("%w: %v", errConfig, err)
	}
	return nil
}

func keystoreFingerprint(spec api.BuildSpec) string {
	if spec.Credentials.Android == nil {
		return "unknown"
	}
	return spec.Credentials.Android.CertificateSHA256
}

// fixGradlew makes gradlew runnable as EAS does: archives made on Windows
// lose the x bit and may carry CRLF line endings.
func fixGradlew(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read android/gradlew: %w", err)
	}
	if bytes.Contains(b, []byte("\r\n")) {
		if err := os.WriteFile(path, bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")), 0o755); err != nil {
			return fmt.Errorf("fix android/gradlew's line endings: %w", err)
		}
	}
	if err := os.Chmod(path, 0o755); err != nil {
		return fmt.Errorf("make android/gradlew executable: %w", err)
	}
	return nil
}

// splitCommand splits a command line the way a POSIX shell splits words:
// spaces separate, single and double quotes group, a backslash escapes. No
// expansion of any kind happens.
func splitCommand(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	var quote rune
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\\':
			escaped, inWord = true, true
		case quote == '"':
			if r == '"' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 || escaped {
		return nil, errors.New("unterminated quote or escape")
	}
	if inWord {
		out = append(out, cur.String())
	}
	if len(out) == 0 {
		return nil, errors.New("empty")
	}
	return out, nil
}

func relOrDot(base, p string) string {
	if rel := relDir(base, p); rel != "" {
		return rel
	}
	return "."
}

// errConfig: the project or its submission cannot be built as given.
var errConfig = errors.New("the build cannot run")

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
