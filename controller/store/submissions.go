package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
)

// KindSubmission is the Change kind (and audit entity) of a submission to a
// store; its events are "submission.<status>".
const KindSubmission = "submission"

// MaxSubmissionLog bounds a submission's kept log: the runner's own lines,
// so a few kilobytes in practice.
const MaxSubmissionLog = 64 << 10

// MaxSubmissionAttempts bounds the runner's claims of one submission: a
// submission whose runner keeps being interrupted (a controller restarted
// mid-upload) fails cleanly rather than loop.
const MaxSubmissionAttempts = 5

// NewSubmission is a submission to queue. Its credentials, when it brings
// its own, are sealed by the caller for this submission's id.
type NewSubmission struct {
	ID                string // from NewID
	Project           string
	Platform          string
	BuildID           string
	Profile           api.SubmitProfile
	CredentialName    string // the project's submit credential; "" when CredentialsSealed is set
	CredentialsSealed []byte
	SubmittedBy       string // API key id
}

// Claimed is a submission the runner holds the lease of.
type Claimed struct {
	api.Submission
	CredentialsSealed []byte
	// State is what an interrupted try persisted (SaveSubmissionState).
	State json.RawMessage
	// Artifact is the build's application archive to send.
	Artifact StoredArtifact
	// BuildVersion is the build's versionCode or buildNumber ("" unknown).
	BuildVersion string
}

var storeProfileName = regexp.MustCompile(`^[A-Za-z0-9_.-]{0,100}$`)

func validateNewSubmission(ns NewSubmission) error {
	if err := ValidatePlatform(ns.Platform); err != nil {
		return err
	}
	if ns.Platform != ns.profilePlatform() {
		return fmt.Errorf("%w: field \"profile\" needs its %q section for a %s submission", ErrInvalid, ns.Platform, ns.Platform)
	}
	if !storeProfileName.MatchString(ns.Profile.Name) {
		return fmt.Errorf("%w: field \"profile.name\" %q is not an eas.json profile name", ErrInvalid, ns.Profile.Name)
	}
	if (ns.CredentialName == "") == (len(ns.CredentialsSealed) == 0) {
		return errors.New("a submission names a project credential or brings its own, not both") // a programming error
	}
	return nil
}

func (ns NewSubmission) profilePlatform() string {
	switch {
	case ns.Profile.Android != nil && ns.Profile.IOS == nil:
		return api.PlatformAndroid
	case ns.Profile.IOS != nil && ns.Profile.Android == nil:
		return api.PlatformIOS
	}
	return ""
}

// CreateSubmission queues a submission of a build. A build still running
// is accepted: the submission waits for it to complete (and fails if it
// does not).
func (s *Store) CreateSubmission(ctx context.Context, ns NewSubmission) (api.Submission, error) {
	if err := validateNewSubmission(ns); err != nil {
		return api.Submission{}, err
	}
	var out api.Submission
	err := s.withTx(ctx, func(t *txn) error {
		var status, platform, project string
		err := t.QueryRow(ctx, `SELECT status, platform, project FROM builds WHERE id = $1`, ns.BuildID).Scan(&status, &platform, &project)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: no build %q", ErrNotFound, ns.BuildID)
		}
		if err != nil {
			return fmt.Errorf("read build: %w", err)
		}
		switch {
		case platform != ns.Platform:
			return fmt.Errorf("%w: build %s is an %s build; submit it with --platform %s", ErrInvalid, ns.BuildID, platform, platform)
		case project != ns.Project:
			return fmt.Errorf("%w: build %s belongs to project %q, not %q", ErrInvalid, ns.BuildID, project, ns.Project)
		case status == string(api.StatusFailed) || status == string(api.StatusCancelled):
			return fmt.Errorf("%w: build %s %s: it made nothing to submit; submit a completed build", ErrConflict, ns.BuildID, status)
		}
		out, err = t.insertSubmission(ctx, ns)
		return err
	})
	return out, err
}

// insertSubmission queues ns in t.
func (t *txn) insertSubmission(ctx context.Context, ns NewSubmission) (api.Submission, error) {
	profile, err := json.Marshal(ns.Profile)
	if err != nil {
		return api.Submission{}, fmt.Errorf("encode the submit profile: %w", err)
	}
	sub, err := scanSubmission(t.QueryRow(ctx, `INSERT INTO submissions AS s (id, project, platform, build_id, profile, credential_name, credentials_sealed, submitted_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, NULLIF($8, '')) RETURNING `+submissionColumns,
		ns.ID, ns.Project, ns.Platform, ns.BuildID, profile, ns.CredentialName, ns.CredentialsSealed, ns.SubmittedBy))
	if err != nil {
		return sub, fmt.Errorf("queue the submission: %w", err)
	}
	t.emit(submissionChange(sub, nil))
	return sub, nil
}

// submissionChange is the audit event of a submission's new status: what it
// submits and where, never its keys.
func submissionChange(sub api.Submission, extra map[string]any) Change {
	d := map[string]any{"build_id": sub.BuildID, "project": sub.Project, "profile": sub.Profile.Name, "attempt": sub.Attempts}
	if a := sub.Profile.Android; a != nil {
		d["application_id"], d["track"] = a.ApplicationID, a.Track
	}
	if i := sub.Profile.IOS; i != nil {
		d["asc_app_id"] = i.AscAppID
	}
	if sub.ErrorMessage != nil {
		d["error"] = *sub.ErrorMessage
	}
	if r := sub.Result; r != nil {
		d["store"], d["version_code"] = r.Store, r.VersionCode
	}
	for k, v := range extra {
		d[k] = v
	}
	return Change{Kind: KindSubmission, ID: sub.ID, Status: string(sub.Status), Platform: sub.Platform, Detail: d}
}

// submissionColumns are read from submissions aliased s.
const submissionColumns = `s.id, s.project, s.platform, s.build_id, s.status, s.profile, s.credential_name,
	s.attempts, s.error_message, s.result, s.created_at, s.started_at, s.completed_at`

func scanSubmission(r pgx.Row, extra ...any) (api.Submission, error) {
	var s api.Submission
	var profile, result []byte
	err := r.Scan(append([]any{&s.ID, &s.Project, &s.Platform, &s.BuildID, &s.Status, &profile, &s.CredentialName,
		&s.Attempts, &s.ErrorMessage, &result, &s.CreatedAt, &s.StartedAt, &s.CompletedAt}, extra...)...)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(profile, &s.Profile); err != nil {
		return s, fmt.Errorf("read the submit profile: %w", err)
	}
	if result != nil {
		s.Result = &api.SubmissionResult{}
		if err := json.Unmarshal(result, s.Result); err != nil {
			return s, fmt.Errorf("read the submission's result: %w", err)
		}
	}
	return s, nil
}

// GetSubmission returns one submission with its log.
func (s *Store) GetSubmission(ctx context.Context, id string) (api.Submission, error) {
	var log string
	sub, err := scanSubmission(s.pool.QueryRow(ctx, `SELECT `+submissionColumns+`, s.log FROM submissions s WHERE s.id = $1`, id), &log)
	if errors.Is(err, pgx.ErrNoRows) {
		return sub, fmt.Errorf("%w: no submission %q", ErrNotFound, id)
	}
	if err != nil {
		return sub, fmt.Errorf("read submission: %w", err)
	}
	sub.Log = log
	return sub, nil
}

// BuildSubmissions lists a build's submissions, newest first (logs left out).
func (s *Store) BuildSubmissions(ctx context.Context, buildID string) ([]api.Submission, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+submissionColumns+` FROM submissions s WHERE s.build_id = $1 ORDER BY s.created_at DESC, s.id DESC LIMIT 100`, buildID)
	if err != nil {
		return nil, fmt.Errorf("list submissions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.Submission, error) { return scanSubmission(r) })
	if err != nil {
		return nil, fmt.Errorf("list submissions: %w", err)
	}
	return out, nil
}

// ClaimSubmission takes the oldest submission ready to run: queued with its
// build completed, or in progress under a lease that ran out (its runner
// was interrupted: it resumes from its saved state). SKIP LOCKED makes each
// claim one replica's. A submission claimed MaxSubmissionAttempts times
// fails instead. nil when none is ready.
func (s *Store) ClaimSubmission(ctx context.Context, owner string, lease time.Duration) (*Claimed, error) {
	var c *Claimed
	err := s.withTx(ctx, func(t *txn) error {
		var state []byte
		var artName, artAttempt, artSHA *string
		var artSize *int64
		var buildVersion string
		cl := &Claimed{}
		sub, err := scanSubmission(t.QueryRow(ctx, `
			WITH next AS (
				SELECT q.id FROM submissions q JOIN builds b ON b.id = q.build_id
				WHERE b.status = 'completed'
					AND (q.status = 'queued' OR (q.status = 'in_progress' AND q.lease_expires_at < now()))
				ORDER BY q.created_at, q.id LIMIT 1 FOR UPDATE OF q SKIP LOCKED
			)
			UPDATE submissions s SET status = 'in_progress', attempts = s.attempts + 1, lease_owner = $1,
				lease_expires_at = now() + $2::interval, started_at = COALESCE(s.started_at, now())
			FROM next WHERE s.id = next.id
			RETURNING `+submissionColumns+`, s.credentials_sealed, s.store_state`,
			owner, lease), &cl.CredentialsSealed, &state)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("claim a submission: %w", err)
		}
		cl.Submission, cl.State = sub, state
		if sub.Attempts > MaxSubmissionAttempts {
			msg := fmt.Sprintf("the submission was interrupted %d times (the controller restarted while it ran); submit again", MaxSubmissionAttempts)
			return t.finishSubmission(ctx, sub.ID, owner, nil, msg)
		}
		// The archive the build shows: the artifact of the attempt that
		// completed it, preferring an app archive; none once the collector
		// deleted the build's artifacts.
		err = t.QueryRow(ctx, `SELECT a.name, a.attempt_id, a.sha256, a.size, `+versionColumns+`
			FROM builds b LEFT JOIN artifacts a ON a.build_id = b.id AND a.attempt_id = b.attempt_id AND b.artifacts_deleted_at IS NULL
			WHERE b.id = $1
			ORDER BY (a.name ~ '\.(aab|apk|ipa)$') DESC, a.name LIMIT 1`, sub.BuildID).Scan(&artName, &artAttempt, &artSHA, &artSize, new(string), &buildVersion)
		if err != nil {
			return fmt.Errorf("read the build's archive: %w", err)
		}
		if artName != nil {
			cl.Artifact = StoredArtifact{Artifact: api.Artifact{Name: *artName, SHA256: *artSHA, Size: *artSize}, AttemptID: *artAttempt}
		}
		cl.BuildVersion = buildVersion
		t.emit(submissionChange(sub, nil))
		c = cl
		return nil
	})
	return c, err
}

// FailOrphanedSubmissions fails the queued submissions whose build ended
// without completing: nothing will ever be there to submit.
func (s *Store) FailOrphanedSubmissions(ctx context.Context) (int, error) {
	n := 0
	err := s.withTx(ctx, func(t *txn) error {
		rows, err := t.Query(ctx, `
			UPDATE submissions s SET status = 'failed', completed_at = now(), credentials_sealed = NULL,
				error_message = 'build ' || b.id || ' ' || b.status || ': it made nothing to submit'
			FROM builds b WHERE b.id = s.build_id AND s.status = 'queued' AND b.status IN ('failed', 'cancelled')
			RETURNING `+submissionColumns)
		if err != nil {
			return fmt.Errorf("fail orphaned submissions: %w", err)
		}
		subs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.Submission, error) { return scanSubmission(r) })
		if err != nil {
			return fmt.Errorf("fail orphaned submissions: %w", err)
		}
		for _, sub := range subs {
			t.emit(submissionChange(sub, nil))
		}
		n = len(subs)
		return nil
	})
	return n, err
}

// SaveSubmissionState records what a resumed try needs (the store's edit)
// and renews the lease; ErrLeaseLost when owner no longer holds it.
func (s *Store) SaveSubmissionState(ctx context.Context, id, owner string, state json.RawMessage, lease time.Duration) error {
	tag, err := s.pool.Exec(ctx, `UPDATE submissions SET store_state = $3, lease_expires_at = now() + $4::interval
		WHERE id = $1 AND lease_owner = $2 AND status = 'in_progress'`, id, owner, []byte(state), lease)
	if err != nil {
		return fmt.Errorf("save the submission's state: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: submission %s is no longer this runner's", ErrLeaseLost, id)
	}
	return nil
}

// RenewSubmissionLease extends the lease owner holds.
func (s *Store) RenewSubmissionLease(ctx context.Context, id, owner string, lease time.Duration) error {
	tag, err := s.pool.Exec(ctx, `UPDATE submissions SET lease_expires_at = now() + $3::interval
		WHERE id = $1 AND lease_owner = $2 AND status = 'in_progress'`, id, owner, lease)
	if err != nil {
		return fmt.Errorf("renew the submission's lease: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: submission %s is no longer this runner's", ErrLeaseLost, id)
	}
	return nil
}

// AppendSubmissionLog adds text to a submission's log; past
// MaxSubmissionLog the rest is dropped with a note.
func (s *Store) AppendSubmissionLog(ctx context.Context, id, owner, text string) error {
	const cut = "\n[log cut: it reached its limit]\n"
	_, err := s.pool.Exec(ctx, `UPDATE submissions SET log = CASE
			WHEN octet_length(log) >= $4 THEN log
			WHEN octet_length(log) + octet_length($3) > $4 THEN log || $5
			ELSE log || $3 END
		WHERE id = $1 AND lease_owner = $2`, id, owner, sanitizeText(text, MaxSubmissionLog), MaxSubmissionLog, cut)
	if err != nil {
		return fmt.Errorf("append to the submission's log: %w", err)
	}
	return nil
}

// FinishSubmission ends a submission owner holds: succeeded with result,
// or failed with msg (the store's own words). Its own credentials are
// dropped either way.
func (s *Store) FinishSubmission(ctx context.Context, id, owner string, result *api.SubmissionResult, msg string) error {
	return s.withTx(ctx, func(t *txn) error { return t.finishSubmission(ctx, id, owner, result, msg) })
}

func (t *txn) finishSubmission(ctx context.Context, id, owner string, result *api.SubmissionResult, msg string) error {
	status := api.SubmissionSucceeded
	var res []byte
	if result != nil {
		var err error
		if res, err = json.Marshal(result); err != nil {
			return fmt.Errorf("encode the submission's result: %w", err)
		}
	} else {
		status = api.SubmissionFailed
	}
	sub, err := scanSubmission(t.QueryRow(ctx, `UPDATE submissions s SET status = $3, result = $4, error_message = NULLIF($5, ''),
			completed_at = now(), lease_owner = NULL, lease_expires_at = NULL, credentials_sealed = NULL
		WHERE s.id = $1 AND s.lease_owner = $2 AND s.status = 'in_progress' RETURNING `+submissionColumns,
		id, owner, string(status), res, sanitizeText(msg, 4000)))
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: submission %s is no longer this runner's", ErrLeaseLost, id)
	}
	if err != nil {
		return fmt.Errorf("end the submission: %w", err)
	}
	t.emit(submissionChange(sub, nil))
	return nil
}

// SealedSubmitCredential is a project's submit credential with its secret
// (api.SubmitSecrets JSON) sealed by the caller for its project, platform
// and name.
type SealedSubmitCredential struct {
	api.SubmitCredentialInfo
	Sealed []byte
}

// SetSubmitCredential creates or replaces a project's submit credential;
// audited by what identifies it.
func (s *Store) SetSubmitCredential(ctx context.Context, c SealedSubmitCredential) (api.SubmitCredentialInfo, error) {
	info, err := json.Marshal(c.SubmitCredentialInfo)
	if err != nil {
		return api.SubmitCredentialInfo{}, fmt.Errorf("encode credential info: %w", err)
	}
	out := c.SubmitCredentialInfo
	err = s.withTx(ctx, func(t *txn) error {
		err := t.QueryRow(ctx, `INSERT INTO project_submit_credentials (project, platform, name, info, secret_sealed) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (project, platform, name) DO UPDATE SET info = EXCLUDED.info, secret_sealed = EXCLUDED.secret_sealed, created_at = now()
			RETURNING created_at`, c.Project, c.Platform, c.Name, info, c.Sealed).Scan(&out.CreatedAt)
		if err != nil {
			return fmt.Errorf("store submit credential: %w", err)
		}
		t.emit(Change{Kind: "project", ID: c.Project, Event: "project.submit_credential_set", Platform: c.Platform, Detail: submitCredentialDetail(c.SubmitCredentialInfo)})
		return nil
	})
	return out, err
}

func submitCredentialDetail(c api.SubmitCredentialInfo) map[string]any {
	return map[string]any{"name": c.Name, "client_email": c.ClientEmail, "key_id": c.KeyID, "issuer_id": c.IssuerID}
}

func scanSubmitCredential(r pgx.Row, extra ...any) (api.SubmitCredentialInfo, error) {
	var c api.SubmitCredentialInfo
	var info []byte
	var created time.Time
	if err := r.Scan(append([]any{&info, &created}, extra...)...); err != nil {
		return c, err
	}
	if err := json.Unmarshal(info, &c); err != nil {
		return c, fmt.Errorf("read submit credential info: %w", err)
	}
	c.CreatedAt = created
	return c, nil
}

// SubmitCredentials lists a project's submit credentials (no secrets).
func (s *Store) SubmitCredentials(ctx context.Context, project string) ([]api.SubmitCredentialInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT info, created_at FROM project_submit_credentials WHERE project = $1 ORDER BY platform, name`, project)
	if err != nil {
		return nil, fmt.Errorf("list submit credentials: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.SubmitCredentialInfo, error) { return scanSubmitCredential(r) })
	if err != nil {
		return nil, fmt.Errorf("list submit credentials: %w", err)
	}
	return out, nil
}

// SubmitCredential reads one submit credential with its sealed secret.
func (s *Store) SubmitCredential(ctx context.Context, project, platform, name string) (SealedSubmitCredential, error) {
	var c SealedSubmitCredential
	var err error
	c.SubmitCredentialInfo, err = scanSubmitCredential(s.pool.QueryRow(ctx, `SELECT info, created_at, secret_sealed FROM project_submit_credentials
		WHERE project = $1 AND platform = $2 AND name = $3`, project, platform, name), &c.Sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, fmt.Errorf("%w: project %s has no %s submit credential %q", ErrNotFound, project, platform, name)
	}
	if err != nil {
		return c, fmt.Errorf("read submit credential: %w", err)
	}
	return c, nil
}

// DeleteSubmitCredential deletes a project's submit credential; audited.
func (s *Store) DeleteSubmitCredential(ctx context.Context, project, platform, name string) error {
	return s.withTx(ctx, func(t *txn) error {
		c, err := scanSubmitCredential(t.QueryRow(ctx, `DELETE FROM project_submit_credentials WHERE project = $1 AND platform = $2 AND name = $3
			RETURNING info, created_at`, project, platform, name))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: project %s has no %s submit credential %q", ErrNotFound, project, platform, name)
		}
		if err != nil {
			return fmt.Errorf("delete submit credential: %w", err)
		}
		t.emit(Change{Kind: "project", ID: project, Event: "project.submit_credential_deleted", Platform: platform, Detail: submitCredentialDetail(c)})
		return nil
	})
}
