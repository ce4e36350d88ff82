package cli

import (
	"cmp"
	"flag"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

// The build:* commands print builds as eas-cli prints its BuildFragment
// with --json (its fields' names, enum values upper-case, absent values
// left out), so a script written against `eas build:list --json` reads
// ours. Fields EAS has and the farm does not (runtime, fingerprint,
// initiatingActor, metrics, logFiles) are left out, as EAS leaves out nulls.
type easBuild struct {
	ID                string        `json:"id"`
	Status            string        `json:"status"`
	Platform          string        `json:"platform"`
	Error             *easError     `json:"error,omitempty"`
	Artifacts         *easArtifacts `json:"artifacts,omitempty"`
	App               *easApp       `json:"app,omitempty"`
	UpdateChannel     *easNamed     `json:"updateChannel,omitempty"`
	Distribution      string        `json:"distribution,omitempty"`
	IOSEnterprise     string        `json:"iosEnterpriseProvisioning,omitempty"`
	BuildProfile      string        `json:"buildProfile,omitempty"`
	AppIdentifier     string        `json:"appIdentifier,omitempty"`
	SDKVersion        string        `json:"sdkVersion,omitempty"`
	AppVersion        string        `json:"appVersion,omitempty"`
	AppBuildVersion   string        `json:"appBuildVersion,omitempty"`
	GitCommitHash     string        `json:"gitCommitHash,omitempty"`
	QueuePosition     *int          `json:"queuePosition,omitempty"`
	CreatedAt         time.Time     `json:"createdAt"`
	CompletedAt       *time.Time    `json:"completedAt,omitempty"`
	Message           string        `json:"message,omitempty"`
	ExpirationDate    *time.Time    `json:"expirationDate,omitempty"`
	IsForIOSSimulator bool          `json:"isForIosSimulator"`
	// The farm's own, under names EAS does not use: every artifact with
	// its size and SHA-256, the farm project, the install page.
	FarmArtifacts       []api.Artifact `json:"farmArtifacts,omitempty"`
	FarmProject         string         `json:"farmProject,omitempty"`
	StartedAt           *time.Time     `json:"startedAt,omitempty"`
	ArtifactsExpired    bool           `json:"artifactsExpired,omitempty"`
	InstallURL          *string        `json:"installUrl,omitempty"`
	InstallURLExpiresAt *time.Time     `json:"installUrlExpiresAt,omitempty"`
}

type easError struct {
	ErrorCode string `json:"errorCode,omitempty"`
	Message   string `json:"message,omitempty"`
}

type easArtifacts struct {
	BuildURL              string `json:"buildUrl,omitempty"`
	ApplicationArchiveURL string `json:"applicationArchiveUrl,omitempty"`
}

type easApp struct {
	Name         string    `json:"name,omitempty"`
	Slug         string    `json:"slug,omitempty"`
	OwnerAccount *easNamed `json:"ownerAccount,omitempty"`
}

type easNamed struct {
	Name string `json:"name"`
}

// toEAS shapes b as eas-cli prints a build; baseURL makes the artifacts'
// URLs absolute (they need the API key or the build's token, as every
// download from the farm does).
func toEAS(b api.Build, baseURL string) easBuild {
	out := easBuild{ID: b.ID, Status: easStatus(b), Platform: strings.ToUpper(b.Platform), BuildProfile: b.Profile,
		QueuePosition: b.QueuePosition, CreatedAt: b.SubmittedAt, CompletedAt: b.CompletedAt, ExpirationDate: b.ArtifactsExpireAt,
		FarmArtifacts: b.Artifacts, FarmProject: b.Project,
		StartedAt: b.StartedAt, ArtifactsExpired: b.ArtifactsExpired, InstallURL: b.InstallURL, InstallURLExpiresAt: b.InstallURLExpiresAt}
	if b.ErrorMessage != nil || b.ErrorCode != nil {
		out.Error = &easError{}
		if b.ErrorMessage != nil {
			out.Error.Message = plainText(*b.ErrorMessage)
		}
		if b.ErrorCode != nil {
			out.Error.ErrorCode = *b.ErrorCode
		}
	}
	if art, ok := appArchive(b.Artifacts); ok {
		u := strings.TrimSuffix(baseURL, "/") + "/api/builds/" + url.PathEscape(b.ID) + "/artifacts/" + url.PathEscape(art.Name)
		out.Artifacts = &easArtifacts{BuildURL: u, ApplicationArchiveURL: u}
	}
	if sp := b.Spec; sp != nil {
		out.App = &easApp{Name: sp.App.Name, Slug: sp.App.Slug}
		if sp.App.Owner != "" {
			out.App.OwnerAccount = &easNamed{Name: sp.App.Owner}
		}
		if sp.Profile.Channel != "" {
			out.UpdateChannel = &easNamed{Name: sp.Profile.Channel}
		}
		out.Distribution = strings.ToUpper(cmp.Or(sp.Profile.Distribution, "store"))
		out.IOSEnterprise = strings.ToUpper(sp.Profile.EnterpriseProvisioning)
		out.AppIdentifier, out.AppBuildVersion = appIdentity(*sp)
		out.SDKVersion, out.AppVersion = sp.App.SDKVersion, sp.App.Version
		// The versions the build was made with (a remote version source's
		// number is decided by the controller, not found in the app config).
		out.AppVersion, out.AppBuildVersion = cmp.Or(b.AppVersion, out.AppVersion), cmp.Or(b.BuildVersion, out.AppBuildVersion)
		out.GitCommitHash, out.Message = sp.GitCommit, sp.Message
		out.IsForIOSSimulator = sp.IOS != nil && sp.IOS.Simulator
	}
	return out
}

// appIdentity is the build's application id (Android package, iOS bundle
// id) and its build version (versionCode, buildNumber), from the spec.
func appIdentity(sp api.BuildSpec) (id, buildVersion string) {
	if sp.Platform == api.PlatformIOS {
		return sp.App.IOSBundleID, sp.App.IOSBuildNumber
	}
	if sp.App.AndroidVersionCode != 0 {
		buildVersion = strconv.Itoa(sp.App.AndroidVersionCode)
	}
	return sp.App.AndroidPackage, buildVersion
}

// easStatus is b's status as EAS names it.
func easStatus(b api.Build) string {
	switch b.Status {
	case api.StatusCompleted:
		return "FINISHED"
	case api.StatusFailed:
		return "ERRORED"
	case api.StatusCancelled:
		return "CANCELED"
	}
	if b.CancelRequested {
		return "PENDING_CANCEL"
	}
	if b.Status == api.StatusPending {
		return "IN_QUEUE"
	}
	return "IN_PROGRESS" // assigned (its VM starting) or building
}

// easStatuses are the values of EAS's --status filter.
var easStatuses = []string{"new", "in-queue", "in-progress", "pending-cancel", "errored", "finished", "canceled"}

// appArchive is the build's application archive (.aab, .apk, .ipa, a
// simulator .app packed as .tar.gz): the first artifact with such a name,
// else the first artifact (what a freeagent:build script made).
func appArchive(arts []api.Artifact) (api.Artifact, bool) {
	for _, a := range arts {
		if slices.Contains([]string{".aab", ".apk", ".ipa"}, path.Ext(a.Name)) || strings.HasSuffix(a.Name, ".app.tar.gz") {
			return a, true
		}
	}
	if len(arts) > 0 {
		return arts[0], true
	}
	return api.Artifact{}, false
}

// oldNameNote tells that a command was renamed to EAS's name; the old one
// still works, as it did, for one release.
func oldNameNote(old, now, why string) string {
	note := fmt.Sprintf("`expo-build %s` is now `expo-build %s`", old, now)
	if why != "" {
		note += " (" + why + ")"
	}
	return note + "; the old name goes away in the next release"
}

// emitEAS prints builds as `eas build --json` and `eas build:list --json`
// do: one array.
func emitEAS(inv *invocation, baseURL string, builds []api.Build) error {
	out := make([]easBuild, len(builds))
	for i, b := range builds {
		out[i] = toEAS(b, baseURL)
	}
	return inv.ui.emit(out)
}

// easFlag is a flag of `eas build` or `eas submit` the farm either refuses (with why
// and what to do instead) or accepts with nothing to do, so that a command
// line written for EAS either works or says plainly why not.
type easFlag struct {
	names   []string // the first is the name; the others its aliases
	value   bool     // takes a value (else a boolean flag)
	options []string // the values EAS accepts, when it lists them
	refused string   // why the farm cannot, and the alternative
	noop    string   // why the farm has nothing to do
	given   bool
}

func (f *easFlag) String() string   { return "" }
func (f *easFlag) IsBoolFlag() bool { return !f.value }

func (f *easFlag) Set(v string) error {
	if !f.value {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("--%s takes no value, got %q", f.names[0], v)
		}
		f.given = b
		return nil
	}
	if len(f.options) > 0 && !slices.Contains(f.options, v) {
		return fmt.Errorf("--%s must be one of %s, got %q", f.names[0], strings.Join(f.options, ", "), v)
	}
	f.given = true
	return nil
}

func (f *easFlag) help() string {
	h := "accepted, nothing to do: " + f.noop
	if f.refused != "" {
		h = "refused: " + f.refused
	}
	var also []string
	for _, n := range f.names[1:] {
		if len(n) == 1 {
			n = "-" + n
		} else {
			n = "--" + n
		}
		also = append(also, n)
	}
	if len(also) > 0 {
		h += " (also " + strings.Join(also, ", ") + ")"
	}
	return h
}

func easBuildFlags() []*easFlag {
	return []*easFlag{
		{names: []string{"local"}, refused: "the farm builds on its workers; to build on this machine, run a worker on it (freeagent run --vm-driver local) with your controller, or run npx eas-cli build --local"},
		{names: []string{"submit"}, refused: "it is --auto-submit (or -s)"},
		{names: []string{"what-to-test"}, value: true, refused: whatToTestRefused},
		{names: []string{"refresh-ad-hoc-provisioning-profile"}, refused: "the farm keeps no App Store Connect session; put a fresh ad-hoc profile in credentials.json or pass it with --provisioning-profile"},
		{names: []string{"freeze-credentials"}, noop: "the farm never changes credentials"},
		{names: []string{"verbose-logs"}, noop: "the farm's build log is always the build tools' whole output"},
		{names: []string{"build-logger-level"}, value: true, options: []string{"trace", "debug", "info", "warn", "error", "fatal"},
			noop: "the farm's build log has no levels: it is the build tools' whole output"},
		{names: []string{"skip-credentials-check"}, noop: "deprecated in EAS; the credentials are checked before the upload, as always"},
		{names: []string{"skip-project-configuration"}, noop: "deprecated in EAS; nothing is configured"},
	}
}

// whatToTestRefused says why eas build's and eas submit's --what-to-test is refused.
const whatToTestRefused = "the farm's App Store Connect submission sets no \"What to Test\" text: set it for the build in App Store Connect (TestFlight)"

// easSubmitFlags are eas submit's flags the farm refuses or has no use for.
func easSubmitFlags() []*easFlag {
	return []*easFlag{
		{names: []string{"what-to-test"}, value: true, refused: whatToTestRefused},
		{names: []string{"verbose"}, noop: "the submission's whole log is always printed"},
		{names: []string{"verbose-fastlane"}, noop: "the farm submits through the stores' APIs, without fastlane"},
		{names: []string{"groups", "g"}, value: true, refused: "name the TestFlight groups in eas.json's iOS submit profile (groups)"},
		{names: []string{"auto-testflight-setup"}, noop: "the farm sets up no TestFlight group: name yours in eas.json's iOS submit profile (groups)"},
		{names: []string{"no-auto-testflight-setup"}, noop: "the farm never sets up TestFlight groups"},
	}
}

// registerEASFlags adds flags to fs, each with its help.
func registerEASFlags(fs *flag.FlagSet, flags []*easFlag) {
	for _, f := range flags {
		for _, name := range f.names {
			fs.Var(f, name, "")
		}
		fs.Lookup(f.names[0]).Usage = f.help()
	}
}

// checkEASFlags refuses the first refused flag given and tells what
// happens to the accepted ones.
func checkEASFlags(u *ui, flags []*easFlag) error {
	for _, f := range flags {
		switch {
		case !f.given:
		case f.refused != "":
			return &cliError{code: ExitUsage, msg: "--" + f.names[0] + " is not supported by the farm", hint: f.refused}
		default:
			u.info("--%s: %s", f.names[0], f.noop)
		}
	}
	return nil
}

const buildHelp = `Builds the Expo project on the farm, as ` + "`eas build`" + ` does on EAS: packs it, queues the build, waits
for it and downloads its artifacts into ./<build-id>/ (or -o DIR). --no-wait (or --wait=false)
returns once the build is queued. It exits 1 when the build failed or was cancelled. With
--json (which, as in EAS, never prompts): an array of the builds as eas-cli prints them, as
they ended (as they were queued with --no-wait).

-p/--platform android|ios|all and -e/--profile NAME (eas.json, default production),
--non-interactive, -m/--message, --clear-cache, --wait/--no-wait are EAS's. -s/--auto-submit
and --auto-submit-with-profile NAME queue the build's submission to its store (see
expo-build submit), which the controller sends once the build completes. EAS's flags the
farm cannot honour (--local, ...) are refused with the alternative; those it
has nothing to do for (--freeze-credentials, --verbose-logs, ...) are accepted.

` + submitDetails
