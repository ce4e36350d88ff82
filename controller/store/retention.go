package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// gcLock is the advisory lock key that makes one replica at a time collect
// garbage (see package gc). It is held for a whole pass, on a connection of
// its own, so it is a session lock rather than a transaction's.
const gcLock = 7201004

// TryGCLock takes the garbage collector's advisory lock if no other replica
// holds it. ok is false when another does; otherwise release must be
// called. A lost connection (a database restart) releases the lock, so a
// crashed replica never blocks the others.
func (s *Store) TryGCLock(ctx context.Context) (release func(), ok bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("take the garbage collector's lock: %w", err)
	}
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, gcLock).Scan(&ok); err != nil || !ok {
		conn.Release()
		if err != nil {
			return nil, false, fmt.Errorf("take the garbage collector's lock: %w", err)
		}
		return nil, false, nil
	}
	return func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(rctx, `SELECT pg_advisory_unlock($1)`, gcLock); err != nil {
			conn.Conn().Close(rctx) //nolint:errcheck // closing the session frees the lock
		}
		conn.Release()
	}, true, nil
}

// ArtifactRef names one artifact row: the attempt that made it and its
// name (AttemptID "" for one stored before artifacts belonged to attempts).
type ArtifactRef struct {
	BuildID, AttemptID, Name string
}

// StrayArtifacts lists artifacts of attempts that did not end, and will
// never end, their build: the build moved on to another attempt (or back
// to the queue, or to a dead letter), so the build never shows them.
func (s *Store) StrayArtifacts(ctx context.Context, limit int) ([]ArtifactRef, error) {
	rows, err := s.pool.Query(ctx, `SELECT a.build_id, a.attempt_id, a.name FROM artifacts a JOIN builds b ON b.id = a.build_id
		WHERE a.attempt_id <> '' AND a.attempt_id IS DISTINCT FROM b.attempt_id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("find stray artifacts: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[ArtifactRef])
}

// ForgetStrayArtifact deletes the row of a stray artifact, if it still is
// one; the caller deletes its object next (an object left behind by a
// crash is an orphan the collector finds later).
func (s *Store) ForgetStrayArtifact(ctx context.Context, a ArtifactRef) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM artifacts a USING builds b WHERE b.id = a.build_id
		AND a.build_id = $1 AND a.attempt_id = $2 AND a.name = $3 AND a.attempt_id <> '' AND a.attempt_id IS DISTINCT FROM b.attempt_id`,
		a.BuildID, a.AttemptID, a.Name)
	if err != nil {
		return fmt.Errorf("forget stray artifact: %w", err)
	}
	return nil
}

// What ExpireBuilds retires.
const (
	RetireArtifacts = "artifacts"
	RetireSource    = "source"
	RetireLogs      = "logs"
)

// ExpireBuilds marks up to limit builds that ended more than age ago as
// having lost what (RetireArtifacts, RetireSource or RetireLogs) and returns
// their ids; logs are deleted here, with the mark. The caller deletes the
// files next: a download or a retry already answers 410 Gone, and files a
// crash leaves behind are orphans the collector finds later.
func (s *Store) ExpireBuilds(ctx context.Context, what string, age time.Duration, limit int) ([]string, error) {
	var column string
	switch what {
	case RetireArtifacts:
		column = "artifacts_deleted_at"
	case RetireSource:
		column = "source_deleted_at"
	case RetireLogs:
		column = "logs_deleted_at"
	default:
		return nil, fmt.Errorf("expire builds: unknown kind %q", what)
	}
	var ids []string
	err := s.withTx(ctx, func(t *txn) error {
		rows, err := t.Query(ctx, `UPDATE builds SET `+column+` = now() WHERE id IN (
			SELECT id FROM builds WHERE completed_at < now() - $1::interval AND `+column+` IS NULL
				AND status IN ('completed', 'failed', 'cancelled')
			ORDER BY completed_at LIMIT $2 FOR UPDATE SKIP LOCKED)
			RETURNING id`, age, limit)
		if err != nil {
			return fmt.Errorf("expire build %s: %w", what, err)
		}
		if ids, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return fmt.Errorf("expire build %s: %w", what, err)
		}
		if what == RetireLogs && len(ids) > 0 {
			if _, err := t.Exec(ctx, `DELETE FROM build_logs WHERE build_id = ANY($1)`, ids); err != nil {
				return fmt.Errorf("delete expired logs: %w", err)
			}
		}
		return nil
	})
	return ids, err
}

// BuildObjects says which of a build's objects the database still wants.
type BuildObjects struct {
	Exists                                        bool
	SourceDeleted, ArtifactsDeleted, CertsDeleted bool
	// Artifacts are the rows that may yet be shown: the current attempt's
	// and those stored before artifacts belonged to attempts, keyed by
	// ArtifactRef (BuildID included).
	Artifacts map[ArtifactRef]bool
}

// Objects returns, for each of the given builds, which of its objects the
// database still wants; a build that does not exist has Exists false.
func (s *Store) Objects(ctx context.Context, buildIDs []string) (map[string]*BuildObjects, error) {
	out := make(map[string]*BuildObjects, len(buildIDs))
	for _, id := range buildIDs {
		out[id] = &BuildObjects{Artifacts: map[ArtifactRef]bool{}}
	}
	rows, err := s.pool.Query(ctx, `SELECT id, source_deleted_at IS NOT NULL, artifacts_deleted_at IS NOT NULL, certs_deleted_at IS NOT NULL
		FROM builds WHERE id = ANY($1)`, buildIDs)
	if err != nil {
		return nil, fmt.Errorf("read builds' objects: %w", err)
	}
	var id string
	var src, arts, certs bool
	_, err = pgx.ForEachRow(rows, []any{&id, &src, &arts, &certs}, func() error {
		o := out[id]
		o.Exists, o.SourceDeleted, o.ArtifactsDeleted, o.CertsDeleted = true, src, arts, certs
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read builds' objects: %w", err)
	}
	rows, err = s.pool.Query(ctx, `SELECT a.build_id, a.attempt_id, a.name FROM artifacts a JOIN builds b ON b.id = a.build_id
		WHERE a.build_id = ANY($1) AND (a.attempt_id = '' OR a.attempt_id = b.attempt_id)`, buildIDs)
	if err != nil {
		return nil, fmt.Errorf("read builds' artifacts: %w", err)
	}
	refs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ArtifactRef])
	if err != nil {
		return nil, fmt.Errorf("read builds' artifacts: %w", err)
	}
	for _, r := range refs {
		out[r.BuildID].Artifacts[r] = true
	}
	return out, nil
}

// RecordGC audits one garbage collection pass of this replica.
func (s *Store) RecordGC(ctx context.Context, detail map[string]any) error {
	return s.withTx(ctx, func(t *txn) error {
		// The event's order comes from its transaction's id (SealEvents):
		// take one, as a write would.
		if _, err := t.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
			return fmt.Errorf("record the garbage collection: %w", err)
		}
		t.emit(Change{Kind: "controller", ID: t.cfg.ControllerID, Event: "controller.gc", Detail: detail})
		return nil
	})
}
