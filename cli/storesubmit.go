package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/cli/easjson"
)

const submitHelp = `Sends a finished build to its store, as ` + "`eas submit`" + ` does, from the controller: Google Play
for Android (an edit, the upload, the track's release, the commit), App Store Connect for iOS (the
.ipa uploaded through its API, processed until ready for TestFlight, added to the profile's
groups). It waits for the submission to end and prints its log; --no-wait returns once it is
queued. It exits 1 when the store refused it. To build, run ` + "`expo-build build`" + `.

-p/--platform android|ios|all, -e/--profile NAME (eas.json's submit profile, default production:
track, releaseStatus, rollout, changesNotSentForReview, applicationId) and the build: --latest
(the project's newest completed build of the platform) or --id BUILD. The key is
serviceAccountKeyPath's file (sent sealed, for this submission only), else the project's key kept
with ` + "`expo-build credentials set --platform android --service-account-key FILE`" + `. iOS: ascAppId,
bundleIdentifier, appleTeamId, groups, and the API key ascApiKeyPath (.p8), ascApiKeyId,
ascApiKeyIssuerId (Apple ID password sign-in is not supported). With --platform all, every
platform's build and profile is found before anything is queued.

What differs from EAS: --path FILE and --url URL (an archive built elsewhere) are not supported
yet; --what-to-test and -g/--groups are refused; --verbose, --verbose-fastlane and
--auto-testflight-setup have nothing to do.`

// maxKeyFile bounds a key file read from eas.json's paths.
const maxKeyFile = 64 << 10

// cmdSubmit is eas submit: it queues the submission of a finished build
// per platform, then follows each.
func (a *App) cmdSubmit(ctx context.Context, inv *invocation, args []string) error {
	fs := inv.flags()
	platform := fs.String("platform", "", "`PLATFORM`: android, ios or all")
	inv.alias(fs, "p", "platform")
	profileName := fs.String("profile", "", "eas.json submit profile `NAME` (default: production)")
	inv.alias(fs, "e", "profile")
	latest := fs.Bool("latest", false, "submit the project's newest completed build of the platform")
	id := fs.String("id", "", "submit build `ID`")
	path := fs.String("path", "", "an archive `FILE` built elsewhere (not supported yet)")
	url := fs.String("url", "", "an archive's `URL` (not supported yet)")
	projectFlag := fs.String("project", "", "the farm project `SLUG` (default: the app's slug)")
	wait := fs.Bool("wait", true, "wait for the submission to end and print its log (the default, as in EAS)")
	noWait := fs.Bool("no-wait", false, "return once the submission is queued")
	fs.Bool("non-interactive", false, "never prompt (expo-build submit never does)")
	easFlags := easSubmitFlags()
	registerEASFlags(fs, easFlags)
	pos, err := inv.parse(fs, args, 0, len(args))
	var ce *cliError
	if errors.As(err, &ce) && strings.HasPrefix(ce.msg, "flag provided but not defined") {
		// Likely a flag of the old `expo-build submit`, which built.
		ce.hint = "`expo-build submit` sends a finished build to the stores, as `eas submit`; to build, run `expo-build build`; " + ce.hint
	}
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("`submit` now sends a finished build to the stores, as `eas submit`; to build, run `expo-build build %s`", pos[0])
	}
	if err := resolveWait(fs, wait, noWait); err != nil {
		return err
	}
	if err := checkEASFlags(inv.ui, easFlags); err != nil {
		return err
	}
	platforms := []string{*platform}
	switch {
	case *path != "" || *url != "":
		return usageErr("--path and --url are not supported yet: build on the farm and submit with --latest or --id BUILD")
	case *latest == (*id != ""):
		return usageErr("which build? pass --latest or --id BUILD (see expo-build build:list); to build the project, run `expo-build build`")
	case *platform == "all" && *id != "":
		return usageErr("--id names one build, of one platform: pass --platform android or --platform ios")
	case *platform == "all":
		platforms = []string{api.PlatformAndroid, api.PlatformIOS}
	case *platform != api.PlatformAndroid && *platform != api.PlatformIOS:
		return usageErr("pass --platform android, ios or all")
	}
	root, _, err := findProject(".")
	if err != nil {
		return &cliError{code: ExitUsage, msg: "run in the app's directory: eas.json's submit profile is read from it", err: err}
	}
	// Every platform's profile and build is found before anything is
	// queued: -p all submits both or neither.
	profiles := make([]easjson.SubmitProfile, len(platforms))
	for i, p := range platforms {
		if profiles[i], err = a.submitProfile(root, p, *profileName); err != nil {
			return err
		}
	}
	s, c, err := inv.keySession()
	if err != nil {
		return err
	}
	reqs := make([]api.SubmissionRequest, len(platforms))
	for i, p := range platforms {
		if reqs[i], err = a.submissionRequest(ctx, s, c, root, p, profiles[i], *id, *projectFlag); err != nil {
			return err
		}
	}
	var queued []api.Submission
	for _, req := range reqs {
		var sub api.Submission
		if err := s.retry(ctx, "queue the submission", false, func(ctx context.Context) error {
			sub, err = c.SubmitToStore(ctx, req)
			return err
		}); err != nil {
			return wrapOp("queue the submission", err)
		}
		if !inv.json {
			inv.ui.printf("%s Queued submission %s of build %s to %s\n", inv.ui.o(cGreen, "✔"), sub.ID, req.BuildID, storeName(req.Platform))
		}
		queued = append(queued, sub)
	}
	if !*wait {
		if inv.json {
			return inv.ui.emit(queued)
		}
		return nil
	}
	var ended []api.Submission
	var errs []error
	for _, sub := range queued {
		final, err := a.followSubmission(ctx, inv, s, c, sub.ID)
		if final.ID != "" {
			ended = append(ended, final)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if inv.json {
		// As build --json: the submissions as they ended, then the exit code.
		if err := inv.ui.emit(ended); err != nil {
			return err
		}
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// submissionRequest is the submission of build id (or of the project's
// newest completed build of platform) with profile prof.
func (a *App) submissionRequest(ctx context.Context, s *session, c *api.Client, root, platform string, prof easjson.SubmitProfile, id, projectFlag string) (api.SubmissionRequest, error) {
	var b api.Build
	if id == "" {
		project, err := a.projectSlug(ctx, projectFlag)
		if err != nil {
			return api.SubmissionRequest{}, err
		}
		var list api.BuildList
		if err := s.retry(ctx, "find the latest build", true, func(ctx context.Context) error {
			list, err = c.ListBuilds(ctx, api.ListOptions{Platform: platform, Status: string(api.StatusCompleted), Project: project, Limit: 1, WithSpec: true})
			return err
		}); err != nil {
			return api.SubmissionRequest{}, wrapOp("find the latest build", err)
		}
		if len(list.Builds) == 0 {
			return api.SubmissionRequest{}, failErr("build it first: expo-build build --platform "+platform, "project %s has no completed %s build", project, platform)
		}
		b = list.Builds[0]
	} else {
		var err error
		if b, err = s.getBuild(ctx, id); err != nil {
			return api.SubmissionRequest{}, err
		}
	}
	req := api.SubmissionRequest{Platform: platform, BuildID: b.ID}
	var err error
	req.Profile, req.Secrets, err = a.submissionFor(root, prof, b.Spec)
	return req, err
}

func storeName(platform string) string {
	if platform == api.PlatformIOS {
		return "App Store Connect"
	}
	return "Google Play"
}

// submitProfile resolves eas.json's submit profile for platform.
func (a *App) submitProfile(root, platform, name string) (easjson.SubmitProfile, error) {
	f, err := easjson.Load(root)
	if err != nil {
		return easjson.SubmitProfile{}, &cliError{code: ExitUsage, msg: "eas.json", err: err}
	}
	p, err := f.ResolveSubmit(platform, name)
	if err != nil {
		return p, &cliError{code: ExitUsage, msg: "eas.json", err: err}
	}
	if p.AppleID != "" {
		return p, usageErr("eas.json: submit profile %q signs in with an Apple ID (appleId): the farm does not support Apple ID password sign-in; use an App Store Connect API key (ascApiKeyPath, ascApiKeyId, ascApiKeyIssuerId)", p.Name)
	}
	return p, nil
}

// submissionFor is the wire profile for a build, the app's identity filled
// from its spec where eas.json leaves it out, and the keys the profile's
// paths name (nil: the project's kept key).
func (a *App) submissionFor(root string, p easjson.SubmitProfile, spec *api.BuildSpec) (api.SubmitProfile, *api.SubmitSecrets, error) {
	out := p.SubmitProfile
	if out.Android != nil {
		android := *out.Android
		if android.ApplicationID == "" && spec != nil {
			android.ApplicationID = spec.App.AndroidPackage
		}
		if android.ApplicationID == "" {
			return out, nil, usageErr("which app? set applicationId in eas.json's submit profile %q (the build does not say its android.package)", p.Name)
		}
		out.Android = &android
		if p.ServiceAccountKeyPath == "" {
			return out, nil, nil
		}
		key, err := a.readKeyFile(root, p.ServiceAccountKeyPath, "serviceAccountKeyPath")
		if err != nil {
			return out, nil, err
		}
		return out, &api.SubmitSecrets{ServiceAccountKey: key}, nil
	}
	ios := *out.IOS
	if ios.BundleIdentifier == "" && spec != nil {
		ios.BundleIdentifier = spec.App.IOSBundleID
	}
	out.IOS = &ios
	if p.ASCAPIKeyPath == "" {
		return out, nil, nil
	}
	key, err := a.readKeyFile(root, p.ASCAPIKeyPath, "ascApiKeyPath")
	if err != nil {
		return out, nil, err
	}
	return out, &api.SubmitSecrets{ASCAPIKey: &api.ASCAPIKey{IssuerID: os.Expand(p.ASCAPIKeyIssuerID, a.getenv), KeyID: os.Expand(p.ASCAPIKeyID, a.getenv), PrivateKey: key}}, nil
}

// keyFilePath is a key path of eas.json, $VARIABLES expanded (as eas-cli
// evaluates them), relative to the project.
func (a *App) keyFilePath(root, p string) string {
	p = os.Expand(p, a.getenv)
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	return p
}

// readKeyFile reads a key file eas.json names.
func (a *App) readKeyFile(root, p, field string) ([]byte, error) {
	full := a.keyFilePath(root, p)
	f, err := os.Open(full)
	if err != nil {
		return nil, usageErr("eas.json's %s: %v", field, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, usageErr("eas.json's %s: read %s: %v", field, full, err)
	}
	if len(b) > maxKeyFile {
		return nil, usageErr("eas.json's %s: %s is larger than %d bytes: it is not a key file", field, full, maxKeyFile)
	}
	return b, nil
}

// followSubmission prints a submission's log as it grows until it ends,
// and returns it as it ended; a failed submission is exit 1.
func (a *App) followSubmission(ctx context.Context, inv *invocation, s *session, c *api.Client, id string) (api.Submission, error) {
	shown := 0
	for {
		var sub api.Submission
		err := s.retry(ctx, "read the submission", true, func(ctx context.Context) error {
			var err error
			sub, err = c.GetSubmission(ctx, id)
			return err
		})
		if err != nil {
			return sub, wrapOp("read the submission", err)
		}
		if !inv.json && len(sub.Log) > shown {
			inv.ui.printf("%s", sub.Log[shown:])
			shown = len(sub.Log)
		}
		if sub.Status.Terminal() {
			if sub.Status == api.SubmissionFailed {
				return sub, failErr("fix what the store says, then run expo-build submit again", "submission %s failed: %s", id, cmp.Or(strings.TrimSpace(ptrOr(sub.ErrorMessage)), "no reason given"))
			}
			if !inv.json {
				inv.ui.printf("%s Submitted: %s\n", inv.ui.o(cGreen, "✔"), describeResult(sub.Result))
			}
			return sub, nil
		}
		select {
		case <-ctx.Done():
			return sub, ctx.Err()
		case <-time.After(a.pollInterval()):
		}
	}
}

func ptrOr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func describeResult(r *api.SubmissionResult) string {
	if r == nil {
		return "done"
	}
	if r.Track != "" {
		return fmt.Sprintf("version code %d is in track %s", r.VersionCode, r.Track)
	}
	return r.Store
}

// resolveAutoSubmit decides the submission --auto-submit queues with r:
// eas.json's submit profile name (--auto-submit-with-profile), else the
// one named as the build profile, else the defaults. The key file it
// names is sent sealed, never in the source archive.
func (a *App) resolveAutoSubmit(root string, r *resolved, name string) error {
	platform := r.spec.Platform
	prof, err := a.submitProfile(root, platform, cmp.Or(name, r.spec.ProfileName))
	var missing *easjson.MissingProfileError
	if name == "" && errors.As(err, &missing) {
		prof, err = a.submitProfile(root, platform, "")
	}
	if err != nil {
		return err
	}
	profile, secrets, err := a.submissionFor(root, prof, &r.spec)
	if err != nil {
		return fmt.Errorf("--auto-submit: %w", err)
	}
	for _, p := range []string{prof.ServiceAccountKeyPath, prof.ASCAPIKeyPath} {
		if p == "" {
			continue
		}
		if rel, err := filepath.Rel(r.uploadRoot, a.keyFilePath(root, p)); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			r.exclude = append(r.exclude, filepath.ToSlash(rel))
		}
	}
	r.autoSubmit = &api.SubmissionRequest{Platform: platform, Profile: profile, Secrets: secrets}
	return nil
}
