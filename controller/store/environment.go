package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
)

// environmentDigest is the digest of a build's environment, an aggregate
// over variable rows v (project_variables' columns): SHA-256 over each
// variable's name, visibility, type and value_hmac, in name order. The
// value_hmac is the controller's keyed hash of the value (HMAC-SHA256 under
// a key derived from the certificate key, bound to project, environment
// and name), so the digest says whether two environments hold the same
// values without revealing any. The same variables with the same values
// give the same digest; a rotated value, another visibility or type, a
// variable added or deleted give another. It is NULL when a variable has
// no current keyed hash (set by a release before hashes, or replaced by
// one since): such an environment equals none. The claim stores it as
// builds.env_digest over the variables it fixes; reuse compares it with
// the project's variables now.
const environmentDigest = `CASE WHEN bool_and(v.value_hmac IS NOT NULL AND v.value_hmac_of = sha256(v.value_sealed)) IS NOT FALSE
	THEN sha256(convert_to(COALESCE(string_agg(v.name || ' ' || v.visibility || ' ' || v.type || ' ' || encode(v.value_hmac, 'hex'),
		E'\n' ORDER BY v.name COLLATE "C"), ''), 'UTF8')) END`

// AttemptEnvironment is what the VM of one attempt reads of its build.
type AttemptEnvironment struct {
	Spec *api.BuildSpec // nil for a raw submit
	// Variables are the ones the claim fixed (sealed), in name order.
	Variables []SealedVariable
	// Trusted says the attempt's worker may hold sensitive and secret
	// values now: the claim checked its pool, and this checks it again.
	Trusted bool
}

// AttemptEnvironment returns build buildID's spec, its cache keys bound
// to the attempt's cache domain as in its job, and the variables its
// attempt attemptID was claimed with; variables set since are not among
// them. An attempt the previous release claimed has none fixed: its
// variables are the project's now.
func (s *Store) AttemptEnvironment(ctx context.Context, buildID, attemptID string) (AttemptEnvironment, error) {
	var env AttemptEnvironment
	var raw []byte
	var fixed bool
	var domain string
	err := s.pool.QueryRow(ctx, `SELECT b.spec, a.variables_fixed, COALESCE(`+trustedWorker+`, false), a.cache_domain
		FROM build_attempts a JOIN builds b ON b.id = a.build_id
			LEFT JOIN LATERAL (`+workerPool+` WHERE w.id = a.worker_id) me ON true
		WHERE a.id = $1 AND a.build_id = $2`, attemptID, buildID).Scan(&raw, &fixed, &env.Trusted, &domain)
	if errors.Is(err, pgx.ErrNoRows) {
		return env, fmt.Errorf("%w: build %s has no attempt %s", ErrNotFound, buildID, attemptID)
	}
	if err != nil {
		return env, fmt.Errorf("read the attempt's environment: %w", err)
	}
	if env.Spec, err = decodeSpec(raw); err != nil || env.Spec == nil {
		return env, err
	}
	qualifyCaches(env.Spec.Caches, domain) // the keys its worker was given
	if !fixed {
		if env.Spec.Environment != "" { // "" would list every environment's
			env.Variables, err = s.Variables(ctx, env.Spec.BuildProject(), env.Spec.Environment)
		}
		return env, err
	}
	rows, err := s.pool.Query(ctx, `SELECT b.project, b.spec->>'environment', v.name, v.visibility, v.type, v.updated_at, v.value_sealed
		FROM attempt_variables v JOIN build_attempts a ON a.id = v.attempt_id JOIN builds b ON b.id = a.build_id
		WHERE v.attempt_id = $1 ORDER BY v.name`, attemptID)
	if err != nil {
		return env, fmt.Errorf("read the attempt's variables: %w", err)
	}
	if env.Variables, err = collectVariables(rows); err != nil {
		return env, fmt.Errorf("read the attempt's variables: %w", err)
	}
	return env, nil
}
