package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
)

// ReusableBuild returns the newest completed build that made what spec
// would make: the same project and platform; a source whose fingerprint,
// as the controller computed it from the archive it received, is spec's
// (a fingerprint a spec only declared is never matched: a build whose spec
// declared another than its archive's is never reused, nor one stored
// before the controller computed them); the same resolved profile (name
// and content), the same signing credentials (by fingerprint) and the same
// environment (environmentDigest: the variables its attempt was claimed
// with are the project's variables of the spec's environment now, values
// included); whose artifacts are still kept. ErrNotFound when there is
// none; the caller then builds. Matching is on the stored columns, spec
// and digest, in SQL.
func (s *Store) ReusableBuild(ctx context.Context, spec api.BuildSpec) (api.Build, error) {
	if !sha256Hex.MatchString(spec.SourceFingerprint) {
		return api.Build{}, fmt.Errorf("%w: field \"source_fingerprint\" must be 64 lowercase hex digits (the SHA-256 expo-build computes while packing), got %q", ErrInvalid, spec.SourceFingerprint)
	}
	profile, err := json.Marshal(spec.Profile)
	if err != nil {
		return api.Build{}, fmt.Errorf("encode the spec's profile: %w", err)
	}
	creds, err := json.Marshal(spec.Credentials)
	if err != nil {
		return api.Build{}, fmt.Errorf("encode the spec's credentials: %w", err)
	}
	var retain *float64 // seconds artifacts are kept; nil: forever
	if s.cfg.RetainArtifacts > 0 {
		v := s.cfg.RetainArtifacts.Seconds()
		retain = &v
	}
	var b api.Build
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		var id string
		err := tx.QueryRow(ctx, `SELECT b.id FROM builds b
			WHERE b.status = 'completed' AND b.project = $1 AND b.platform = $2
				AND b.source_fingerprint = $3 AND NOT b.source_fingerprint_mismatch
				AND b.spec->>'profile_name' = $4 AND b.spec->'profile' = $5::jsonb AND b.spec->'credentials' = $6::jsonb
				AND b.artifacts_deleted_at IS NULL AND ($7::float8 IS NULL OR b.completed_at > now() - make_interval(secs => $7))
				AND b.env_digest = (SELECT `+environmentDigest+` FROM project_variables v WHERE v.project = $1 AND v.environment = $8)
				AND EXISTS (SELECT 1 FROM artifacts a WHERE a.build_id = b.id AND `+visibleArtifact+`)
			ORDER BY b.completed_at DESC LIMIT 1`,
			spec.BuildProject(), spec.Platform, spec.SourceFingerprint, spec.ProfileName, string(profile), string(creds), retain,
			spec.Environment).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: no completed build of project %q for %s with this source, profile, credentials and variables whose artifacts are kept", ErrNotFound, spec.BuildProject(), spec.Platform)
		}
		if err != nil {
			return fmt.Errorf("find a build to reuse: %w", err)
		}
		b, err = getBuild(ctx, tx, id)
		return err
	})
	s.stampExpiry(&b)
	return b, err
}
