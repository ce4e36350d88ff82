// Package submit runs the controller's submissions to the stores: it
// claims queued submissions (one replica each: a lease under SKIP LOCKED,
// as workers claim builds), opens their sealed keys, fetches the build's
// archive and hands it to the store's client, keeping the submission's
// log, its resumable state and its outcome in the database.
package submit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/seal"
	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/controller/submit/appstore"
	"github.com/freeagent-build/freeagent/controller/submit/googleplay"
	"github.com/freeagent-build/freeagent/internal/config"
)

// Sealing purposes, each its own key derived from the certificate key:
// the keys a submission brought for itself, and a project's kept ones.
const (
	secretsPurpose     = "freeagent submission secrets v1"
	credentialsPurpose = "freeagent submit credentials v1"
)

// Store names in a SubmissionResult.
const (
	GooglePlay      = "google_play"
	AppStoreConnect = "app_store_connect"
)

// Target is one store's client as the runner drives it: it submits one
// claimed submission's archive and says what the store accepted.
type Target interface {
	Submit(ctx context.Context, j Job) (api.SubmissionResult, error)
}

// Job is one claimed submission, ready to send.
type Job struct {
	Submission api.Submission
	Archive    string // a local copy of the archive to send
	Secrets    api.SubmitSecrets
	// BuildVersion is the build's versionCode or buildNumber ("" unknown).
	BuildVersion string
	// State is what an interrupted try saved; Save persists the new state
	// (and fails once this runner lost the submission).
	State json.RawMessage
	Save  func(context.Context, json.RawMessage) error
	Log   io.Writer
}

// Config tunes the runner; zero fields take DefaultConfig's.
type Config struct {
	Interval time.Duration // between looks for queued submissions
	Lease    time.Duration // a runner that stops renewing for this long loses its submission
	// Budget bounds one try of a submission, uploads included.
	Budget time.Duration
	// Play points the Google Play client (tests: at the stand-in).
	Play googleplay.Options
	// AppStore is the App Store Connect client (tests: at the stand-in).
	AppStore appstore.Client
	// TempDir holds the archive while it is sent; "": the system's.
	TempDir string
}

// DefaultConfig is the production configuration.
func DefaultConfig() Config {
	return Config{Interval: 2 * time.Second, Lease: 2 * time.Minute, Budget: 2 * time.Hour,
		Play: googleplay.Options{Retry: api.RetryPolicy{Backoff: api.Backoff{Initial: time.Second, Max: 30 * time.Second, Jitter: 0.5}, Attempts: 5}}}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	c.Interval = config.OrDefault(c.Interval, d.Interval)
	c.Lease = config.OrDefault(c.Lease, d.Lease)
	c.Budget = config.OrDefault(c.Budget, d.Budget)
	if c.Play.Retry.Attempts == 0 && c.Play.Retry.Budget == 0 {
		c.Play.Retry = d.Play.Retry
	}
	return c
}

// Runner submits queued submissions.
type Runner struct {
	store   *store.Store
	files   *blobs.Store
	secrets seal.Box // a submission's own keys
	kept    seal.Box // projects' submit credentials
	targets map[string]Target
	owner   string
	cfg     Config
	log     logrus.FieldLogger
	kick    chan struct{}
}

// New returns a runner; owner names this replica in leases.
func New(st *store.Store, files *blobs.Store, cfg Config, owner string, log logrus.FieldLogger) (*Runner, error) {
	cfg = cfg.withDefaults()
	secrets, err := files.Derive(secretsPurpose)
	if err != nil {
		return nil, fmt.Errorf("derive the submission secrets key: %w", err)
	}
	kept, err := files.Derive(credentialsPurpose)
	if err != nil {
		return nil, fmt.Errorf("derive the submit credentials key: %w", err)
	}
	r := &Runner{store: st, files: files, secrets: secrets, kept: kept, owner: owner, cfg: cfg, log: log, kick: make(chan struct{}, 1),
		targets: map[string]Target{api.PlatformAndroid: playTarget{googleplay.New(cfg.Play)}, api.PlatformIOS: ascTarget{&cfg.AppStore}}}
	return r, nil
}

// Supports says whether this controller can submit a platform's builds,
// and if not, why and what to do instead.
func (r *Runner) Supports(platform string) error {
	if _, ok := r.targets[platform]; ok {
		return nil
	}
	return fmt.Errorf("%w: no store takes %q builds", store.ErrInvalid, platform)
}

// aad binds a sealed value to where it belongs.
func aad(parts ...string) []byte { return []byte(strings.Join(parts, "\x00")) }

// SealSecrets seals keys given with one submission, for it alone.
func (r *Runner) SealSecrets(submissionID string, s api.SubmitSecrets) ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode the submission's keys: %w", err)
	}
	return r.secrets.Seal(b, aad("submission", submissionID)), nil
}

// SealCredential seals a project's submit credential for its row.
func (r *Runner) SealCredential(project, platform, name string, s api.SubmitSecrets) ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode the submit credential: %w", err)
	}
	return r.kept.Seal(b, aad(project, platform, name)), nil
}

// Kick makes the runner look for queued submissions now. It never blocks.
func (r *Runner) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run submits until ctx ends: every Interval (or when kicked) it fails the
// submissions whose build will never complete, then runs every ready one.
func (r *Runner) Run(ctx context.Context) {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := r.store.FailOrphanedSubmissions(ctx); err != nil && ctx.Err() == nil {
			r.log.WithError(err).Warn("failing the submissions of failed builds; will retry")
		}
		for {
			ran, err := r.RunOnce(ctx)
			if err != nil && ctx.Err() == nil {
				r.log.WithError(err).Warn("running a submission failed; will retry")
			}
			if !ran || err != nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.kick:
		}
	}
}

// RunOnce claims one ready submission and runs it to its end; false when
// none was ready.
func (r *Runner) RunOnce(ctx context.Context) (bool, error) {
	c, err := r.store.ClaimSubmission(ctx, r.owner, r.cfg.Lease)
	if err != nil || c == nil {
		return false, err
	}
	runCtx, cancel := context.WithTimeout(ctx, r.cfg.Budget)
	defer cancel()
	lost := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the lease lives while the submission runs
		defer wg.Done()
		r.renew(runCtx, c.ID, cancel, lost)
	}()
	result, runErr := r.run(runCtx, c)
	cancel()
	wg.Wait()
	select {
	case err := <-lost:
		return true, err // another runner has it now: it reports the end
	default:
	}
	if ctx.Err() != nil {
		// The controller is stopping: the lease runs out and another
		// try resumes from the saved state.
		return true, ctx.Err()
	}
	msg := ""
	if runErr != nil {
		msg = runErr.Error()
		result = nil
		r.appendLog(ctx, c.ID, "Failed: "+msg+"\n")
	}
	return true, r.store.FinishSubmission(ctx, c.ID, r.owner, result, msg)
}

func (r *Runner) renew(ctx context.Context, id string, cancel context.CancelFunc, lost chan<- error) {
	t := time.NewTicker(r.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := r.store.RenewSubmissionLease(ctx, id, r.owner, r.cfg.Lease)
		if errors.Is(err, store.ErrLeaseLost) {
			lost <- err
			cancel()
			return
		}
		if err != nil && ctx.Err() == nil {
			r.log.WithError(err).WithField("submission", id).Warn("renewing a submission's lease failed; will retry")
		}
	}
}

// run sends one claimed submission.
func (r *Runner) run(ctx context.Context, c *store.Claimed) (*api.SubmissionResult, error) {
	target, ok := r.targets[c.Platform]
	if !ok {
		return nil, r.Supports(c.Platform)
	}
	secrets, err := r.openSecrets(ctx, c)
	if err != nil {
		return nil, err
	}
	if c.Artifact.Name == "" {
		return nil, fmt.Errorf("build %s kept no archive to submit (its artifacts may have expired); build again", c.BuildID)
	}
	dir, err := os.MkdirTemp(r.cfg.TempDir, "submission-")
	if err != nil {
		return nil, fmt.Errorf("make room for the archive: %w", err)
	}
	defer os.RemoveAll(dir)
	archive := filepath.Join(dir, c.Artifact.Name)
	if err := r.fetch(ctx, c, archive); err != nil {
		return nil, err
	}
	r.appendLog(ctx, c.ID, fmt.Sprintf("Submitting %s of build %s (try %d)\n", c.Artifact.Name, c.BuildID, c.Attempts))
	res, err := target.Submit(ctx, Job{Submission: c.Submission, Archive: archive, Secrets: secrets, BuildVersion: c.BuildVersion, State: c.State,
		Save: func(ctx context.Context, s json.RawMessage) error {
			return r.store.SaveSubmissionState(ctx, c.ID, r.owner, s, r.cfg.Lease)
		},
		Log: logWriter{ctx: ctx, r: r, id: c.ID}})
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// openSecrets opens the keys the submission brought, or its project's.
func (r *Runner) openSecrets(ctx context.Context, c *store.Claimed) (api.SubmitSecrets, error) {
	var s api.SubmitSecrets
	var plain []byte
	var err error
	if len(c.CredentialsSealed) > 0 {
		if plain, err = r.secrets.Open(c.CredentialsSealed, aad("submission", c.ID)); err != nil {
			return s, fmt.Errorf("open the submission's keys: %w", err)
		}
	} else {
		kept, err := r.store.SubmitCredential(ctx, c.Project, c.Platform, c.CredentialName)
		if errors.Is(err, store.ErrNotFound) {
			return s, fmt.Errorf("project %s has no %s submit credential %q: set one with `expo-build credentials set --platform %s --service-account-key FILE` (Android) or give its path in eas.json's submit profile",
				c.Project, c.Platform, c.CredentialName, c.Platform)
		}
		if err != nil {
			return s, err
		}
		if plain, err = r.kept.Open(kept.Sealed, aad(c.Project, c.Platform, c.CredentialName)); err != nil {
			return s, fmt.Errorf("open the submit credential %q of project %s: %w", c.CredentialName, c.Project, err)
		}
	}
	if err := json.Unmarshal(plain, &s); err != nil {
		return s, fmt.Errorf("read the submission's keys: %w", err)
	}
	return s, nil
}

// fetch copies the build's archive to path, checking its SHA-256.
func (r *Runner) fetch(ctx context.Context, c *store.Claimed, path string) error {
	obj, _, err := r.files.Open(ctx, c.BuildID, blobs.Artifact(c.Artifact.AttemptID, c.Artifact.Name))
	if err != nil {
		return fmt.Errorf("read the archive %s of build %s: %w", c.Artifact.Name, c.BuildID, err)
	}
	defer obj.Close()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("copy the archive: %w", err)
	}
	defer f.Close()
	sum := sha256.New()
	if _, err := io.Copy(io.MultiWriter(f, sum), obj); err != nil {
		return fmt.Errorf("copy the archive %s of build %s: %w", c.Artifact.Name, c.BuildID, err)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != c.Artifact.SHA256 {
		return fmt.Errorf("the archive %s of build %s has SHA-256 %s, but %s was recorded: it changed in the file store; build again", c.Artifact.Name, c.BuildID, got, c.Artifact.SHA256)
	}
	return f.Close()
}

func (r *Runner) appendLog(ctx context.Context, id, text string) {
	if err := r.store.AppendSubmissionLog(ctx, id, r.owner, text); err != nil && ctx.Err() == nil {
		r.log.WithError(err).WithField("submission", id).Warn("appending to a submission's log failed")
	}
}

// logWriter appends what a store's client says to the submission's log.
type logWriter struct {
	ctx context.Context
	r   *Runner
	id  string
}

func (w logWriter) Write(p []byte) (int, error) {
	w.r.appendLog(w.ctx, w.id, string(p))
	return len(p), nil
}

// playTarget submits Android builds to Google Play.
type playTarget struct{ c *googleplay.Client }

func (t playTarget) Submit(ctx context.Context, j Job) (api.SubmissionResult, error) {
	a := j.Submission.Profile.Android
	if a == nil {
		return api.SubmissionResult{}, errors.New("the submission has no Android submit profile") // refused when it was queued
	}
	if len(j.Secrets.ServiceAccountKey) == 0 {
		return api.SubmissionResult{}, errors.New("no Google service account key: set serviceAccountKeyPath in eas.json's submit profile, or keep one on the farm with `expo-build credentials set --platform android --service-account-key FILE`")
	}
	var st googleplay.State
	if len(j.State) > 0 {
		if err := json.Unmarshal(j.State, &st); err != nil {
			return api.SubmissionResult{}, fmt.Errorf("read the interrupted try's state: %w", err)
		}
	}
	res, err := t.c.Submit(ctx, j.Secrets.ServiceAccountKey, j.Archive, googleplay.Release{
		PackageName: a.ApplicationID, Track: a.Track, ReleaseStatus: a.ReleaseStatus, Rollout: a.Rollout,
		ChangesNotSentForReview: a.ChangesNotSentForReview, VersionCode: googleplay.VersionCode(j.BuildVersion),
	}, st, func(ctx context.Context, s googleplay.State) error {
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		return j.Save(ctx, b)
	}, j.Log)
	if err != nil {
		return api.SubmissionResult{}, err
	}
	return api.SubmissionResult{Store: GooglePlay, Track: a.Track, VersionCode: res.VersionCode, EditID: res.EditID, Resumed: res.Resumed}, nil
}

// ascTarget submits iOS builds to App Store Connect (TestFlight).
type ascTarget struct{ c *appstore.Client }

// ascState is what a resumed App Store Connect submission needs.
type ascState struct {
	UploadID string `json:"upload_id,omitempty"`
}

func (t ascTarget) Submit(ctx context.Context, j Job) (api.SubmissionResult, error) {
	i, k := j.Submission.Profile.IOS, j.Secrets.ASCAPIKey
	if i == nil {
		return api.SubmissionResult{}, errors.New("the submission has no iOS submit profile") // refused when it was queued
	}
	if k == nil {
		return api.SubmissionResult{}, errors.New("no App Store Connect API key: set ascApiKeyPath, ascApiKeyId and ascApiKeyIssuerId in eas.json's submit profile (Apple ID password sign-in is not supported)")
	}
	var st ascState
	if len(j.State) > 0 {
		if err := json.Unmarshal(j.State, &st); err != nil {
			return api.SubmissionResult{}, fmt.Errorf("read the interrupted try's state: %w", err)
		}
	}
	res, err := t.c.Submit(ctx, appstore.Key{IssuerID: k.IssuerID, KeyID: k.KeyID, PrivateKey: k.PrivateKey}, j.Archive, appstore.Options{
		AppID: i.AscAppID, BundleID: i.BundleIdentifier, TeamID: i.AppleTeamID, Groups: i.Groups, UploadID: st.UploadID,
		RecordUpload: func(ctx context.Context, id string) error {
			b, err := json.Marshal(ascState{UploadID: id})
			if err != nil {
				return err
			}
			return j.Save(ctx, b)
		},
	}, j.Log)
	if err != nil {
		return api.SubmissionResult{}, err
	}
	return api.SubmissionResult{Store: AppStoreConnect, BuildNumber: res.BuildNumber, ProcessingState: res.State, Groups: res.Groups}, nil
}
