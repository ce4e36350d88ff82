package cli

import (
	"bufio"
	"cmp"
	"context"
	"flag"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/appversion"
)

const versionGetHelp = `Shows the build version (Android versionCode, iOS buildNumber) the farm keeps for the app,
as eas build:version:get does: the project (the app's slug, or --project) and the
application identifier (android.package, the bundle identifier) are read as submit reads
them, with the build profile's env. Needs cli.appVersionSource "remote" in eas.json.`

const versionSetHelp = `Sets the build version the farm keeps for the app, as eas build:version:set does: the next
build without autoIncrement uses it, the next with autoIncrement the one after. A
versionCode is a whole number from 1 to 2100000000, a buildNumber up to three
dot-separated numbers; as in EAS a lower number than the current one is accepted (the
stores refuse a number they already have). --build-version gives it; on a terminal it is
asked for. Needs cli.appVersionSource "remote" in eas.json.`

const versionSyncHelp = `Writes the build version the farm keeps into a bare app's native files, as eas
build:version:sync does: versionCode in android/app/build.gradle, CFBundleVersion in the
Info.plist of the app's targets. A managed app (no android/ or ios/ directory) gets its
versions at build time and is left alone. Needs cli.appVersionSource "remote" in eas.json.`

// versionOpts are the flags the build:version commands share.
type versionOpts struct {
	platform, profile, project string
}

func (o *versionOpts) flags(inv *invocation, platforms string) *flag.FlagSet {
	fs := inv.flags()
	fs.StringVar(&o.platform, "platform", "", "`PLATFORM`: "+platforms+" (asked on a terminal when omitted)")
	inv.alias(fs, "p", "platform")
	fs.StringVar(&o.profile, "profile", "", "eas.json build profile `NAME` whose env the app config sees (default: production)")
	inv.alias(fs, "e", "profile")
	fs.StringVar(&o.project, "project", "", "the farm project `NAME` (default: the app's slug)")
	return fs
}

// versionTarget is one platform's app as the farm keeps its version.
type versionTarget struct {
	platform string
	spec     api.BuildSpec
	appRoot  string
}

// versionTargets resolves the app in dir for each requested platform as
// submit does, and checks that it uses the remote version source (with
// eas-cli's message when it does not).
func (a *App) versionTargets(ctx context.Context, inv *invocation, s *session, c *api.Client, dir string, o versionOpts, allowAll bool) ([]versionTarget, error) {
	root, _, err := findProject(dir)
	if err != nil {
		return nil, err
	}
	o.platform = strings.ToLower(strings.TrimSpace(o.platform))
	if o.platform == "" {
		if o.platform, err = a.askPlatform(inv); err != nil {
			return nil, err
		}
	}
	platforms := []string{o.platform}
	switch {
	case o.platform == "all" && allowAll:
		platforms = []string{api.PlatformAndroid, api.PlatformIOS}
	case o.platform != api.PlatformAndroid && o.platform != api.PlatformIOS:
		return nil, usageErr("unknown platform %q: use --platform android or ios%s", o.platform, map[bool]string{true: " (or all)"}[allowAll])
	}
	var out []versionTarget
	for _, p := range platforms {
		r, err := resolveBuild(ctx, root, p, o.profile, o.project, "", s.farm(c))
		if err != nil {
			return nil, err
		}
		if !r.spec.Versions.Remote() {
			return nil, usageErr(`this project is not configured for using remote version source: add {"cli": {"appVersionSource": "remote"}} in eas.json`)
		}
		out = append(out, versionTarget{platform: p, spec: r.spec, appRoot: root})
	}
	return out, nil
}

// farmVersion is the build version the farm keeps for t; nil when none.
func farmVersion(ctx context.Context, s *session, c *api.Client, t versionTarget) (*api.AppVersionRecord, error) {
	var rec api.AppVersionRecord
	err := s.retry(ctx, "read the app version", true, func(ctx context.Context) error {
		var err error
		rec, err = c.AppVersion(ctx, t.spec.BuildProject(), t.platform, t.spec.Versions.ApplicationID)
		return err
	})
	if api.StatusOf(err) == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, wrapOp("read the app version", err)
	}
	return &rec, nil
}

// allVersionTargets parses the flags of get and sync (any platform, or
// all) and resolves the app for each platform.
func (a *App) allVersionTargets(ctx context.Context, inv *invocation, args []string) (*session, *api.Client, []versionTarget, error) {
	var o versionOpts
	fs := o.flags(inv, "android, ios or all")
	pos, err := inv.parse(fs, args, 0, 1)
	if err != nil {
		return nil, nil, nil, err
	}
	s, c, err := inv.keySession()
	if err != nil {
		return nil, nil, nil, err
	}
	targets, err := a.versionTargets(ctx, inv, s, c, pathArg(pos), o, true)
	return s, c, targets, err
}

func (a *App) cmdVersionGet(ctx context.Context, inv *invocation, args []string) error {
	s, c, targets, err := a.allVersionTargets(ctx, inv, args)
	if err != nil {
		return err
	}
	out := map[string]string{}
	for _, t := range targets {
		rec, err := farmVersion(ctx, s, c, t)
		if err != nil {
			return err
		}
		if rec != nil {
			out[api.BuildVersionName(t.platform)] = rec.BuildVersion
		}
	}
	if inv.json {
		return inv.ui.emit(out)
	}
	if len(out) == 0 {
		inv.ui.printf("No remote versions are configured for this project.\n")
		return nil
	}
	for _, t := range targets {
		if v, ok := out[api.BuildVersionName(t.platform)]; ok {
			inv.ui.printf("%s %s - %s\n", platformName(t.platform), api.BuildVersionName(t.platform), inv.ui.o(cBold, v))
		}
	}
	return nil
}

func (a *App) cmdVersionSet(ctx context.Context, inv *invocation, args []string) error {
	var o versionOpts
	fs := o.flags(inv, "android or ios")
	version := fs.String("build-version", "", "the build `VERSION` to set (a versionCode, or a buildNumber)")
	pos, err := inv.parse(fs, args, 0, 1)
	if err != nil {
		return err
	}
	if o.platform == "all" {
		return usageErr("build:version:set sets one platform's version: use --platform android or ios")
	}
	// A bad number is refused before anything is read or sent.
	if p := strings.ToLower(o.platform); *version != "" && (p == api.PlatformAndroid || p == api.PlatformIOS) {
		if err := api.CheckBuildVersion(p, *version); err != nil {
			return usageErr("--build-version: %v", err)
		}
	}
	s, c, err := inv.keySession()
	if err != nil {
		return err
	}
	targets, err := a.versionTargets(ctx, inv, s, c, pathArg(pos), o, false)
	if err != nil {
		return err
	}
	t := targets[0]
	v, name := t.spec.Versions, api.BuildVersionName(t.platform)
	rec, err := farmVersion(ctx, s, c, t)
	if err != nil {
		return err
	}
	if rec != nil {
		inv.ui.info("Project %s with %s %q is configured with %s %s.", t.spec.BuildProject(), identifierName(t.platform), v.ApplicationID, name, rec.BuildVersion)
	} else {
		inv.ui.info("Project %s with %s %q does not have any %s configured.", t.spec.BuildProject(), identifierName(t.platform), v.ApplicationID, name)
	}
	if *version == "" {
		if *version, err = a.askBuildVersion(inv, t.platform, rec != nil); err != nil {
			return err
		}
	}
	if err := api.CheckBuildVersion(t.platform, *version); err != nil {
		return usageErr("--build-version: %v", err)
	}
	var set api.AppVersionRecord
	if err := s.retry(ctx, "set the app version", true, func(ctx context.Context) error {
		var err error
		set, err = c.SetAppVersion(ctx, t.spec.BuildProject(), t.platform, v.ApplicationID,
			api.SetAppVersionRequest{BuildVersion: *version, AppVersion: cmp.Or(t.spec.App.Version, "1.0.0")})
		return err
	}); err != nil {
		return wrapOp("set the app version", err)
	}
	if inv.json {
		return inv.ui.emit(set)
	}
	if rec != nil && lowerBuildVersion(*version, rec.BuildVersion) {
		inv.ui.warn("%s %s is lower than the farm's %s: the stores refuse a build number they already have", name, *version, rec.BuildVersion)
	}
	inv.ui.printf("%s %s %s of %s (%s) is now %s\n", inv.ui.o(cGreen, "✔"), platformName(t.platform), name, t.spec.BuildProject(), v.ApplicationID, inv.ui.o(cBold, set.BuildVersion))
	return nil
}

func (a *App) cmdVersionSync(ctx context.Context, inv *invocation, args []string) error {
	s, c, targets, err := a.allVersionTargets(ctx, inv, args)
	if err != nil {
		return err
	}
	synced := map[string]string{}
	for _, t := range targets {
		name := api.BuildVersionName(t.platform)
		rec, err := farmVersion(ctx, s, c, t)
		if err != nil {
			return err
		}
		if rec == nil {
			inv.ui.warn("skipping versions sync for %s: there are no versions configured on the farm; use `expo-build build:version:set` or run a build to initialize them", platformName(t.platform))
			continue
		}
		if t.spec.Workflow != api.WorkflowGeneric {
			inv.ui.warn("the remote value for the %s %s is %s, but it was not synced to the local project: this command has no effect on projects using the managed workflow", platformName(t.platform), name, rec.BuildVersion)
			continue
		}
		if err := syncNative(t, rec.BuildVersion); err != nil {
			return err
		}
		synced[name] = rec.BuildVersion
		inv.ui.info("%s Updated the %s %s in native code to %s.", inv.ui.e(cGreen, "✔"), platformName(t.platform), name, rec.BuildVersion)
	}
	if inv.json {
		return inv.ui.emit(synced)
	}
	return nil
}

// syncNative writes a bare app's build version into its native files.
func syncNative(t versionTarget, buildVersion string) error {
	if err := api.CheckBuildVersion(t.platform, buildVersion); err != nil {
		return failErr("set a valid one with `expo-build build:version:set`", "the farm's %v", err)
	}
	if t.platform == api.PlatformAndroid {
		gradle, err := appversion.GradleFile(filepath.Join(t.appRoot, "android"))
		if err != nil {
			return &cliError{code: ExitUsage, msg: "sync the versionCode", err: err}
		}
		if flavors, err := appversion.MultiFlavor(gradle); err != nil || flavors {
			return usageErr("versions in native code can't be automatically synced in multi-flavor Android projects; with the remote version source the build gets the right value at build time")
		}
		if err := appversion.SetGradleVersions(gradle, buildVersion, ""); err != nil {
			return &cliError{code: ExitFailed, msg: "sync the versionCode", err: err}
		}
		return nil
	}
	if t.spec.IOS == nil || len(t.spec.IOS.Targets) == 0 {
		return usageErr("the iOS project's targets are unknown: is ios/ an Xcode project?")
	}
	plists, err := infoPlists(t.appRoot, t.spec.IOS, t.spec.IOS.Targets)
	if err != nil {
		return &cliError{code: ExitUsage, msg: "sync the buildNumber", err: err}
	}
	for _, p := range plists {
		if err := p.SetVersions(buildVersion, ""); err != nil {
			return &cliError{code: ExitFailed, msg: "sync the buildNumber", err: err}
		}
	}
	return nil
}

// askBuildVersion asks for the version on a terminal, as eas-cli prompts.
func (a *App) askBuildVersion(inv *invocation, platform string, configured bool) (string, error) {
	if !a.StdinTTY || inv.json {
		return "", usageErr("which version? pass --build-version VERSION")
	}
	q := "What version would you like to initialize it with? "
	if configured {
		q = "What version would you like to set? "
	}
	fmt.Fprint(a.Stderr, q)
	line, err := bufio.NewReader(a.Stdin).ReadString('\n')
	if err != nil && line == "" {
		return "", usageErr("no version given: pass --build-version VERSION")
	}
	return strings.TrimSpace(line), nil
}

// lowerBuildVersion reports whether a is lower than b, number by number.
func lowerBuildVersion(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(as), len(bs)) {
		x, y := "0", "0"
		if i < len(as) {
			x = as[i]
		}
		if i < len(bs) {
			y = bs[i]
		}
		x, y = strings.TrimLeft(x, "0"), strings.TrimLeft(y, "0")
		if len(x) != len(y) {
			return len(x) < len(y)
		}
		if x != y {
			return x < y
		}
	}
	return false
}

func identifierName(platform string) string {
	if platform == api.PlatformAndroid {
		return "application ID"
	}
	return "bundle identifier"
}

func platformName(platform string) string {
	if platform == api.PlatformAndroid {
		return "Android"
	}
	return "iOS"
}

func pathArg(pos []string) string {
	if len(pos) == 1 {
		return pos[0]
	}
	return "."
}
