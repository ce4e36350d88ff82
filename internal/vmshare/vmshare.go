// Package vmshare is the protocol of the folder the host agent shares with
// a build VM: the names of its files, who writes each, and their JSON
// shapes. Both ends import it (the agent on the host, freeagent-vm in the
// guest) and nothing else of each other, so the worker does not link the
// in-VM program. The VM side's atomic writes and its wait for the config
// live in vmbootstrap.
package vmshare

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

// The shared-directory protocol between the host agent and the VM. The host
// writes BuildConfigFile (and the freeagent-vm binary); the VM writes the
// others, each atomically (temp file in the same directory, fsync, rename,
// fsync of the directory), because `tart stop` is a power-off.
const (
	BuildConfigFile = "build-config.json" // host → VM: BuildConfig
	ReadyFile       = "vm-ready"          // VM → host: Ready, once the OTP was exchanged
	// WaitingFile (VM → host, empty) is the launcher's word that a warm
	// spare logged in, found its share mounted and empty, and waits for a
	// build (launchd/guest/freeagent-vm-launcher).
	WaitingFile       = "vm-waiting"
	ProgressFile      = "progress.json"  // VM → host: Progress, rewritten at every phase
	BuildCompleteFile = "build-complete" // VM → host: Complete, the last file of a successful build
	BuildErrorFile    = "build-error"    // VM → host: BuildError, the last file of a failed build
	// CacheOutDir holds the dependency-cache archives a successful build
	// wrote (VM → host: <name>.tar, each listed in Complete.Caches), for
	// the agent to validate and keep. See docs/build-spec.md, "Warm builds".
	CacheOutDir = "caches-out"
)

// Phases written to ProgressFile, in order. PhaseFailed replaces the
// remaining ones when the build ends with BuildErrorFile.
const (
	PhaseAuth         = "auth"
	PhaseCertificates = "certificates"
	PhaseSource       = "source"
	PhaseInstall      = "install"
	PhasePrebuild     = "prebuild"
	PhaseBuild        = "build"
	PhaseUpload       = "upload"
	PhaseDone         = "done"
	PhaseFailed       = "failed"
)

// Error codes of BuildError beyond the controller's own (api.CodeBuildFailed,
// api.CodeCancelled, api.CodeTimeout, api.CodeLeaseLost).
const (
	CodeNoBuildConfig   = "no_build_config" // the config file never appeared or is invalid
	CodeVMAuthFailed    = "vm_auth_failed"  // the OTP was refused (used, expired, foreign)
	CodeUnreachable     = "controller_unreachable"
	CodeCertificates    = "certificates_failed"
	CodeAlreadyFetched  = "secrets_already_fetched" // the attempt's sealed files were handed out before (410): a new attempt fetches them again
	CodeSourceDownload  = "source_download_failed"
	CodeInvalidSource   = "invalid_source" // unsafe or unusable archive, no project root
	CodeDiskFull        = "disk_full"
	CodeToolMissing     = "tool_missing" // npm, xcodebuild, … not installed in the VM
	CodeNoArtifacts     = "no_artifacts"
	CodeSigningMismatch = "signing_mismatch" // the artifact is not signed with the build's keystore
	CodeUploadFailed    = "artifact_upload_failed"
	CodeInternalFailure = "internal"
)

// BuildConfig is build-config.json.
type BuildConfig struct {
	BuildID       string `json:"build_id"`
	AttemptID     string `json:"attempt_id"`
	ControllerURL string `json:"controller_url"`
	OTP           string `json:"otp"`
	Platform      string `json:"platform"`
	Profile       string `json:"profile"`
	// Caches are the dependency-cache archives the host shares read-only
	// with this build (in Config.CacheShare), one per cache name.
	Caches []CacheMount `json:"caches,omitempty"`
	// VM says what the build runs on, for its log; nil from an older agent.
	VM *VMInfo `json:"vm,omitempty"`
}

// VMInfo is the environment a build runs on, as the host made it.
type VMInfo struct {
	// WarmSpare: the VM was booted before the build was claimed.
	WarmSpare bool `json:"warm_spare"`
	// ClaimedAt is when the host received the build, on the host's clock.
	// The guest measures the VM phase against a file it creates in the
	// shared folder, whose time the host's file system sets: a guest's own
	// clock (resumed from a snapshot, not yet synchronised) is not used.
	ClaimedAt time.Time `json:"claimed_at"`
}

// CacheMount is one cache archive shared with the build: the cache's name,
// the key it was saved under (the build's own on an exact hit, another
// key's after a lockfile change) and its file in the cache share.
type CacheMount struct {
	Name string `json:"name"`
	Key  string `json:"key"`
	File string `json:"file"`
}

// Validate reports the first problem that makes c unusable: a missing
// field, an unknown platform, a controller URL that is not http(s).
func (c BuildConfig) Validate() error {
	var missing []string
	for name, v := range map[string]string{"build_id": c.BuildID, "controller_url": c.ControllerURL, "otp": c.OTP, "platform": c.Platform} {
		if strings.TrimSpace(v) == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("%s: missing field(s) %s", BuildConfigFile, strings.Join(missing, ", "))
	}
	if c.Platform != api.PlatformIOS && c.Platform != api.PlatformAndroid {
		return fmt.Errorf("%s: platform %q is neither %q nor %q", BuildConfigFile, c.Platform, api.PlatformIOS, api.PlatformAndroid)
	}
	if !strings.HasPrefix(c.ControllerURL, "http://") && !strings.HasPrefix(c.ControllerURL, "https://") {
		return fmt.Errorf("%s: controller_url %q is not an http(s) URL", BuildConfigFile, c.ControllerURL)
	}
	return nil
}

// Ready is vm-ready.
type Ready struct {
	StartedAt time.Time `json:"started_at"`
}

// Progress is progress.json.
type Progress struct {
	Phase     string    `json:"phase"`
	Progress  int       `json:"progress"` // 0-100
	Message   string    `json:"message"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Complete is build-complete.
type Complete struct {
	Artifacts []api.Artifact `json:"artifacts"` // name, size, sha256 (url omitted)
	// Caches are the archives written to CacheOutDir: the caches whose
	// exact key the build did not find, saved after its success.
	Caches []SavedCache `json:"caches,omitempty"`
}

// SavedCache is one archive of CacheOutDir: File (<name>.tar) holds the
// cache Name of the build's spec under Key.
type SavedCache struct {
	Name string `json:"name"`
	Key  string `json:"key"`
	File string `json:"file"`
}

// BuildError is build-error.
type BuildError struct {
	Message   string `json:"message"`
	Code      string `json:"code"`
	Retryable bool   `json:"retryable"`
	LogTail   string `json:"log_tail"` // the last lines of the build log, newline-separated
}
