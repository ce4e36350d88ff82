// Package vmbootstrap is freeagent-vm, the program inside each build VM.
//
// It waits for the host's shared folder, exchanges the build's one-time
// password for a VM token, installs iOS signing material into a temporary
// keychain, downloads and safely extracts the source, runs the build with
// its output streamed live to the controller, uploads the artifacts and
// reports the outcome to the host through files in the shared folder (see
// internal/vmshare and README.md).
package vmbootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/buildphase"
	"github.com/freeagent-build/freeagent/internal/toolchain"
	"github.com/freeagent-build/freeagent/internal/vmshare"
)

// Causes of a build's context ending early.
var (
	// ErrSignalled: the program received SIGTERM or SIGINT (main wraps it
	// with the signal's name).
	ErrSignalled = errors.New("freeagent-vm was asked to stop")
	// ErrBuildTimeout: Config.BuildTimeout passed.
	ErrBuildTimeout = errors.New("the build timeout passed")
)

// Bootstrap runs one build in the VM.
type Bootstrap struct {
	Config Config
	Log    logrus.FieldLogger
	// Version is announced in the build log.
	Version string
	// NewKeychain returns the temporary keychain for iOS signing; nil
	// means a SecurityKeychain driving Config.SecurityTool.
	NewKeychain func(path string) Keychain
	// Env is the environment build steps start from (FREEAGENT_* entries
	// are dropped, the build's own variables added); nil means os.Environ().
	Env []string
}

// Run performs the build described in the shared folder and returns the
// process exit code: 0 after writing build-complete, 1 after writing
// build-error (or when not even that was possible).
func (b *Bootstrap) Run(ctx context.Context) int {
	cfg := b.Config
	log := b.Log
	log.WithField("dir", cfg.SharedDir).Info("waiting for the build configuration")
	bc, dirSeen, err := waitForBuildConfig(ctx, cfg.SharedDir, cfg.WaitTimeout, cfg.PollInterval)
	if err != nil {
		log.WithError(err).Error("no build configuration")
		if dirSeen {
			f := &failure{code: vmshare.CodeNoBuildConfig, retryable: true, msg: err.Error()}
			if ctx.Err() != nil {
				f = fail(api.CodeCancelled, false, context.Cause(ctx), "stopped while waiting for %s", vmshare.BuildConfigFile)
			}
			if werr := writeJSONAtomic(cfg.SharedDir, vmshare.BuildErrorFile, f.file("")); werr != nil {
				log.WithError(werr).Error("cannot report the failure to the host")
			}
		}
		return 1
	}
	// A restarted bootstrap (the VM's launcher relaunching it) must not
	// build twice: the host has its answer already.
	if fileExists(filepath.Join(cfg.SharedDir, vmshare.BuildCompleteFile)) {
		log.Info("this build is already complete")
		return 0
	}
	if fileExists(filepath.Join(cfg.SharedDir, vmshare.BuildErrorFile)) {
		log.Info("this build has already failed")
		return 1
	}
	if cfg.BuildUser == "" {
		log.Warn(sameUserWarning())
	}
	r := &buildRun{b: b, cfg: cfg, bc: bc, log: log.WithFields(logrus.Fields{"build": bc.BuildID, "attempt": bc.AttemptID})}
	arts, err := r.execute(ctx)
	return r.finish(ctx, arts, err)
}

// failure is how a build ends badly: what build-error says.
type failure struct {
	code      string
	retryable bool
	msg       string
	err       error
}

func (f *failure) Error() string { return f.msg }
func (f *failure) Unwrap() error { return f.err }

func (f *failure) file(tail string) vmshare.BuildError {
	return vmshare.BuildError{Message: f.msg, Code: f.code, Retryable: f.retryable, LogTail: tail}
}

func fail(code string, retryable bool, err error, format string, args ...any) *failure {
	msg := fmt.Sprintf(format, args...)
	if err != nil {
		msg += ": " + err.Error()
	}
	return &failure{code: code, retryable: retryable, msg: msg, err: err}
}

type buildRun struct {
	b      *Bootstrap
	cfg    Config
	bc     vmshare.BuildConfig
	log    logrus.FieldLogger
	client *api.Client
	token  string
	logs   *LogStream // nil until authenticated
	work   string
	user   *buildUser // nil: build commands run as this process's user
	saved  []vmshare.SavedCache
	// logPhase is the phase the build log is in (see markPhase).
	logPhase buildphase.ID
}

// execute runs every phase up to the uploaded artifacts. Its error is a
// *failure.
func (r *buildRun) execute(parent context.Context) (arts []api.Artifact, err error) {
	ctx, cancelTimeout := context.WithTimeoutCause(parent, r.cfg.BuildTimeout, ErrBuildTimeout)
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer func() {
		if err != nil {
			err = r.classify(ctx, err)
		}
	}()
	r.client = &api.Client{BaseURL: r.bc.ControllerURL, HTTP: newHTTPClient(), UserAgent: "freeagent-vm/" + r.b.Version}

	r.progress(vmshare.PhaseAuth, 2, "exchanging the one-time password for a VM token")
	if err := r.auth(ctx); err != nil {
		return nil, err
	}
	if err := writeJSONAtomic(r.cfg.SharedDir, vmshare.ReadyFile, vmshare.Ready{StartedAt: time.Now().UTC()}); err != nil {
		return nil, fail(vmshare.CodeInternalFailure, true, err, "cannot signal the host that the VM is ready")
	}
	r.logs = NewLogStream(ctx, r.client, r.bc.BuildID, r.token, r.cfg.LogStream, r.log)
	r.logs.AddSecret(r.bc.OTP)
	go func() {
		select {
		case <-r.logs.Ended():
			cancel(ErrAttemptEnded)
		case <-ctx.Done():
		}
	}()
	r.logs.Printf("▸ freeagent-vm %s: build %s, attempt %s, %s, profile %q", r.b.Version, r.bc.BuildID, r.bc.AttemptID, r.bc.Platform, r.bc.Profile)
	if line := vmPhaseLine(r.cfg.SharedDir, r.bc.VM); line != "" {
		r.logs.Printf("▸ VM: %s", line)
	}
	if err := r.setupUser(ctx); err != nil {
		return nil, fail(vmshare.CodeInternalFailure, false, err, "prepare the build user")
	}

	r.progress(vmshare.PhaseAuth, 4, "fetching the build's spec and variables")
	job, err := r.job(ctx)
	if err != nil {
		return nil, err
	}

	var sign *signing
	if r.bc.Platform == api.PlatformIOS {
		r.progress(vmshare.PhaseCertificates, 5, "installing signing certificates")
		s, cleanup, err := r.certificates(ctx, job.Spec)
		if cleanup != nil {
			defer func() {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
				defer cancel()
				if err := cleanup(cctx); err != nil {
					r.log.WithError(err).Error("signing cleanup failed")
					r.logs.Printf("▸ warning: signing cleanup failed: %v", err)
				}
			}()
		}
		if err != nil {
			return nil, err
		}
		sign = s
	}
	var keystore *api.AndroidKeystore
	if r.bc.Platform == api.PlatformAndroid && job.Spec != nil && job.Spec.Credentials.Source != api.CredentialsNone && job.Spec.Credentials.Source != "" {
		r.progress(vmshare.PhaseCertificates, 5, "fetching the Android upload keystore")
		if keystore, err = r.androidCredentials(ctx); err != nil {
			return nil, err
		}
	}

	r.progress(vmshare.PhaseSource, 10, "downloading the source")
	tree, err := r.source(ctx)
	if err != nil {
		return nil, err
	}
	spec, root, err := r.layout(tree, job.Spec)
	if err != nil {
		return nil, err
	}

	artifactsDir := filepath.Join(r.work, "artifacts")
	if err := os.MkdirAll(artifactsDir, 0o775); err != nil {
		return nil, fmt.Errorf("create the artifacts directory: %w", err)
	}
	filesDir := filepath.Join(r.work, "env-files")
	be, err := newBuildEnvironment(job, r.bc.BuildID, tree, filesDir)
	if err != nil {
		return nil, fail(vmshare.CodeInternalFailure, false, err, "prepare the build's variables")
	}
	if r.user != nil && fileExists(filesDir) {
		if err := r.user.shareTree(filesDir); err != nil { // the build's own secrets: it reads them
			return nil, fail(vmshare.CodeInternalFailure, false, err, "prepare the build's variables")
		}
	}
	for _, secret := range be.secrets {
		r.logs.AddSecret(secret)
	}
	for _, name := range be.short {
		r.logs.Printf("▸ warning: variable %s is shorter than %d bytes, which the farm no longer accepts: this log masks it only partly (under %d bytes, not at all); set a longer value (expo-build env set %s)", name, api.MinSecretLength, minSecretLen, name)
	}
	for _, name := range be.withheld {
		r.logs.Printf("▸ warning: variable %s is secret, so the build does not get it: Metro would inline it into the app's JavaScript bundle; make it sensitive or plaintext, or rename it without EXPO_PUBLIC_ (expo-build env set)", name)
	}
	env := mergeEnv(buildEnv(r.b.Env, r.logs),
		"FREEAGENT_PLATFORM="+r.bc.Platform,
		"FREEAGENT_PROFILE="+r.bc.Profile,
		"FREEAGENT_ARTIFACTS_DIR="+artifactsDir,
		"CI=1",
	)
	if r.user != nil {
		tmp := filepath.Join(r.work, "tmp")
		if err := os.Mkdir(tmp, 0o770); err != nil {
			return nil, fmt.Errorf("create the build's temporary directory: %w", err)
		}
		env = r.user.env(env, tmp)
	}
	// The tools' cache directories, under the project's own variables.
	caches := newDepCaches(spec, filepath.Join(r.work, "cache"), r.work, root, toolchain.EnvValue(env, "HOME"), r.logs, r.user)
	env = mergeEnv(env, caches.env()...)
	env = mergeEnv(env, be.vars...)
	if len(job.Variables) > 0 {
		names := make([]string, len(job.Variables))
		for i, v := range job.Variables {
			names[i] = v.Name
		}
		r.logs.Printf("▸ variables of environment %q: %s", spec.Environment, strings.Join(names, ", "))
	}
	if wrote, err := writeNpmrc(root, env); err != nil {
		return nil, err
	} else if wrote {
		r.logs.Printf("▸ NPM_TOKEN is set: wrote .npmrc with //registry.npmjs.org/:_authToken=${NPM_TOKEN}")
	}
	p := &pipeline{
		tree: tree, root: root, workDir: r.work, artifactsDir: artifactsDir, spec: spec, keystore: keystore, signing: sign,
		runner: &stepRunner{env: env, out: r.logs, grace: r.cfg.KillGrace, drain: 2 * time.Second, user: r.user},
		caches: caches, phase: r.progress,
	}
	if len(caches.entries) > 0 {
		r.logs.Printf("")
		if caches.restore(ctx, r.cfg.CacheShare, r.bc.Caches) > 0 {
			p.runner.env = caches.restoredEnv(p.runner.env)
		}
	}
	files, err := p.run(ctx)
	if err != nil {
		return nil, err
	}

	r.progress(vmshare.PhaseUpload, 90, fmt.Sprintf("uploading %d artifact(s)", len(files)))
	r.logs.Printf("\n▸ uploading %d artifact(s)", len(files))
	for _, f := range files {
		art, err := uploadArtifact(ctx, r.client, r.bc.BuildID, r.token, f, r.cfg.RetryFor, r.retrying("artifact upload"))
		if err != nil {
			if ctx.Err() == nil && isAttemptEnded(err) {
				return nil, fmt.Errorf("%w: upload %s: %w", ErrAttemptEnded, filepath.Base(f), err)
			}
			return nil, fail(vmshare.CodeUploadFailed, api.StatusOf(err) != http.StatusRequestEntityTooLarge, err, "upload the artifact %s", filepath.Base(f))
		}
		r.logs.Printf("▸ uploaded %s (%d bytes, sha256 %s)", art.Name, art.Size, art.SHA256)
		art.URL = ""
		arts = append(arts, art)
	}
	// Only a successful build refreshes a cache; the archives are in place
	// before build-complete, the last file, names them.
	r.saved = caches.save(ctx, r.cfg.SharedDir)
	return arts, nil
}

func (r *buildRun) auth(ctx context.Context) error {
	var resp api.VMAuthResponse
	err := retry(ctx, r.cfg.AuthRetryFor, func(ctx context.Context) error {
		var err error
		resp, err = r.client.VMAuth(ctx, r.bc.BuildID, r.bc.OTP)
		return err
	}, r.retrying("VM authentication"))
	switch {
	case err == nil:
		r.token = resp.VMToken
		r.log.Info("authenticated with the controller")
		return nil
	case api.StatusOf(err) == http.StatusUnauthorized:
		return fail(vmshare.CodeVMAuthFailed, true, err, "the controller refused the one-time password (used, expired or for another build)")
	case transient(err):
		return fail(vmshare.CodeUnreachable, true, err, "cannot reach the controller at %s", r.bc.ControllerURL)
	default:
		return fail(vmshare.CodeVMAuthFailed, true, err, "VM authentication failed")
	}
}

// certificates installs an iOS build's signing material: the per-target
// credentials its spec names, else its certs zip (expo-build --p12 or
// --certs, or the raw API), whose profiles fit targets by bundle
// identifier. A build with neither (a simulator build) gets none.
func (r *buildRun) certificates(ctx context.Context, spec *api.BuildSpec) (*signing, func(context.Context) error, error) {
	var m signingMaterial
	if spec != nil && spec.Credentials.IOS != nil {
		creds, err := r.buildCredentials(ctx)
		if err != nil {
			return nil, nil, err
		}
		if len(creds.IOS) == 0 {
			return nil, nil, fail(vmshare.CodeCertificates, false, nil, "the build's spec names iOS credentials but the controller holds none for it")
		}
		for _, c := range creds.IOS {
			r.logs.AddSecret(c.CertificatePassword)
		}
		m = materialFromCredentials(creds.IOS)
	} else {
		certs, found, err := fetch(ctx, r, "the signing certificates", r.client.CertsSecure)
		if err != nil {
			return nil, nil, err
		}
		if !found {
			r.logs.Printf("▸ this build has no signing certificates")
			return nil, nil, nil
		}
		r.logs.AddSecret(certs.P12Password)
		r.logs.AddSecret(certs.KeychainPassword)
		m = materialFromCerts(certs)
	}
	path := filepath.Join(r.cfg.WorkDir, "keychains", "freeagent-"+safeName(r.bc.BuildID)+".keychain-db")
	var kc Keychain
	if r.b.NewKeychain != nil {
		kc = r.b.NewKeychain(path)
	} else {
		skc := NewSecurityKeychain(r.cfg.SecurityTool, path)
		if r.user != nil {
			skc.user, skc.env = r.user, r.user.env(buildEnv(r.b.Env, r.logs), filepath.Dir(path))
		}
		kc = skc
	}
	home := r.cfg.HomeDir
	if home == "" && r.user != nil {
		home = r.user.home
	}
	s, cleanup, err := installSigning(ctx, kc, m, home, r.logs)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
			return nil, cleanup, fail(vmshare.CodeToolMissing, true, err, "install the signing certificates")
		}
		return nil, cleanup, fail(vmshare.CodeCertificates, false, err, "install the signing certificates")
	}
	return s, cleanup, nil
}

// source downloads and extracts the source and returns the project root.
func (r *buildRun) source(ctx context.Context) (string, error) {
	r.work = filepath.Join(r.cfg.WorkDir, safeName(r.bc.BuildID))
	if err := os.RemoveAll(r.work); err != nil {
		return "", fmt.Errorf("clear the work directory: %w", err)
	}
	if err := os.MkdirAll(r.work, 0o755); err != nil {
		return "", fmt.Errorf("create the work directory: %w", err)
	}
	if r.user != nil {
		// The build user writes the tree; this process made it, with
		// modes the umask (buildUmask) opens to the group only.
		if err := r.user.share(r.work, 0o770); err != nil {
			return "", err
		}
	}
	archive := filepath.Join(r.work, "source.archive")
	start := time.Now()
	size, sum, err := downloadSource(ctx, r.client, r.bc.BuildID, r.token, archive, r.cfg.RetryFor, r.retrying("source download"))
	if err != nil {
		switch {
		case ctx.Err() != nil, isDiskError(err):
			return "", err
		case isAttemptEnded(err):
			return "", fmt.Errorf("%w: download the source: %w", ErrAttemptEnded, err)
		}
		return "", fail(vmshare.CodeSourceDownload, true, err, "download the source")
	}
	r.logs.Printf("▸ downloaded the source: %d bytes in %s, sha256 %s", size, time.Since(start).Round(time.Millisecond), sum)
	tree := filepath.Join(r.work, "src")
	stats, err := ExtractFile(ctx, archive, tree, r.cfg.Limits)
	os.Remove(archive)
	if err != nil {
		return "", err
	}
	r.logs.Printf("▸ extracted %s: %d files, %d bytes", stats.Format, stats.Files, stats.Bytes)
	return tree, nil
}

// job fetches the build's spec and variables, once per attempt. A build
// submitted through the raw API has no spec (nil).
func (r *buildRun) job(ctx context.Context) (api.BuildJob, error) {
	job, found, err := fetch(ctx, r, "the build spec and variables", r.client.BuildJob)
	if err != nil {
		return job, err
	}
	if !found {
		// A controller older than build specs: the build has none.
		r.logs.Printf("▸ the controller serves no build spec: EAS defaults apply")
		return api.BuildJob{}, nil
	}
	if job.Spec != nil && job.Spec.Version != api.SpecVersion {
		return job, fail(vmshare.CodeInternalFailure, false, nil, "the build spec has version %d; this freeagent-vm reads version %d (update the worker)", job.Spec.Version, api.SpecVersion)
	}
	return job, nil
}

// androidCredentials fetches the build's upload keystore.
func (r *buildRun) androidCredentials(ctx context.Context) (*api.AndroidKeystore, error) {
	creds, err := r.buildCredentials(ctx)
	if err != nil {
		return nil, err
	}
	if creds.Android == nil {
		return nil, fail(vmshare.CodeCertificates, false, nil, "the build's spec names Android credentials but the controller holds none for it")
	}
	r.logs.AddSecret(creds.Android.KeystorePassword)
	r.logs.AddSecret(creds.Android.KeyPassword)
	return creds.Android, nil
}

// buildCredentials fetches the credentials the build's spec names.
func (r *buildRun) buildCredentials(ctx context.Context) (api.BuildCredentials, error) {
	creds, found, err := fetch(ctx, r, "the build's credentials", r.client.BuildCredentials)
	if err == nil && !found {
		err = fail(vmshare.CodeCertificates, false, nil, "the build's spec names credentials but the controller holds none for it")
	}
	return creds, err
}

// fetch is one VM-token GET of the build's: retried as the bootstrap
// retries, found false on a 404 (the caller decides what that means), and
// its failures classified (the attempt ended, or the controller is
// unreachable).
//
// The controller hands the spec, credentials and certificates out once per
// attempt and answers a second fetch 410 Gone. A fetch counts once the
// controller wrote the whole body; a retry after a connection that broke
// before that gets the file. Each caller fetches each file once per run;
// a 410 (this attempt's file went to an earlier run, or was lost on the
// way after it was written out) fails the attempt as retryable, and the
// next attempt fetches again.
func fetch[T any](ctx context.Context, r *buildRun, what string, get func(ctx context.Context, buildID, vmToken string) (T, error)) (T, bool, error) {
	var v T
	err := retry(ctx, r.cfg.RetryFor, func(ctx context.Context) error {
		var err error
		v, err = get(ctx, r.bc.BuildID, r.token)
		return err
	}, r.retrying("download of "+what))
	switch {
	case api.StatusOf(err) == http.StatusNotFound:
		return v, false, nil
	case api.StatusOf(err) == http.StatusGone:
		return v, false, fail(vmshare.CodeAlreadyFetched, true, err, "fetch %s", what)
	case err != nil && isAttemptEnded(err):
		return v, false, fmt.Errorf("%w: fetch %s: %w", ErrAttemptEnded, what, err)
	case err != nil:
		return v, false, fail(vmshare.CodeUnreachable, true, err, "fetch %s", what)
	}
	return v, true, nil
}

// layout returns the spec the build follows and the app's directory in
// tree. A build without a spec (raw API) gets EAS's defaults for its
// platform, built from the project found in the tree.
func (r *buildRun) layout(tree string, spec *api.BuildSpec) (api.BuildSpec, string, error) {
	if spec == nil {
		root, err := FindProjectRoot(tree)
		if err != nil {
			return api.BuildSpec{}, "", err
		}
		rel, _ := filepath.Rel(tree, root)
		r.logs.Printf("▸ no build spec (raw API submit): EAS defaults for profile %q; project root: %s", r.bc.Profile, rel)
		return defaultSpec(r.bc.Platform, r.bc.Profile, root), root, nil
	}
	if spec.Platform != r.bc.Platform {
		return api.BuildSpec{}, "", fail(vmshare.CodeInvalidSource, false, nil, "the build spec is for %s, the job for %s", spec.Platform, r.bc.Platform)
	}
	root := tree
	if spec.Project.AppDir != "" {
		clean := filepath.Clean(filepath.FromSlash(spec.Project.AppDir))
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
			return api.BuildSpec{}, "", fail(vmshare.CodeInvalidSource, false, nil, "the build spec's app_dir %q leaves the source", spec.Project.AppDir)
		}
		root = filepath.Join(tree, clean)
	}
	if st, err := os.Lstat(filepath.Join(root, "package.json")); err != nil || !st.Mode().IsRegular() {
		return api.BuildSpec{}, "", fmt.Errorf("%w: the app directory %q of the build spec holds no package.json", ErrNoProject, spec.Project.AppDir)
	}
	s := *spec
	if s.Workflow == "" {
		s.Workflow = archiveWorkflow(root, s.Platform)
	}
	r.logs.Printf("▸ profile %q (%s), environment %q, app %s (%s) in %s, %s, %s workflow",
		s.ProfileName, s.Profile.Distribution, s.Environment, s.App.Name, s.App.Slug, relOrDot(tree, root), s.Project.PackageManager, s.Workflow)
	return s, root, nil
}

// archiveWorkflow is the workflow of a spec that does not say (an older
// CLI's, or none): the archive holds only what was uploaded, so the app
// is bare when its native directory is there.
func archiveWorkflow(root, platform string) string {
	if fileExists(filepath.Join(root, platform)) {
		return api.WorkflowGeneric
	}
	return api.WorkflowManaged
}

// defaultSpec is the spec of a build submitted without one: EAS's default
// profile for the platform, npm (frozen when the project has its lockfile).
func defaultSpec(platform, profile, root string) api.BuildSpec {
	spec := api.BuildSpec{Version: api.SpecVersion, Platform: platform, ProfileName: profile,
		Profile:     api.BuildProfile{CredentialsSource: api.CredentialsRemote, Distribution: "store"},
		Environment: api.EnvironmentProduction,
		Project:     api.Project{PackageManager: api.PackageManagerNPM},
		Credentials: api.CredentialsInfo{Source: api.CredentialsNone},
		Workflow:    archiveWorkflow(root, platform),
	}
	for _, lock := range []string{"package-lock.json", "npm-shrinkwrap.json"} {
		if fileExists(filepath.Join(root, lock)) {
			spec.Project.Lockfile = lock
		}
	}
	switch platform {
	case api.PlatformAndroid:
		spec.Android = &api.AndroidBuild{GradleCommand: ":app:bundleRelease", BuildType: api.AndroidAppBundle,
			ApplicationArchivePaths: []string{"android/app/build/outputs/**/*.{apk,aab}"}}
	case api.PlatformIOS:
		// The scheme and the signed targets are read from the project
		// once prebuild has made it.
		spec.IOS = &api.IOSBuild{BuildConfiguration: "Release", ApplicationArchivePaths: []string{api.IOSArchivePath}}
	}
	return spec
}

// classify turns any error of execute into a *failure. An ended context
// decides first: whatever failed after a signal, a timeout or the end of
// the attempt failed because of it.
func (r *buildRun) classify(ctx context.Context, err error) *failure {
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		switch {
		case errors.Is(cause, ErrBuildTimeout):
			return fail(api.CodeTimeout, false, nil, "the build exceeded its time limit of %s", r.cfg.BuildTimeout)
		case errors.Is(cause, ErrAttemptEnded):
			return fail(api.CodeLeaseLost, true, cause, "the build was stopped")
		default:
			return fail(api.CodeCancelled, false, cause, "the build was cancelled")
		}
	}
	var f *failure
	var stepErr *StepError
	var toolErr *ToolMissingError
	switch {
	case errors.As(err, &f):
		return f
	case errors.As(err, &stepErr):
		return fail(api.CodeBuildFailed, false, nil, "%s", stepErr.Error())
	case errors.As(err, &toolErr):
		return fail(vmshare.CodeToolMissing, true, nil, "%s (the VM image lacks a build tool)", toolErr.Error())
	case errors.Is(err, ErrAttemptEnded):
		return fail(api.CodeLeaseLost, true, err, "the controller ended this build attempt")
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		return fail(vmshare.CodeDiskFull, true, err, "the VM's disk is full")
	case errors.Is(err, ErrBadArchive), errors.Is(err, ErrNoProject):
		return fail(vmshare.CodeInvalidSource, false, err, "unusable source")
	case errors.As(err, new(*SigningMismatchError)):
		return fail(vmshare.CodeSigningMismatch, false, nil, "%s", err.Error())
	case errors.Is(err, ErrNoArtifacts):
		return fail(vmshare.CodeNoArtifacts, false, err, "no artifact")
	case errors.Is(err, errConfig):
		return fail(api.CodeBuildFailed, false, nil, "%s", err.Error())
	default:
		return fail(vmshare.CodeInternalFailure, true, err, "freeagent-vm failed")
	}
}

// finish reports the outcome: flushes the log, then writes progress and
// build-complete or build-error (last), and returns the exit code.
func (r *buildRun) finish(ctx context.Context, arts []api.Artifact, err error) int {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.FinalFlush)
	defer cancel()
	defer r.removeWork()
	if err == nil {
		// A failed build's log ends in the phase that failed.
		r.markPhase(buildphase.CleanUp)
		r.logs.Printf("\n▸ build complete: %d artifact(s)", len(arts))
		if cerr := r.logs.Close(fctx); cerr != nil {
			r.log.WithError(cerr).Warn("the end of the build log may be missing")
		}
		r.progress(vmshare.PhaseDone, 100, "build complete")
		if werr := writeJSONAtomic(r.cfg.SharedDir, vmshare.BuildCompleteFile, vmshare.Complete{Artifacts: arts, Caches: r.saved}); werr != nil {
			r.log.WithError(werr).Error("cannot report the build's completion to the host")
			return 1
		}
		r.log.WithField("artifacts", len(arts)).Info("build complete")
		return 0
	}
	var f *failure
	if !errors.As(err, &f) {
		f = fail(vmshare.CodeInternalFailure, true, err, "freeagent-vm failed")
	}
	tail := ""
	if r.logs != nil {
		r.logs.Printf("\n✖ %s", f.msg)
		if cerr := r.logs.Close(fctx); cerr != nil {
			r.log.WithError(cerr).Warn("the end of the build log may be missing")
		}
		tail = r.logs.Tail()
	}
	r.progress(vmshare.PhaseFailed, 100, f.msg)
	if werr := writeJSONAtomic(r.cfg.SharedDir, vmshare.BuildErrorFile, f.file(tail)); werr != nil {
		r.log.WithError(werr).Error("cannot report the failure to the host")
	}
	r.log.WithFields(logrus.Fields{"code": f.code, "retryable": f.retryable}).Error(f.msg)
	return 1
}

func (r *buildRun) removeWork() {
	if r.work == "" {
		return
	}
	if r.user != nil {
		// What the build user made with modes of its own (0755 from a
		// tarball) this process may read but not empty: the build user
		// removes everything it can first (all but the directory itself).
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if out, err := r.user.command(ctx, "/bin/rm", []string{"rm", "-rf", "--", r.work}, []string{"PATH=/usr/bin:/bin"}).CombinedOutput(); err != nil {
			r.log.WithError(err).WithField("output", string(bytes.TrimSpace(out))).Debug("the build user left part of the work directory")
		}
	}
	if err := os.RemoveAll(r.work); err != nil {
		r.log.WithError(err).Warn("cannot remove the work directory")
	}
}

// setupUser resolves Config.BuildUser, checks that sudo lets this
// process run commands as it, and prepares the work directory they share;
// without a build user it warns in the build's log.
func (r *buildRun) setupUser(ctx context.Context) error {
	if r.cfg.BuildUser == "" {
		r.logs.Printf("▸ warning: %s", sameUserWarning())
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program for the build user to run: %w", err)
	}
	u, err := lookupBuildUser(r.cfg.BuildUser, self)
	if err != nil {
		return err
	}
	if err := u.probe(ctx); err != nil {
		return err
	}
	if r.cfg.Launchctl != "" {
		u.launchctl = r.cfg.Launchctl
		if err := u.probeSession(ctx); err != nil {
			// A template from before the session rule still builds
			// Android; Xcode's resource compilers may fail.
			u.launchctl = ""
			r.log.WithError(err).Warn("build commands stay in this process's launchd session")
			r.logs.Printf("▸ warning: %s", sessionWarning(u.name, err))
		}
	}
	// Files this process creates are shared with the build user's group
	// at most, never with other users (modes ask for group write where
	// the build writes: the extracted tree, the artifacts directory).
	setUmask(buildUmask)
	if err := os.MkdirAll(r.cfg.WorkDir, 0o750); err != nil {
		return fmt.Errorf("create the work directory: %w", err)
	}
	if err := u.share(r.cfg.WorkDir, 0o750); err != nil {
		return fmt.Errorf("%w (the work directory must belong to the bootstrap's user: see --work-dir)", err)
	}
	r.user = u
	r.logs.Printf("▸ build commands run as the build user %s (uid %d)", u.name, u.uid)
	return nil
}

// sessionWarning is logged when the build user's commands cannot start
// in its own launchd session.
func sessionWarning(name string, err error) string {
	return fmt.Sprintf("build commands run as %s in this VM's login session, not in %s's own (%v): Xcode's asset catalog and storyboard compilers cannot reach the simulator service there and may fail; rebuild the template with scripts/build-vm-template.sh (its sudoers drop-in lets freeagent-vm start them in %s's session)", name, name, err, name)
}

// sameUserWarning is logged when build commands run as the bootstrap's own
// user: the template predates the build user.
func sameUserWarning() string {
	name := "this user"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return "build commands run as the bootstrap's user " + name + ", who holds the build's tokens: rebuild the template with scripts/build-vm-template.sh (it creates the build user and sets FREEAGENT_BUILD_USER)"
}

// logPhases are the build log's phases (buildphase) of progress.json's.
var logPhases = map[string]buildphase.ID{
	vmshare.PhaseCertificates: buildphase.Credentials, vmshare.PhaseSource: buildphase.Source, vmshare.PhaseInstall: buildphase.Install,
	vmshare.PhasePrebuild: buildphase.Prebuild, vmshare.PhaseBuild: buildphase.Build, vmshare.PhaseUpload: buildphase.Upload,
}

// markPhase starts phase id in the build log (buildphase.Marker) unless it
// is the current one; "" (a phase the log does not split on) does nothing.
func (r *buildRun) markPhase(id buildphase.ID) {
	if id == "" || id == r.logPhase || r.logs == nil {
		return
	}
	r.logPhase = id
	// On a line of its own even after output that did not end one.
	r.logs.Printf("\n%s", buildphase.Marker(id, time.Now()))
}

// progress rewrites progress.json. A failure to write it is logged only:
// the host also learns the phase from the end files.
func (r *buildRun) progress(phase string, pct int, msg string) {
	r.markPhase(logPhases[phase])
	err := writeJSONAtomic(r.cfg.SharedDir, vmshare.ProgressFile, vmshare.Progress{Phase: phase, Progress: pct, Message: msg, UpdatedAt: time.Now().UTC()})
	if err != nil {
		r.log.WithError(err).Warn("cannot update progress.json")
	}
	r.log.WithField("phase", phase).Info(msg)
}

func (r *buildRun) retrying(what string) func(error, time.Duration) {
	return func(err error, wait time.Duration) {
		r.log.WithError(err).WithField("retry_in", wait.Round(time.Millisecond)).Warn(what + " failed; retrying")
		if r.logs != nil {
			r.logs.Printf("▸ %s failed (%v); retrying in %s", what, err, wait.Round(100*time.Millisecond))
		}
	}
}

// buildEnv is the environment build steps start from: base (nil: this
// process's) without this program's own settings (FREEAGENT_*) and without
// credentials a host may have passed down (a worker's API key must never
// reach a build); their values are redacted from the log as well.
func buildEnv(base []string, logs *LogStream) []string {
	if base == nil {
		base = os.Environ()
	}
	return slices.DeleteFunc(slices.Clone(base), func(kv string) bool {
		name, value, _ := strings.Cut(kv, "=")
		if isCredentialVar(name) && value != "" {
			logs.AddSecret(value)
		}
		return strings.HasPrefix(name, "FREEAGENT_") || isCredentialVar(name)
	})
}

// isCredentialVar names the environment variables that hold Free Agent
// credentials (the agent's and the CLI's API keys).
func isCredentialVar(name string) bool {
	switch name {
	case "FREEAGENT_API_KEY", "EXPO_CONTROLLER_API_KEY":
		return true
	}
	return false
}

// isAttemptEnded: the controller refuses the VM token or the attempt's
// lease is gone.
func isAttemptEnded(err error) bool {
	switch api.StatusOf(err) {
	case http.StatusUnauthorized, http.StatusConflict:
		return true
	}
	return false
}

// safeName keeps an id usable as a file name.
func safeName(id string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, id)
}

func newHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   4,
		ForceAttemptHTTP2:     true,
	}}
}
