package cli

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/cli/pack"
	"github.com/freeagent-build/freeagent/internal/bytesize"
	"github.com/freeagent-build/freeagent/internal/config"
)

// submitDetails is what build's help says of the project,
// the upload, the signing and the idempotency.
const submitDetails = `The project is the directory given (default: the current one) or its nearest parent that
holds app.json or app.config.(js|ts|mjs|cjs|json). It is streamed as a tar.gz while it
uploads, so a project of any size needs little memory. Before anything is sent, a project
without package.json is refused, and one larger than the controller accepts (its
--max-source-bytes) is refused with its largest files named.

What is left out: node_modules, .git, .expo, /dist, /build, /web-build, /logs, *.log,
native build output (ios/build, ios/Pods, android/build, android/app/build, .gradle, .cxx),
earlier artifacts (*.ipa, *.apk, *.aab), then whatever the .gitignore files exclude. A
.easignore at the project root replaces the .gitignore files (as in EAS). A pattern with
"!" re-includes a default, e.g. "!/dist/".

iOS signing: --p12 FILE with one or more --provisioning-profile FILE.mobileprovision (the password comes
from EXPO_P12_PASSWORD or a hidden prompt, never a flag), or --certs ZIP prepared with one
.p12, password.txt and the profiles.

A retried build never creates two builds: each upload sends an Idempotency-Key, kept for
the CLI's own retries and saved in the config file until the controller answers. Running
the same command again after a network failure (same project content, platform, profile,
priority, signing and controller) sends the same key, so the controller returns the build
the first try made. --idempotency-key sets it explicitly (e.g. a CI job id).`

type submitOpts struct {
	platform, profileName, priority, output, idemKey, message string
	project                                                   string
	timeout                                                   time.Duration
	wait, noWait, logs, force, nonInteractive                 bool
	reuse, clearCache                                         bool
	// autoSubmit (--auto-submit) queues each build's submission to its
	// store with it, with eas.json's submit profile autoSubmitProfile
	// (--auto-submit-with-profile), else the build profile's name.
	autoSubmit        bool
	autoSubmitProfile string
	// resourceClass (--resource-class, deprecated in EAS) overrides the
	// profile's resourceClass, as eas build does.
	resourceClass string
	sign          signing
	limits        api.Limits // the controller's, learnt before packing
	// easFlags are eas build's flags the farm refuses or has no use for.
	easFlags []*easFlag
}

// flags registers submit's flags on a new flag set.
func (o *submitOpts) flags(inv *invocation) *flag.FlagSet {
	fs := inv.flags()
	fs.StringVar(&o.platform, "platform", "", "`PLATFORM`: android, ios or all (asked on a terminal when omitted)")
	inv.alias(fs, "p", "platform")
	fs.StringVar(&o.profileName, "profile", "", "eas.json build profile `NAME` (default: production)")
	inv.alias(fs, "e", "profile")
	fs.StringVar(&o.message, "message", "", "a short `NOTE` about the build, shown with it")
	inv.alias(fs, "m", "message")
	fs.StringVar(&o.project, "project", "", "the farm project `NAME` the build belongs to (default: the app's slug): its variables, credentials, pools and who sees it")
	fs.BoolVar(&o.nonInteractive, "non-interactive", false, "never prompt (fail with a message instead)")
	fs.StringVar(&o.priority, "priority", "", "queue priority `N`: 0 (highest) to 3 (controller default 2)")
	fs.StringVar(&o.sign.p12, "p12", "", "iOS signing certificate `FILE` (.p12); password from EXPO_P12_PASSWORD or a prompt")
	fs.Var(&o.sign.profiles, "provisioning-profile", "provisioning profile `FILE` (.mobileprovision; repeat for app extensions)")
	fs.StringVar(&o.sign.certsZip, "certs", "", "prepared certs `ZIP` (one .p12, password.txt, *.mobileprovision)")
	fs.Var(&config.DurationValue{P: &o.timeout, ZeroOK: true}, "build-timeout", "build time `LIMIT`, e.g. 45m, 2h or 7200 (seconds); 0: the controller's default (30m unless its admin changed it)")
	fs.BoolVar(&o.wait, "wait", true, "follow the build and download the artifacts when it completes (the default, as in EAS)")
	fs.BoolVar(&o.noWait, "no-wait", false, "return once the build is queued")
	fs.BoolVar(&o.clearCache, "clear-cache", false, "build without restoring the dependency caches; a success saves them afresh")
	fs.StringVar(&o.resourceClass, "resource-class", "", "deprecated in EAS (set resourceClass in eas.json): overrides the profile's resourceClass, which selects the worker")
	fs.BoolVar(&o.autoSubmit, "auto-submit", false, "once the build completes, the controller sends it to its store with the eas.json submit profile of the build profile's name (see expo-build submit)")
	inv.alias(fs, "s", "auto-submit")
	fs.StringVar(&o.autoSubmitProfile, "auto-submit-with-profile", "", "as --auto-submit, with the eas.json submit profile `NAME`")
	o.easFlags = easBuildFlags()
	registerEASFlags(fs, o.easFlags)
	fs.BoolVar(&o.logs, "logs", false, "with --wait: stream the build log instead of status changes")
	fs.StringVar(&o.output, "output", "", "with --wait: `DIR` for the artifacts (default: ./<build-id>/)")
	inv.alias(fs, "o", "output")
	fs.BoolVar(&o.force, "force", false, "with --wait: overwrite existing files")
	fs.BoolVar(&o.reuse, "reuse", false, "return the newest completed build of the same source, profile, platform, credentials and farm variables instead of building again (when its artifacts are still kept)")
	fs.StringVar(&o.idemKey, "idempotency-key", "", "Idempotency-Key `KEY` to send (default: generated, reused by a re-run; see above)")
	return fs
}

// cmdBuild is eas build: it packs the project, queues its builds and,
// unless --no-wait, follows them and downloads their artifacts.
func (a *App) cmdBuild(ctx context.Context, inv *invocation, args []string) error {
	var o submitOpts
	fs := o.flags(inv)
	pos, err := inv.parse(fs, args, 0, 1)
	if err != nil {
		return err
	}
	if err := resolveWait(fs, &o.wait, &o.noWait); err != nil {
		return err
	}
	// As in EAS, --json never prompts.
	o.nonInteractive = o.nonInteractive || inv.json
	if err := checkEASFlags(inv.ui, o.easFlags); err != nil {
		return err
	}
	if o.resourceClass != "" { // eas-cli's words
		inv.ui.warn("The --resource-class flag has been deprecated. Define the resource class in eas.json.")
	}
	dir := "."
	if len(pos) == 1 {
		dir = pos[0]
	}
	var priority *int
	if o.priority != "" {
		p, err := strconv.Atoi(o.priority)
		if err != nil || p < 0 || p > 3 {
			return usageErr("--priority must be 0 (highest), 1, 2 or 3 (lowest), got %q", o.priority)
		}
		priority = &p
	}
	if o.timeout != 0 && (o.timeout < time.Minute || o.timeout > 24*time.Hour) {
		return usageErr("--build-timeout must be between 1m and 24h, got %s", o.timeout)
	}
	if (o.logs || o.output != "" || o.force) && !o.wait {
		return usageErr("--logs, --output and --force go with --wait")
	}
	if strings.EqualFold(filepath.Ext(o.profileName), ".mobileprovision") {
		return usageErr("--profile names the eas.json build profile; pass provisioning profiles with --provisioning-profile %s", o.profileName)
	}
	if len(o.message) > 1024 {
		return usageErr("--message is longer than 1024 characters")
	}
	o.platform = strings.ToLower(strings.TrimSpace(o.platform))
	if o.platform != "" && o.platform != api.PlatformIOS && o.platform != api.PlatformAndroid && o.platform != "all" {
		return usageErr("unknown platform %q: use --platform android, ios or all", o.platform)
	}
	if err := o.sign.check(o.platform); err != nil {
		return err
	}
	root, appConfig, err := findProject(dir)
	if err != nil {
		return err
	}
	if err := checkProject(root); err != nil {
		return err
	}
	if err := checkRequireCommit(ctx, root); err != nil {
		return err
	}
	s, c, err := inv.keySession()
	if err != nil {
		return err
	}
	if o.platform == "" {
		if o.nonInteractive {
			return usageErr("which platform? pass --platform android, ios or all (--non-interactive never asks)")
		}
		if o.platform, err = a.askPlatform(inv); err != nil {
			return err
		}
		if err := o.sign.check(o.platform); err != nil {
			return err
		}
	}
	platforms := []string{o.platform}
	if o.platform == "all" {
		platforms = []string{api.PlatformAndroid, api.PlatformIOS}
		if o.idemKey != "" {
			return usageErr("--idempotency-key names one build; --platform all makes two")
		}
	}
	// Fail fast on a wrong key or an unreachable controller, before packing.
	if o.limits, err = controllerLimits(ctx, s, c); err != nil {
		return err
	}
	// Everything is decided (and every problem reported) before any upload.
	builds := make([]*resolved, len(platforms))
	lookups := s.farm(c)
	for i, platform := range platforms {
		r, err := resolveBuild(ctx, root, platform, o.profileName, o.project, o.resourceClass, lookups)
		if err != nil {
			return err
		}
		r.spec.Message, r.spec.ClearCache = o.message, o.clearCache
		if o.autoSubmit || o.autoSubmitProfile != "" {
			if err := a.resolveAutoSubmit(root, r, o.autoSubmitProfile); err != nil {
				return err
			}
		}
		if platform == api.PlatformIOS {
			if r.certs, err = a.certsZip(&o.sign); err != nil {
				return err
			}
			if err := requireIOSSigning(r, r.certs); err != nil {
				return err
			}
		}
		builds[i] = r
	}
	// Every platform resolved: the local version source's bumps are made
	// now, before anything is packed, as eas-cli makes them.
	for _, r := range builds {
		if r.bump == nil {
			continue
		}
		if err := r.bump.apply(); err != nil {
			return &cliError{code: ExitFailed, msg: "bump the app version (autoIncrement)", err: err}
		}
		// Said even with --json: the developer's files changed.
		for _, c := range r.bump.changes {
			inv.ui.warn("autoIncrement (%s, local version source) changed the project: %s", r.spec.Platform, c)
		}
	}
	var subs []submission
	for _, r := range builds {
		sub, err := a.submitOne(ctx, inv, s, c, r, appConfig, priority, o)
		if err != nil {
			return err
		}
		subs = append(subs, sub)
	}
	if o.wait {
		// Every build is queued before the first is followed.
		var errs []error
		var ended []api.Build
		for _, sub := range subs {
			var final api.Build
			var err error
			if sub.reused != nil {
				final, err = *sub.reused, a.downloadReused(ctx, inv, s, *sub.reused, o)
			} else {
				final, err = a.waitAndDownload(ctx, inv, s, sub.resp.ID, o)
			}
			if final.ID != "" {
				ended = append(ended, final)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
		if inv.json {
			// As eas build: the builds as they ended, then the exit code.
			if err := emitEAS(inv, s.baseURL, ended); err != nil {
				return err
			}
		}
		if len(errs) > 0 {
			return errs[0]
		}
		return nil
	}
	if inv.json {
		queued := make([]api.Build, len(subs))
		for i, sub := range subs {
			if sub.reused != nil {
				queued[i] = *sub.reused
			} else if queued[i], err = s.getBuild(ctx, sub.resp.ID); err != nil {
				return err
			}
		}
		return emitEAS(inv, s.baseURL, queued)
	}
	return nil
}

// submission is what submitting one build gave.
type submission struct {
	resp   api.SubmitResponse
	reused *api.Build // with --reuse, the completed build returned instead of a new one
}

// submitOne packs and uploads one resolved build; with --reuse it first
// asks for a completed build of the same tree and returns that instead.
func (a *App) submitOne(ctx context.Context, inv *invocation, s *session, c *api.Client, r *resolved, appConfig string, priority *int, o submitOpts) (submission, error) {
	platform, certs := r.spec.Platform, r.certs
	for _, w := range r.warnings {
		inv.ui.warn("%s", w)
	}
	plan, err := pack.Scan(ctx, r.uploadRoot, pack.Options{AppDir: r.spec.Project.AppDir, Exclude: r.exclude})
	if err != nil {
		return submission{}, &cliError{code: ExitFailed, msg: "read the project", err: err}
	}
	for _, w := range plan.Warnings {
		inv.ui.warn("%s", w)
	}
	if plan.Files == 0 {
		return submission{}, failErr("check .easignore / .gitignore", "nothing to upload: every file of %s is excluded", r.uploadRoot)
	}
	if err := checkUpload(plan, o.limits.MaxSourceBytes); err != nil {
		return submission{}, err
	}
	describePlan(inv.ui, plan, appConfig)
	if len(r.exclude) > 0 {
		inv.ui.info("Sent sealed, never in the archive: %s", strings.Join(r.exclude, ", "))
	}
	describeSpec(inv.ui, r.spec)

	spec := r.spec
	req := api.SubmitRequest{Platform: platform, Profile: spec.ProfileName, Priority: priority, TimeoutSeconds: int(o.timeout.Seconds()),
		Spec: &spec, Credentials: r.credentials, AutoSubmit: r.autoSubmit}
	var src *packedSource // with --reuse: packed before anything is sent
	if o.reuse {
		if src, err = s.packFile(ctx, plan); err != nil {
			return submission{}, wrapOp("pack the project", err)
		}
		defer src.close()
		spec.SourceFingerprint = src.fingerprint
		b, err := s.reusableBuild(ctx, c, &spec)
		if err != nil {
			return submission{}, err
		}
		if b != nil {
			if r.autoSubmit != nil { // the reused build is submitted as a new one would be
				auto := *r.autoSubmit
				auto.BuildID = b.ID
				if err := s.retry(ctx, "queue the reused build's submission", false, func(ctx context.Context) error {
					_, err := c.SubmitToStore(ctx, auto)
					return err
				}); err != nil {
					return submission{}, wrapOp("queue the reused build's submission", err)
				}
			}
			if !inv.json && !o.wait {
				printReused(inv.ui, *b)
			}
			return submission{reused: b}, nil
		}
		inv.ui.info("No completed build of this source, profile, credentials and variables to reuse: building.")
	}
	fp := submitFingerprint(s, plan, req, certs)
	key, resumed, err := s.idempotencyKey(o.idemKey, fp, r.uploadRoot)
	if err != nil {
		return submission{}, err
	}
	if resumed {
		inv.ui.info("Sending again an earlier submit of this project whose answer never came, with its Idempotency-Key: no second build.")
	}
	req.IdempotencyKey = key
	var sub api.SubmitResponse
	if src != nil {
		sub, err = s.uploadPacked(ctx, c, plan, req, certs, src)
	} else {
		sub, err = s.upload(ctx, c, plan, req, certs)
	}
	if err != nil {
		// The controller may have made the build: keep the key for a re-run.
		const again = "run the same command again: it sends the same Idempotency-Key, so the controller will not create a second build"
		if errors.Is(err, context.Canceled) || ctx.Err() != nil {
			return submission{}, &cliError{code: ExitInterrupted, msg: "interrupted during the upload", hint: again}
		}
		if isNetworkError(err) || api.StatusOf(err) >= 500 {
			msg, hint := describe(err, s)
			return submission{}, &cliError{code: exitCode(err), msg: msg, hint: again + "; " + hint}
		}
		s.forgetPending(fp)
		return submission{}, wrapOp("submit", err)
	}
	if spec.Versions.Remote() && (sub.Versions == nil || sub.Versions.BuildVersion == "") {
		inv.ui.warn("the controller did not decide the build's %s (it predates the remote version source): the build will refuse to run; upgrade the controller", api.BuildVersionName(platform))
	}
	if err := s.recordSubmit(sub, platform, fp); err != nil {
		inv.ui.warn("%v (status, logs and download still work with your API key)", err)
	}
	if !inv.json && !o.wait {
		printSubmitted(inv.ui, sub, req)
	}
	return submission{resp: sub}, nil
}

// reusableBuild asks the controller for a completed build that made what
// spec would make; nil when there is none (or the controller predates
// reuse: both answer 404).
func (s *session) reusableBuild(ctx context.Context, c *api.Client, spec *api.BuildSpec) (*api.Build, error) {
	var b api.Build
	err := s.retry(ctx, "look for a build to reuse", true, func(ctx context.Context) error {
		var err error
		b, err = c.ReusableBuild(ctx, spec)
		return err
	})
	if api.StatusOf(err) == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, wrapOp("look for a build to reuse", err)
	}
	return &b, nil
}

// printReused tells what submit --reuse returned instead of a new build.
func printReused(u *ui, b api.Build) {
	when := ""
	if b.CompletedAt != nil {
		when = " on " + b.CompletedAt.Local().Format(time.DateTime)
	}
	u.printf("%s Build %s reused: it completed%s from the same source, profile, platform, credentials and variables; nothing was uploaded or built\n",
		u.o(cGreen, "✔"), u.o(cBold, b.ID), when)
	for _, art := range b.Artifacts {
		u.printf("  Artifact:    %s (%s)\n", art.Name, bytesize.SI(art.Size))
	}
	if b.InstallURL != nil {
		u.printf("  Install:     %s\n", *b.InstallURL)
	}
	u.printf("  Download:    expo-build build:download %s\n", b.ID)
}

// describeSpec tells the developer what was decided, before the upload.
func describeSpec(u *ui, spec api.BuildSpec) {
	what := fmt.Sprintf("Build profile %q for %s: %s distribution, environment %q", spec.ProfileName, spec.Platform, spec.Profile.Distribution, spec.Environment)
	if spec.Android != nil {
		what += ", gradlew " + spec.Android.GradleCommand
	}
	u.info("%s", what)
	app := spec.App.Name + " (" + spec.App.Slug
	if spec.App.Version != "" {
		app += " " + spec.App.Version
	}
	if spec.Platform == api.PlatformAndroid && spec.App.AndroidPackage != "" {
		app += ", " + spec.App.AndroidPackage
	}
	u.info("App %s) from %s; %s", app, spec.App.ConfigSource, describeProject(spec.Project))
	if v := spec.Versions; v != nil {
		name := api.BuildVersionName(spec.Platform)
		switch {
		case v.Remote() && v.Increment != "":
			u.info("Versions: app %s; %s: the farm's next (remote version source, autoIncrement)", v.AppVersion, name)
		case v.Remote():
			u.info("Versions: app %s; %s: the farm's current (remote version source)", v.AppVersion, name)
		default:
			u.info("Versions: app %s, %s %s (local version source)", cmp.Or(v.AppVersion, "?"), name, cmp.Or(v.BuildVersion, "?"))
		}
	}
	switch c := spec.Credentials; {
	case c.Android != nil:
		u.info("Signing: %s keystore, key %q, certificate SHA-256 %s", c.Source, c.Android.KeyAlias, c.Android.CertificateSHA256)
	case spec.Platform == api.PlatformAndroid:
		u.info("Signing: the debug key (no credentials)")
	}
}

func describeProject(p api.Project) string {
	s := p.PackageManager
	if p.PackageManagerVersion != "" {
		s += "@" + p.PackageManagerVersion
	}
	if p.Lockfile != "" {
		s += " (" + p.Lockfile + ", frozen install)"
	} else {
		s += " (no lockfile: the install is not frozen)"
	}
	if p.AppDir != "" {
		s += ", app at " + p.AppDir + " in the workspace"
	}
	return s
}

func printSubmitted(u *ui, sub api.SubmitResponse, req api.SubmitRequest) {
	where := string(sub.Status)
	if sub.QueuePosition != nil {
		where = fmt.Sprintf("position %d in the queue", *sub.QueuePosition)
	}
	what := req.Platform
	if req.Profile != "" {
		what += ", profile " + req.Profile
	}
	u.printf("%s Build %s queued (%s): %s\n", u.o(cGreen, "✔"), u.o(cBold, sub.ID), what, where)
	if v := sub.Versions; v != nil && v.BuildVersion != "" {
		u.printf("  Version:     %s (%s %s, %s version source)\n", cmp.Or(v.AppVersion, "?"), api.BuildVersionName(req.Platform), v.BuildVersion, v.Source)
	}
	u.printf("  Follow it:   expo-build build:view %s --watch\n", sub.ID)
	u.printf("  Live logs:   expo-build logs %s -f\n", sub.ID)
	u.printf("  Artifacts:   expo-build build:download %s\n", sub.ID)
}

func describePlan(u *ui, plan *pack.Plan, appConfig string) {
	rules := "built-in exclusions"
	if plan.IgnoreFile != "" {
		rules += " + " + plan.IgnoreFile
	}
	u.info("Project %s (%s): %d files, %s", plan.Root, appConfig, plan.Files, bytesize.SI(plan.Bytes))
	if plan.Excluded > 0 {
		sample := plan.ExcludedAt
		more := ""
		if len(sample) > 6 {
			sample, more = sample[:6], fmt.Sprintf(" and %d more", plan.Excluded-6)
		}
		u.info("Left out by %s: %s%s", rules, strings.Join(sample, ", "), more)
	}
}

// projectConfigs are the files that mark an Expo project's root.
func projectConfigs() []string {
	return []string{"app.json", "app.config.js", "app.config.ts", "app.config.mjs", "app.config.cjs", "app.config.json"}
}

// findProject returns the Expo project holding dir: dir itself or its
// nearest parent with an app config.
func findProject(dir string) (root, appConfig string, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", usageErr("project path %s: %v", dir, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", "", usageErr("project path %s: %v", dir, err)
	}
	if !st.IsDir() {
		return "", "", usageErr("project path %s is not a directory", dir)
	}
	for d := abs; ; {
		for _, name := range projectConfigs() {
			if fi, err := os.Stat(filepath.Join(d, name)); err == nil && fi.Mode().IsRegular() {
				return d, name, nil
			}
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	return "", "", &cliError{code: ExitUsage, msg: fmt.Sprintf("no Expo project at %s: no app.json or app.config.* there or in a parent directory", abs),
		hint: `run expo-build in your project, or pass its path: expo-build build path/to/app; a project without an app config needs an app.json such as {"expo":{"name":"My App","slug":"my-app","android":{"package":"com.example.myapp"},"ios":{"bundleIdentifier":"com.example.myapp"}}}`}
}

func (a *App) askPlatform(inv *invocation) (string, error) {
	if !a.StdinTTY || inv.json {
		return "", usageErr("which platform? pass --platform android, ios or all")
	}
	br := bufio.NewReader(a.Stdin)
	for range 3 {
		fmt.Fprint(a.Stderr, "Platform to build (android/ios/all): ")
		line, err := br.ReadString('\n')
		switch p := strings.ToLower(strings.TrimSpace(line)); p {
		case "ios", "i":
			return api.PlatformIOS, nil
		case "android", "a":
			return api.PlatformAndroid, nil
		case "all":
			return "all", nil
		}
		if err != nil {
			break
		}
	}
	return "", usageErr("no platform chosen: pass --platform android, ios or all")
}

// submitFingerprint identifies "the same submit": the controller, the key,
// the project's content (by names, sizes and times), the fields and the
// signing material.
func submitFingerprint(s *session, plan *pack.Plan, req api.SubmitRequest, certs []byte) string {
	h := sha256.New()
	keyHash := sha256.Sum256([]byte(s.apiKey))
	certsHash := sha256.Sum256(certs)
	prio := -1
	if req.Priority != nil {
		prio = *req.Priority
	}
	spec, _ := json.Marshal(req.Spec)
	creds, _ := json.Marshal(req.Credentials)
	auto, _ := json.Marshal(req.AutoSubmit)
	specHash, credsHash, autoHash := sha256.Sum256(spec), sha256.Sum256(creds), sha256.Sum256(auto)
	fmt.Fprintf(h, "%s\x00%x\x00%s\x00%s\x00%s\x00%d\x00%d\x00%x\x00%x\x00%x\x00%x", s.baseURL, keyHash, plan.Fingerprint(), req.Platform, req.Profile, prio, req.TimeoutSeconds, certsHash, specHash, credsHash, autoHash)
	return hex.EncodeToString(h.Sum(nil))
}

// idempotencyKey returns the key for this submit: the explicit one, the one
// of an earlier identical submit whose answer was lost, or a new one,
// recorded before the upload starts.
func (s *session) idempotencyKey(explicit, fp, project string) (key string, resumed bool, err error) {
	if explicit != "" {
		return explicit, false, nil
	}
	_, err = updateConfig(s.cfgPath, func(c *Config) error {
		if p, ok := c.PendingSubmits[fp]; ok && time.Since(p.StartedAt) < pendingTTL {
			key, resumed = p.IdempotencyKey, true
			return nil
		}
		b := make([]byte, 16)
		rand.Read(b)
		key = "expo-build-" + hex.EncodeToString(b)
		if c.PendingSubmits == nil {
			c.PendingSubmits = map[string]PendingSubmit{}
		}
		c.PendingSubmits[fp] = PendingSubmit{IdempotencyKey: key, Project: project, StartedAt: time.Now().UTC()}
		return nil
	})
	if err != nil {
		return "", false, fmt.Errorf("record the submit in the config file: %w", err)
	}
	return key, resumed, nil
}

func (s *session) forgetPending(fp string) {
	updateConfig(s.cfgPath, func(c *Config) error { //nolint:errcheck // it expires anyway
		delete(c.PendingSubmits, fp)
		return nil
	})
}

// recordSubmit stores the build token and ends the pending submit.
func (s *session) recordSubmit(sub api.SubmitResponse, platform, fp string) error {
	s.ui.secrets = append(s.ui.secrets, sub.AccessToken)
	_, err := updateConfig(s.cfgPath, func(c *Config) error {
		delete(c.PendingSubmits, fp)
		if sub.AccessToken != "" {
			if c.Builds == nil {
				c.Builds = map[string]BuildRecord{}
			}
			c.Builds[sub.ID] = BuildRecord{Token: sub.AccessToken, ControllerURL: s.baseURL, Platform: platform, SubmittedAt: sub.SubmittedAt}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save the build token: %w", err)
	}
	if s.cfg.Builds == nil {
		s.cfg.Builds = map[string]BuildRecord{}
	}
	s.cfg.Builds[sub.ID] = BuildRecord{Token: sub.AccessToken, ControllerURL: s.baseURL, Platform: platform, SubmittedAt: sub.SubmittedAt}
	return nil
}

var errUploadEnded = errors.New("upload ended")

// upload sends the project. When the controller's store takes direct
// uploads (S3), the archive goes straight to the store (packFile, then
// uploadPacked); otherwise it is packed and sent to the controller through
// a pipe: the archive is never whole in memory or on disk. A network error
// repacks and resends with the same Idempotency-Key. Either way
// req.Spec.SourceFingerprint is the packed tree's once it returns.
func (s *session) upload(ctx context.Context, c *api.Client, plan *pack.Plan, req api.SubmitRequest, certs []byte) (api.SubmitResponse, error) {
	// Only the mode is asked here; a failure of this call leaves the
	// streamed path, whose own retries and messages apply.
	if mode, err := c.StartSourceUpload(ctx, api.DirectUploadRequest{Name: "source.tar.gz"}); err == nil && mode.Direct {
		src, err := s.packFile(ctx, plan)
		if err != nil {
			return api.SubmitResponse{}, err
		}
		defer src.close()
		req.Spec.SourceFingerprint = src.fingerprint
		return s.uploadPacked(ctx, c, plan, req, certs, src)
	}
	return s.uploadStreamed(ctx, c, plan, req, certs)
}

// uploadStreamed packs the project into the submit's body. The spec goes
// after the source (api.Client.Submit), so each attempt's copy of it gets
// the fingerprint of what that attempt packed before it is sent.
func (s *session) uploadStreamed(ctx context.Context, c *api.Client, plan *pack.Plan, req api.SubmitRequest, certs []byte) (api.SubmitResponse, error) {
	var out api.SubmitResponse
	err := s.retry(ctx, "upload", true, func(ctx context.Context) error {
		bar := s.ui.newProgress("Uploading", plan.Bytes)
		bar.detail = func() string { return "sent " + bytesize.SI(bar.moved.Load()) }
		packCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		pr, pw := io.Pipe()
		spec := *req.Spec
		packed := make(chan error, 1)
		go func() {
			fp, err := plan.Write(packCtx, pw, func(n int64) { bar.done.Store(n) })
			spec.SourceFingerprint = fp // before the pipe ends: the spec part is encoded after the source's end was read
			pw.CloseWithError(err)
			packed <- err
		}()
		r := req
		r.Spec = &spec
		r.Source = &countingReader{r: pr, n: &bar.moved}
		if certs != nil {
			r.Certs = bytes.NewReader(certs)
		}
		resp, err := c.Submit(ctx, r)
		pr.CloseWithError(errUploadEnded)
		cancel()
		perr := <-packed
		elapsed := bar.finish()
		if perr != nil && !errors.Is(perr, errUploadEnded) && !errors.Is(perr, context.Canceled) && !errors.Is(perr, io.ErrClosedPipe) {
			return &packError{err: perr}
		}
		if err != nil {
			return err
		}
		sent := bar.moved.Load()
		s.ui.info("Uploaded %s (%d files, %s before compression) in %s, %s/s", bytesize.SI(sent), plan.Files, bytesize.SI(plan.Bytes),
			humanDuration(elapsed), bytesize.SI(int64(float64(sent)/max(elapsed.Seconds(), 0.001))))
		req.Spec.SourceFingerprint = spec.SourceFingerprint
		out = resp
		return nil
	})
	return out, err
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// packedSource is the project packed into a temporary file.
type packedSource struct {
	f    *os.File
	size int64
	// sha256 and partSHA256 are the archive's and, when it is sent in
	// parts, its parts' (api.UploadSums), told to the store before the
	// first byte.
	sha256      string
	partSHA256  []string
	fingerprint string // of the tree (api.BuildSpec.SourceFingerprint)
}

func (p *packedSource) close() {
	p.f.Close()
	os.Remove(p.f.Name())
}

// packFile packs the project into a temporary file, hashing it on the way.
func (s *session) packFile(ctx context.Context, plan *pack.Plan) (*packedSource, error) {
	f, err := os.CreateTemp("", "expo-build-source-*.tar.gz")
	if err != nil {
		return nil, &packError{err: fmt.Errorf("create a temporary file for the archive: %w", err)}
	}
	src := &packedSource{f: f}
	bar := s.ui.newProgress("Packing", plan.Bytes)
	sums := api.NewUploadSums(-1)
	src.fingerprint, err = plan.Write(ctx, io.MultiWriter(f, sums), func(n int64) { bar.done.Store(n) })
	bar.finish()
	var decl api.DirectUploadRequest
	if err == nil {
		decl, err = sums.Declare("source.tar.gz", f)
	}
	if err != nil {
		src.close()
		return nil, &packError{err: err}
	}
	src.size, src.sha256, src.partSHA256 = decl.Size, decl.SHA256, decl.PartSHA256
	return src, nil
}

// uploadPacked sends a packed project to the store with the URLs the
// controller signs, in parts when large, and submits naming the upload's
// ticket. A controller without direct uploads, a store this machine cannot
// reach, or a controller that declines the file, gets it through the
// submit.
func (s *session) uploadPacked(ctx context.Context, c *api.Client, plan *pack.Plan, req api.SubmitRequest, certs []byte, src *packedSource) (api.SubmitResponse, error) {
	f, size, sum := src.f, src.size, src.sha256
	project := req.Project
	if req.Spec != nil {
		project = req.Spec.BuildProject()
	}
	var out api.SubmitResponse
	streamed := false
	// The ticket of an upload sent: a submit retried after a network error
	// names it again rather than sending the archive again (a first submit
	// that went through is found by its Idempotency-Key).
	ticket := ""
	err := s.retry(ctx, "upload", true, func(ctx context.Context) error {
		r := req
		if certs != nil {
			r.Certs = bytes.NewReader(certs)
		}
		r.SourceTicket = ticket
		bar := s.ui.newProgress("Uploading", size)
		bar.detail = func() string { return "sent " + bytesize.SI(bar.moved.Load()) }
		defer bar.finish()
		if !streamed && ticket == "" {
			up, err := c.StartSourceUpload(ctx, api.DirectUploadRequest{Name: "source.tar.gz", Size: size, SHA256: sum, PartSHA256: src.partSHA256, Project: project})
			switch {
			case api.Streamed(up, err):
				streamed = true
			case err != nil:
				return err
			default:
				err := api.SendDirect(ctx, c.HTTP, up, countingReaderAt{r: f, n: &bar.moved, done: &bar.done}, size)
				if errors.Is(err, api.ErrStoreUnreachable) {
					s.ui.warn("the object store is unreachable from here (%v); sending the archive through the controller", err)
					streamed = true
					break
				}
				if err != nil {
					return err
				}
				ticket, r.SourceTicket = up.Ticket, up.Ticket
			}
		}
		if r.SourceTicket == "" {
			r.Source = &countingReader{r: io.NewSectionReader(f, 0, size), n: &bar.moved}
		}
		resp, err := c.Submit(ctx, r)
		if err != nil {
			return err
		}
		s.ui.info("Uploaded %s (%d files, %s before compression) in %s", bytesize.SI(size), plan.Files, bytesize.SI(plan.Bytes), humanDuration(time.Since(bar.start)))
		out = resp
		return nil
	})
	return out, err
}

// countingReaderAt counts the bytes read through it, for the progress bar.
type countingReaderAt struct {
	r       io.ReaderAt
	n, done *atomic.Int64
}

func (c countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.done.Store(c.n.Add(int64(n)))
	return n, err
}

// farm is what resolving a build asks the controller, through session s.
func (s *session) farm(c *api.Client) farm {
	return farm{
		credentials: func(ctx context.Context, project string) ([]api.Credential, error) {
			var list api.CredentialList
			err := s.retry(ctx, "list the farm's credentials", true, func(ctx context.Context) error {
				var err error
				list, err = c.ListCredentials(ctx, project)
				return err
			})
			if err != nil {
				return nil, wrapOp("list the farm's credentials", err)
			}
			return list.Credentials, nil
		},
		variables: func(ctx context.Context, project, environment string) ([]api.Variable, error) {
			var list api.VariableList
			err := s.retry(ctx, "list the farm's variables", true, func(ctx context.Context) error {
				var err error
				list, err = c.ListVariables(ctx, project, environment)
				return err
			})
			if err != nil {
				return nil, wrapOp("list the farm's variables", err)
			}
			return list.Variables, nil
		},
		offers: func(ctx context.Context, project string) ([]api.Offer, error) {
			var list api.FarmOffers
			err := s.retry(ctx, "ask what the farm's workers offer", true, func(ctx context.Context) error {
				var err error
				list, err = c.FarmOffers(ctx, project)
				return err
			})
			if api.StatusOf(err) == http.StatusNotFound {
				return nil, usageErr("the controller is older than this expo-build and cannot route builds by resourceClass, image or tool versions; remove those keys from eas.json, or update the controller")
			}
			if err != nil {
				return nil, wrapOp("ask what the farm's workers offer", err)
			}
			return list.Offers, nil
		},
	}
}
