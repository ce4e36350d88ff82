package cli

import (
	"bufio"
	"cmp"
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/freeagent-build/freeagent/api"
)

const buildListHelp = `Lists builds, newest first, with eas build:list's filters. Without --project it lists every
build the API key may see. --limit (default 10) and --offset page through them. The farm
filters by platform, status (one status), project and worker; the other filters are applied
here to the newest 5000 builds. With --json: an array of builds as eas-cli prints them
(status and platform upper-case, artifacts.buildUrl, appVersion, buildProfile, createdAt…).`

// maxListScan bounds the builds build:list reads to apply the filters the
// controller does not (they come 200 to a page).
const maxListScan = 5000

// buildFilter is what build:list keeps beyond the controller's filters.
type buildFilter struct {
	easStatus, distribution, channel, appVersion, appBuildVersion, sdkVersion string
	appIdentifier, profile, gitCommit                                         string
	simulator                                                                 bool
}

// local reports whether the filter needs the builds' specs read here.
func (f buildFilter) local() bool { return f != buildFilter{} }

func (f buildFilter) keep(b api.Build) bool {
	if f.profile != "" && b.Profile != f.profile {
		return false
	}
	if f.easStatus != "" && strings.ToLower(strings.ReplaceAll(easStatus(b), "_", "-")) != f.easStatus {
		return false
	}
	sp := b.Spec
	if sp == nil {
		// A raw API submit (or a controller that sends no specs) has none
		// of what the other filters look at.
		return f == buildFilter{profile: f.profile, easStatus: f.easStatus}
	}
	id, buildVersion := appIdentity(*sp)
	distribution := cmp.Or(sp.Profile.Distribution, "store")
	simulator := sp.IOS != nil && sp.IOS.Simulator
	for _, c := range []struct{ want, have string }{
		{f.channel, sp.Profile.Channel}, {f.appVersion, cmp.Or(b.AppVersion, sp.App.Version)}, {f.appBuildVersion, cmp.Or(b.BuildVersion, buildVersion)},
		{f.sdkVersion, sp.App.SDKVersion}, {f.appIdentifier, id},
	} {
		if c.want != "" && c.want != c.have {
			return false
		}
	}
	switch {
	case f.distribution == "simulator" && !simulator,
		f.distribution != "" && f.distribution != "simulator" && f.distribution != distribution,
		f.simulator && !simulator,
		f.gitCommit != "" && (sp.GitCommit == "" || !strings.HasPrefix(sp.GitCommit, f.gitCommit)):
		return false
	}
	return true
}

// refusedFilter is an eas build:list filter on something the farm does not
// record.
type refusedFilter struct {
	name, alias, hint string
	value             string
}

func (a *App) cmdBuildList(ctx context.Context, inv *invocation, args []string) error {
	fs := inv.flags()
	var o api.ListOptions
	var f buildFilter
	var platform, status string
	fs.StringVar(&platform, "platform", "", "only `PLATFORM`: android, ios or all")
	inv.alias(fs, "p", "platform")
	fs.StringVar(&status, "status", "", "only builds in `STATUS`: "+strings.Join(easStatuses, ", "))
	fs.StringVar(&f.distribution, "distribution", "", "only `TYPE`: store, internal or simulator (EAS's deprecated spelling of --simulator)")
	fs.StringVar(&f.channel, "channel", "", "only builds for the EAS Update `CHANNEL`")
	long := func(p *string, name, alias, usage string) {
		fs.StringVar(p, name, "", usage)
		if alias != "" {
			fs.Var(fs.Lookup(name).Value, alias, "")
		}
	}
	long(&f.appVersion, "app-version", "appVersion", "only builds of the app `VERSION` (expo.version)")
	long(&f.appBuildVersion, "app-build-version", "appBuildVersion", "only builds of the `BUILD_VERSION` (android.versionCode, ios.buildNumber)")
	long(&f.sdkVersion, "sdk-version", "sdkVersion", "only builds of the Expo SDK `VERSION` the app config states")
	long(&f.appIdentifier, "app-identifier", "appIdentifier", "only builds of the Android package or iOS bundle `ID`")
	long(&f.profile, "build-profile", "buildProfile", "only builds of the eas.json build `PROFILE`")
	inv.alias(fs, "e", "build-profile")
	fs.Var(fs.Lookup("build-profile").Value, "profile", "")
	long(&f.gitCommit, "git-commit-hash", "gitCommitHash", "only builds of the git `COMMIT` (a prefix is enough)")
	fs.BoolVar(&f.simulator, "simulator", false, "only iOS simulator builds (with --platform ios)")
	refused := []*refusedFilter{
		{name: "runtime-version", alias: "runtimeVersion", hint: "the farm does not record runtime versions; filter by --app-version or --git-commit-hash"},
		{name: "fingerprint-hash", hint: "the farm does not compute Expo fingerprints; filter by --git-commit-hash, or let `expo-build build --reuse` find a build of the same source"},
	}
	for _, r := range refused {
		long(&r.value, r.name, r.alias, "refused: "+r.hint)
	}
	fs.IntVar(&o.Limit, "limit", 10, "`N` builds, 1 to 200")
	offset := fs.Int("offset", 0, "skip the first `N` builds that match")
	fs.Bool("non-interactive", false, "never prompt (build:list never does)")
	fs.StringVar(&o.Project, "project", "", "only the farm project `NAME`'s builds")
	fs.StringVar(&o.WorkerID, "worker", "", "only builds of this worker `ID`")
	if _, err := inv.parse(fs, args, 0, 0); err != nil {
		return err
	}
	for _, r := range refused {
		if r.value != "" {
			return &cliError{code: ExitUsage, msg: "--" + r.name + " is not supported by the farm", hint: r.hint}
		}
	}
	if o.Limit < 1 || o.Limit > 200 {
		return usageErr("--limit must be between 1 and 200, got %d", o.Limit)
	}
	if *offset < 0 {
		return usageErr("--offset must be 0 or more, got %d", *offset)
	}
	switch platform = strings.ToLower(platform); platform {
	case "", "all":
	case api.PlatformAndroid, api.PlatformIOS:
		o.Platform = platform
	default:
		return usageErr("unknown platform %q: use --platform android, ios or all", platform)
	}
	if f.simulator && o.Platform != api.PlatformIOS {
		return usageErr("--simulator goes with --platform ios: it keeps iOS simulator builds")
	}
	if f.distribution != "" && !slices.Contains([]string{"store", "internal", "simulator"}, f.distribution) {
		return usageErr("--distribution must be store, internal or simulator, got %q", f.distribution)
	}
	// One status the controller filters on; the others are made of two
	// (in-progress: assigned or building) or of a flag (pending-cancel).
	switch status {
	case "":
	case "in-queue":
		o.Status = string(api.StatusPending)
	case "errored":
		o.Status = string(api.StatusFailed)
	case "finished":
		o.Status = string(api.StatusCompleted)
	case "canceled":
		o.Status = string(api.StatusCancelled)
	case "in-progress", "pending-cancel":
		f.easStatus = status
	case "new":
		// EAS's "new" is a build whose upload has not finished; the farm
		// creates a build once its source is in, already queued.
		inv.ui.info("the farm has no builds in status new: a build is queued as it is created")
		return emitBuilds(inv, nil, "")
	default:
		return usageErr("--status must be one of %s, got %q", strings.Join(easStatuses, ", "), status)
	}
	s, c, err := inv.keySession()
	if err != nil {
		return err
	}
	o.WithSpec = true
	want := *offset + o.Limit
	o.Limit = min(want, 200)
	if f.local() {
		o.Limit = 200
	}
	var kept []api.Build
	scanned, next := 0, ""
	for {
		page, err := s.listBuilds(ctx, c, o)
		if err != nil {
			return err
		}
		scanned, next = scanned+len(page.Builds), page.NextCursor
		for _, b := range page.Builds {
			if f.keep(b) {
				kept = append(kept, b)
			}
		}
		if len(kept) >= want || page.NextCursor == "" {
			break
		}
		if scanned >= maxListScan {
			inv.ui.warn("looked at the newest %d builds only; narrow the list with --platform, --status, --project", scanned)
			break
		}
		o.Cursor = page.NextCursor
	}
	more := ""
	if len(kept) > want || len(kept) == want && next != "" {
		more = fmt.Sprintf("expo-build build:list --offset %d (with the same filters)", want)
	}
	kept = kept[min(*offset, len(kept)):min(want, len(kept))]
	return emitBuilds(inv, s, more, kept...)
}

// emitBuilds prints build:list's answer: EAS's array with --json, else the
// table.
func emitBuilds(inv *invocation, s *session, more string, builds ...api.Build) error {
	if inv.json {
		base := ""
		if s != nil {
			base = s.baseURL
		}
		return emitEAS(inv, base, builds)
	}
	printBuildTable(inv.ui, builds)
	if more != "" && len(builds) > 0 {
		inv.ui.printf("%s %s\n", inv.ui.o(cDim, "More:"), more)
	}
	return nil
}

const buildViewHelp = `Shows a build, by default the newest one the API key may see: status, queue position,
phase and progress, attempts, worker, times, error and artifacts. With --watch it prints each
change until the build ends and exits 0 when it completed, 1 when it failed or was
cancelled. With --json: the build as eas-cli prints it (with --watch, one per line at each
change).`

func (a *App) cmdBuildView(ctx context.Context, inv *invocation, args []string) error {
	return a.view(ctx, inv, args, true)
}

// newestBuild is the id of the newest build the key may see.
func newestBuild(ctx context.Context, s *session) (string, error) {
	c, err := s.keyClient()
	if err != nil {
		return "", err
	}
	page, err := s.listBuilds(ctx, c, api.ListOptions{Limit: 1})
	if err != nil {
		return "", err
	}
	if len(page.Builds) == 0 {
		return "", &cliError{code: ExitNotFound, msg: "there are no builds yet", hint: "start one: expo-build build -p android"}
	}
	return page.Builds[0].ID, nil
}

const buildCancelHelp = `Cancels a build. Without an id it lists the builds still queued or running (filtered by
--platform and --profile) and asks which; with --non-interactive the id is required. A pending
build is cancelled at once; a running one is stopped by its worker within moments. A build
that already ended cannot be cancelled: the command says so and exits 1.`

func (a *App) cmdBuildCancel(ctx context.Context, inv *invocation, args []string) error {
	fs := inv.flags()
	platform := fs.String("platform", "", "without an id: choose among the builds of `PLATFORM` (android or ios)")
	inv.alias(fs, "p", "platform")
	profile := fs.String("profile", "", "without an id: choose among the builds of the eas.json build `PROFILE`")
	inv.alias(fs, "e", "profile")
	nonInteractive := fs.Bool("non-interactive", false, "never prompt: the build id is then required")
	pos, err := inv.parse(fs, args, 0, 1)
	if err != nil {
		return err
	}
	if len(pos) == 1 && (*platform != "" || *profile != "") {
		return usageErr("a build id does not go with --platform or --profile: they choose among the running builds when no id is given")
	}
	switch *platform {
	case "", api.PlatformAndroid, api.PlatformIOS:
	case "all":
		*platform = ""
	default:
		return usageErr("unknown platform %q: use --platform android, ios or all", *platform)
	}
	s, err := inv.session()
	if err != nil {
		return err
	}
	if len(pos) == 1 {
		return a.cancelBuild(ctx, inv, s, pos[0])
	}
	if *nonInteractive || inv.json || !a.StdinTTY {
		return usageErr("which build? pass its id: expo-build build:cancel <id> (without a terminal, or with --non-interactive or --json, nothing is asked)")
	}
	id, err := a.chooseRunning(ctx, inv, s, *platform, *profile)
	if err != nil {
		return err
	}
	return a.cancelBuild(ctx, inv, s, id)
}

// chooseRunning asks which of the newest 200 builds still queued or
// running to act on.
func (a *App) chooseRunning(ctx context.Context, inv *invocation, s *session, platform, profile string) (string, error) {
	c, err := s.keyClient()
	if err != nil {
		return "", err
	}
	page, err := s.listBuilds(ctx, c, api.ListOptions{Platform: platform, Limit: 200})
	if err != nil {
		return "", err
	}
	running := slices.DeleteFunc(page.Builds, func(b api.Build) bool {
		return b.Status.Terminal() || profile != "" && b.Profile != profile
	})
	if len(running) == 0 {
		return "", &cliError{code: ExitNotFound, msg: "no build is queued or running", hint: "expo-build build:list shows the others"}
	}
	printBuildTable(inv.ui, running)
	br := bufio.NewReader(a.Stdin)
	for range 3 {
		fmt.Fprintf(a.Stderr, "Build to cancel (1-%d, from the top): ", len(running))
		line, err := br.ReadString('\n')
		if n, perr := strconv.Atoi(strings.TrimSpace(line)); perr == nil && n >= 1 && n <= len(running) {
			return running[n-1].ID, nil
		}
		if err != nil {
			break
		}
	}
	return "", usageErr("no build chosen: pass its id, expo-build build:cancel <id>")
}

const buildDownloadHelp = `Downloads a build's application archive (.aab, .apk, .ipa, or a simulator .app as .tar.gz),
or with --all-artifacts every artifact, into ./<build-id>/ (or -o DIR). The build is given
as --build-id ID (EAS's flag) or as the argument. Downloads resume where they stopped and are
checked against the SHA-256 the controller recorded. With --json: {"path": the application
archive, NAME: path of each other artifact (with --all-artifacts)}, as eas build:download prints.`

func (a *App) cmdBuildDownload(ctx context.Context, inv *invocation, args []string) error {
	fs := inv.flags()
	var d downloadOpts
	d.flags(inv, fs)
	buildID := fs.String("build-id", "", "the build `ID` (or pass it as the argument)")
	fs.Var(fs.Lookup("build-id").Value, "id", "")
	all := fs.Bool("all-artifacts", false, "download every artifact, not only the application archive")
	fingerprint := fs.String("fingerprint", "", "refused: the farm does not compute Expo fingerprints; pass --build-id (expo-build build:list --git-commit-hash finds it)")
	fs.String("platform", "", "with --fingerprint only")
	inv.alias(fs, "p", "platform")
	fs.Bool("dev-client", false, "with --fingerprint only")
	fs.Bool("non-interactive", false, "never prompt (build:download never does)")
	pos, err := inv.parse(fs, args, 0, 1)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case *fingerprint != "":
		return &cliError{code: ExitUsage, msg: "--fingerprint is not supported by the farm",
			hint: "the farm does not compute Expo fingerprints; pass --build-id (expo-build build:list --git-commit-hash finds it)"}
	case set["platform"] || set["p"] || set["dev-client"]:
		return usageErr("--platform and --dev-client go with --fingerprint; pass --build-id: the platform is the build's")
	case len(pos) == 1 && *buildID != "" && pos[0] != *buildID:
		return usageErr("two build ids: %s (argument) and %s (--build-id)", pos[0], *buildID)
	case len(pos) == 0 && *buildID == "":
		return usageErr("which build? pass --build-id ID (or the id as the argument)")
	case *all && d.only != "":
		return usageErr("--artifact NAME and --all-artifacts contradict each other")
	}
	id := *buildID
	if id == "" {
		id = pos[0]
	}
	s, err := inv.session()
	if err != nil {
		return err
	}
	b, err := a.waitToDownload(ctx, inv, s, id, d.wait)
	if err != nil {
		return err
	}
	app, ok := appArchive(b.Artifacts)
	if ok && !*all && d.only == "" {
		d.only = app.Name
	}
	files, err := a.download(ctx, inv, s, b, d.output, d.force, d.only)
	if err != nil {
		return err
	}
	out := map[string]string{}
	for _, f := range files {
		if f.Name == app.Name {
			out["path"] = f.Path
			inv.ui.info("Build downloaded to %s", f.Path)
		} else {
			out[f.Name] = f.Path
			inv.ui.info("%s downloaded to %s", f.Name, f.Path)
		}
	}
	if inv.json {
		return inv.ui.emit(out)
	}
	return nil
}
