package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
)

// reaperLock is the advisory lock key that makes one replica at a time sweep.
const reaperLock = 7201002

// SweepReport counts what one sweep changed.
type SweepReport struct {
	Ran             bool // false when another replica holds the reaper lock
	LeasesExpired   int
	WorkersOffline  int
	TimedOut        int
	OTPsExpired     int
	VMTokensExpired int
	// Of the builds taken from expired leases and offline workers:
	Requeued     int // back to pending for another attempt
	DeadLettered int // failed with max_attempts: no attempts left
}

// countRequeues tallies where requeued builds went.
func (r *SweepReport) countRequeues(changes []Change) {
	for _, c := range changes {
		switch {
		case c.Kind != "build":
		case c.Status == string(api.StatusPending):
			r.Requeued++
		case c.Status == string(api.StatusFailed):
			r.DeadLettered++
		}
	}
}

// Sweep requeues builds whose lease expired or whose worker went silent,
// fails builds past their timeout, expires one-time passwords and VM
// tokens, and deletes the variables fixed into attempts that ended. It
// runs under a transaction-scoped advisory lock, so only one replica
// sweeps at a time, and every step is idempotent.
func (s *Store) Sweep(ctx context.Context) (SweepReport, error) {
	var r SweepReport
	err := s.withTx(ctx, func(t *txn) error {
		if err := t.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, reaperLock).Scan(&r.Ran); err != nil || !r.Ran {
			return err
		}
		var err error
		if r.TimedOut, err = t.timeOutBuilds(ctx); err != nil {
			return err
		}
		rows, err := t.Query(ctx, `SELECT attempt_id FROM builds WHERE status IN ('assigned', 'building')
			AND lease_expires_at < now() ORDER BY lease_expires_at LIMIT 1000 FOR UPDATE SKIP LOCKED`)
		if err != nil {
			return fmt.Errorf("find expired leases: %w", err)
		}
		expired, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("find expired leases: %w", err)
		}
		from := len(t.changes)
		if r.LeasesExpired, err = t.requeue(ctx, expired, requeueReason{consume: true, attemptStatus: "expired",
			code: "lease_expired", message: "the worker stopped renewing its lease"}); err != nil {
			return err
		}
		r.countRequeues(t.changes[from:])
		rows, err = t.Query(ctx, `UPDATE workers SET status = 'offline'
			WHERE status = 'online' AND last_seen_at < now() - $1::interval RETURNING id`, t.cfg.WorkerOfflineAfter)
		if err != nil {
			return fmt.Errorf("mark workers offline: %w", err)
		}
		offline, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("mark workers offline: %w", err)
		}
		r.WorkersOffline = len(offline)
		for _, id := range offline {
			t.emit(Change{Kind: "worker", ID: id, Status: "offline"})
			from := len(t.changes)
			if _, err := t.requeueWorkerAttempts(ctx, id, "", requeueReason{consume: true, attemptStatus: "expired",
				code: "worker_offline", message: "the worker went offline"}); err != nil {
				return err
			}
			r.countRequeues(t.changes[from:])
		}
		tag, err := t.Exec(ctx, `UPDATE build_attempts SET otp_hash = NULL WHERE otp_hash IS NOT NULL AND otp_expires_at < now()`)
		if err != nil {
			return fmt.Errorf("expire one-time passwords: %w", err)
		}
		r.OTPsExpired = int(tag.RowsAffected())
		tag, err = t.Exec(ctx, `UPDATE build_attempts SET vm_token_hash = NULL WHERE vm_token_hash IS NOT NULL AND vm_token_expires_at < now()`)
		if err != nil {
			return fmt.Errorf("expire VM tokens: %w", err)
		}
		r.VMTokensExpired = int(tag.RowsAffected())
		// No VM reads an ended attempt's variables any more.
		if _, err := t.Exec(ctx, `DELETE FROM attempt_variables v USING build_attempts a
			WHERE a.id = v.attempt_id AND a.status NOT IN ('assigned', 'running')`); err != nil {
			return fmt.Errorf("delete the variables of ended attempts: %w", err)
		}
		return nil
	})
	return r, err
}

// timeOutBuilds fails running builds that outlived their timeout by the
// grace period: the backstop for a worker that did not enforce it.
func (t *txn) timeOutBuilds(ctx context.Context) (int, error) {
	rows, err := t.Query(ctx, `
		WITH a AS (
			UPDATE build_attempts a SET status = 'timed_out', ended_at = now(), error_code = 'timeout',
				error_message = 'the build exceeded its timeout', otp_hash = NULL, vm_token_hash = NULL
			FROM builds b
			WHERE b.attempt_id = a.id AND b.status IN ('assigned', 'building') AND a.status IN ('assigned', 'running')
				AND a.started_at + make_interval(secs => b.timeout_seconds) + $1::interval < now()
			RETURNING a.id, a.build_id
		)
		UPDATE builds b SET status = 'failed', completed_at = now(), lease_expires_at = NULL, phase = 'failed',
			error_code = 'timeout', error_message = format('the build exceeded its timeout of %s seconds', b.timeout_seconds)
		FROM a WHERE b.id = a.build_id AND b.attempt_id = a.id
		RETURNING b.id, b.status, b.platform`, t.cfg.TimeoutGrace)
	if err != nil {
		return 0, fmt.Errorf("time out builds: %w", err)
	}
	changes, err := collectBuildChanges(rows)
	if err != nil {
		return 0, fmt.Errorf("time out builds: %w", err)
	}
	for _, c := range changes {
		c.Detail = map[string]any{"error_code": "timeout"}
		t.emit(c)
	}
	return len(changes), nil
}

// CertsToDelete lists builds that ended while still holding certificates
// or credentials.
func (s *Store) CertsToDelete(ctx context.Context, limit int) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM builds WHERE (has_certs OR has_credentials) AND certs_deleted_at IS NULL
		AND status IN ('completed', 'failed', 'cancelled') LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("find certificates to delete: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// MarkCertsDeleted records that a build's certificates and credentials are
// gone from disk.
func (s *Store) MarkCertsDeleted(ctx context.Context, buildID string) error {
	_, err := s.pool.Exec(ctx, `UPDATE builds SET certs_deleted_at = now() WHERE id = $1 AND certs_deleted_at IS NULL`, buildID)
	if err != nil {
		return fmt.Errorf("mark certificates deleted: %w", err)
	}
	return nil
}

// QueueDepth counts claimable-or-waiting pending builds, capped so that a
// huge backlog never makes a poll slow.
func (s *Store) QueueDepth(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM builds WHERE status = 'pending' LIMIT 10000) q`).Scan(&n)
	return n, err
}
