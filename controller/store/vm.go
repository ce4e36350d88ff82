package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
)

// VMAuth exchanges a build attempt's one-time password for a VM token. The
// OTP works once, only for its own build, only while the attempt is live.
func (s *Store) VMAuth(ctx context.Context, buildID, otp string) (api.VMAuthResponse, error) {
	token, hash := newSecret(prefixVMToken)
	resp := api.VMAuthResponse{VMToken: token, BuildID: buildID}
	err := s.pool.QueryRow(ctx, `UPDATE build_attempts SET otp_hash = NULL, vm_token_hash = $3, vm_token_expires_at = now() + $4::interval
		WHERE otp_hash = $1 AND build_id = $2 AND otp_expires_at > now() AND status IN ('assigned', 'running')
		RETURNING vm_token_expires_at`, HashSecret(otp), buildID, hash, s.cfg.VMTokenTTL).Scan(&resp.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.VMAuthResponse{}, fmt.Errorf("%w: the one-time password is unknown, used, expired or for another build", ErrUnauthorized)
	}
	if err != nil {
		return api.VMAuthResponse{}, fmt.Errorf("exchange OTP: %w", err)
	}
	return resp, nil
}

// AuthenticateVM returns the live attempt a VM token belongs to. A valid
// token presented for another build gives ErrForbidden.
func (s *Store) AuthenticateVM(ctx context.Context, buildID, token string) (attemptID string, err error) {
	var tokenBuild string
	err = s.pool.QueryRow(ctx, `SELECT id, build_id FROM build_attempts WHERE vm_token_hash = $1
		AND vm_token_expires_at > now() AND status IN ('assigned', 'running')`, HashSecret(token)).Scan(&attemptID, &tokenBuild)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("%w: VM token unknown, expired, or its attempt has ended", ErrUnauthorized)
	}
	if err != nil {
		return "", fmt.Errorf("authenticate VM token: %w", err)
	}
	if tokenBuild != buildID {
		return "", fmt.Errorf("%w: this VM token belongs to another build", ErrForbidden)
	}
	return attemptID, nil
}

// WorkerHoldsBuild reports ErrForbidden unless the worker instance holds a
// live attempt of the build (the worker may fetch the source it runs).
func (s *Store) WorkerHoldsBuild(ctx context.Context, w WorkerAuth, buildID string) error {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM build_attempts WHERE build_id = $1 AND worker_id = $2
		AND worker_instance = $3 AND status IN ('assigned', 'running'))`, buildID, w.WorkerID, w.InstanceID).Scan(&ok)
	if err != nil {
		return fmt.Errorf("check build assignment: %w", err)
	}
	if !ok {
		return fmt.Errorf("%w: build %s is not assigned to this worker", ErrForbidden, buildID)
	}
	return nil
}

// BuildFiles says which stored files a build has.
type BuildFiles struct {
	SourceFormat   string
	SourceSize     int64
	SourceSHA256   string
	HasCerts       bool
	HasCredentials bool
	CertsDeleted   bool // the certificates and credentials are gone
	Status         api.BuildStatus
}

// Files returns what a build stored at submit.
func (s *Store) Files(ctx context.Context, buildID string) (BuildFiles, error) {
	var f BuildFiles
	err := s.pool.QueryRow(ctx, `SELECT source_format, source_size, source_sha256, has_certs, has_credentials, certs_deleted_at IS NOT NULL, status
		FROM builds WHERE id = $1`, buildID).Scan(&f.SourceFormat, &f.SourceSize, &f.SourceSHA256, &f.HasCerts, &f.HasCredentials, &f.CertsDeleted, &f.Status)
	if errors.Is(err, pgx.ErrNoRows) {
		return f, fmt.Errorf("%w: no build %q", ErrNotFound, buildID)
	}
	return f, err
}

// AddArtifact records an artifact the VM uploaded for its live attempt. The
// file is moved into place only while the attempt is verified live; the
// build shows it once the attempt ends the build, and never if another
// attempt does. An attempt holds at most maxPerAttempt artifacts (0: no
// limit); uploading a name again replaces it and is always allowed.
func (s *Store) AddArtifact(ctx context.Context, buildID, attemptID string, a *PendingArtifact, maxPerAttempt int) error {
	return s.withTx(ctx, func(t *txn) error {
		var live bool
		err := t.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM builds WHERE id = $1 AND attempt_id = $2
			AND status IN ('assigned', 'building') FOR UPDATE)`, buildID, attemptID).Scan(&live)
		if err != nil {
			return fmt.Errorf("check attempt: %w", err)
		}
		if !live {
			return fmt.Errorf("%w: attempt %s of build %s has ended", ErrLeaseLost, attemptID, buildID)
		}
		if maxPerAttempt > 0 {
			var others int
			// The build's row is locked: concurrent uploads of one attempt count one after another.
			if err := t.QueryRow(ctx, `SELECT count(*) FROM artifacts WHERE build_id = $1 AND attempt_id = $2 AND name <> $3`,
				buildID, attemptID, a.Name).Scan(&others); err != nil {
				return fmt.Errorf("count artifacts: %w", err)
			}
			if others >= maxPerAttempt {
				return fmt.Errorf("%w: build %s already has %d artifacts, the most one build may upload (--max-artifacts-per-build); bundle the files into one archive or ask the admin to raise it",
					ErrTooLarge, buildID, others)
			}
		}
		return t.recordArtifact(ctx, buildID, attemptID, a)
	})
}

// OpenDirectUpload counts a direct upload the VM opens for its live
// attempt, refusing (ErrTooLarge, naming the limit) one past maxPerAttempt
// (0: no limit): each signs URLs to the object store whose parts stay
// there until completed or swept, so an attempt may not open them without
// end.
func (s *Store) OpenDirectUpload(ctx context.Context, buildID, attemptID string, maxPerAttempt int) error {
	var live, counted bool
	var opened int
	// One statement: concurrent opens of one attempt are counted one
	// after another by the row lock the UPDATE takes.
	err := s.pool.QueryRow(ctx, `WITH a AS (
			SELECT a.id, a.direct_uploads FROM build_attempts a JOIN builds b ON b.id = a.build_id AND b.attempt_id = a.id
			WHERE a.id = $1 AND a.build_id = $2 AND b.status IN ('assigned', 'building')),
		up AS (
			UPDATE build_attempts SET direct_uploads = direct_uploads + 1
			WHERE id = (SELECT id FROM a) AND ($3 = 0 OR direct_uploads < $3) RETURNING direct_uploads)
		SELECT EXISTS (SELECT 1 FROM a), EXISTS (SELECT 1 FROM up), COALESCE((SELECT direct_uploads FROM a), 0)`,
		attemptID, buildID, maxPerAttempt).Scan(&live, &counted, &opened)
	switch {
	case err != nil:
		return fmt.Errorf("count the attempt's direct uploads: %w", err)
	case !live:
		return fmt.Errorf("%w: attempt %s of build %s has ended", ErrLeaseLost, attemptID, buildID)
	case !counted:
		return fmt.Errorf("%w: attempt %s of build %s has opened %d direct uploads, the most one attempt may (--max-direct-uploads-per-attempt; every artifact upload, and every fresh start of one, opens one); upload fewer files or bundle them into one archive",
			ErrTooLarge, attemptID, buildID, opened)
	}
	return nil
}

// CheckLease reports ErrLeaseLost unless the worker instance still holds
// the attempt with this lease token.
func (s *Store) CheckLease(ctx context.Context, w WorkerAuth, buildID, attemptID, leaseToken string) error {
	if !ValidID(buildID) || !ValidID(attemptID) {
		return fmt.Errorf("%w: build %q has no attempt %q of this worker", ErrLeaseLost, buildID, attemptID)
	}
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM build_attempts WHERE id = $1 AND build_id = $2 AND worker_id = $3
		AND worker_instance = $4 AND lease_token_hash = $5 AND (status IN ('assigned', 'running') OR result IS NOT NULL))`,
		attemptID, buildID, w.WorkerID, w.InstanceID, HashSecret(leaseToken)).Scan(&ok)
	if err != nil {
		return fmt.Errorf("check lease: %w", err)
	}
	if !ok {
		return fmt.Errorf("%w: build %s attempt %s is not held by this worker any more; stop it", ErrLeaseLost, buildID, attemptID)
	}
	return nil
}

// The sealed files a build attempt's VM fetches, each at most once.
const (
	SecretCerts       = "certs"       // GET /api/builds/{id}/certs-secure
	SecretCredentials = "credentials" // GET /api/builds/{id}/credentials
	SecretSecrets     = "secrets"     // GET /api/builds/{id}/spec: the project's variables, secret ones included
)

// TakeSecret records that the VM of a live attempt takes one of its build's
// sealed files (SecretCerts, SecretCredentials or SecretSecrets), and
// audits it. Each leaves the controller once per attempt: a second take is
// ErrGone; the next attempt may take it again. A worker that hands back an
// attempt after a take pays an attempt for it (see requeue).
func (s *Store) TakeSecret(ctx context.Context, buildID, attemptID, what string) error {
	return s.withTx(ctx, func(t *txn) error {
		var taken []string
		err := t.QueryRow(ctx, `UPDATE build_attempts SET secrets_fetched = array_append(secrets_fetched, $3)
			WHERE id = $1 AND build_id = $2 AND status IN ('assigned', 'running') AND NOT ($3 = ANY(secrets_fetched))
			RETURNING secrets_fetched`, attemptID, buildID, what).Scan(&taken)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: this attempt's VM already fetched the build's %s; they leave the controller once per attempt (a new attempt fetches them again)", ErrGone, what)
		}
		if err != nil {
			return fmt.Errorf("record the %s fetch: %w", what, err)
		}
		t.emit(Change{Kind: "build", ID: buildID, Event: "build.secrets_fetched", Detail: map[string]any{"attempt_id": attemptID, "what": what}})
		return nil
	})
}

// ReturnSecret undoes TakeSecret when the controller could not write the
// file out whole (the VM then fetches it again), and audits that too.
func (s *Store) ReturnSecret(ctx context.Context, buildID, attemptID, what string) error {
	return s.withTx(ctx, func(t *txn) error {
		tag, err := t.Exec(ctx, `UPDATE build_attempts SET secrets_fetched = array_remove(secrets_fetched, $3)
			WHERE id = $1 AND build_id = $2 AND $3 = ANY(secrets_fetched)`, attemptID, buildID, what)
		if err != nil {
			return fmt.Errorf("undo the %s fetch: %w", what, err)
		}
		if tag.RowsAffected() > 0 {
			t.emit(Change{Kind: "build", ID: buildID, Event: "build.secrets_returned", Detail: map[string]any{"attempt_id": attemptID, "what": what}})
		}
		return nil
	})
}
