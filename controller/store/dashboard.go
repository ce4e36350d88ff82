package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
)

const prefixSession = "fds_"

// CreateSession starts a dashboard session for API key keyID and returns
// its id, shown once (the browser keeps it in a cookie). Expired sessions
// are swept on the way.
func (s *Store) CreateSession(ctx context.Context, keyID string, ttl time.Duration) (string, error) {
	id, hash := newSecret(prefixSession)
	err := s.withTx(ctx, func(t *txn) error {
		if _, err := t.Exec(ctx, `DELETE FROM dashboard_sessions WHERE expires_at < now()`); err != nil {
			return fmt.Errorf("sweep expired sessions: %w", err)
		}
		if _, err := t.Exec(ctx, `INSERT INTO dashboard_sessions (id_hash, key_id, expires_at) VALUES ($1, $2, now() + $3::interval)`,
			hash, keyID, ttl); err != nil {
			return fmt.Errorf("create session: %w", err)
		}
		return nil
	})
	return id, err
}

// Session returns the key a live session acts as. An unknown or expired
// session, or one whose key was revoked, gives ErrUnauthorized.
func (s *Store) Session(ctx context.Context, id string) (APIKey, error) {
	var k APIKey
	if !strings.HasPrefix(id, prefixSession) {
		return k, ErrUnauthorized
	}
	err := s.pool.QueryRow(ctx, `SELECT k.id, k.name, k.role, k.created_at, `+keyBindings+`, `+bindingsInUse+` FROM dashboard_sessions d
		JOIN api_keys k ON k.id = d.key_id
		WHERE d.id_hash = $1 AND d.expires_at > now() AND k.revoked_at IS NULL`, HashSecret(id)).
		Scan(&k.ID, &k.Name, &k.Role, &k.CreatedAt, &k.Projects, &k.Pools, &k.ProjectsInUse, &k.PoolsInUse)
	if errors.Is(err, pgx.ErrNoRows) {
		return k, ErrUnauthorized
	}
	if err != nil {
		return k, fmt.Errorf("read session: %w", err)
	}
	return k, nil
}

// DeleteSession ends a session (logout). Ending an unknown one is not an error.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM dashboard_sessions WHERE id_hash = $1`, HashSecret(id)); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// SetWorkerPaused pauses or resumes a worker. A paused worker's polls get no
// new builds; the builds it runs go on (a drain).
func (s *Store) SetWorkerPaused(ctx context.Context, id string, paused bool) (api.Worker, error) {
	var w api.Worker
	err := s.withTx(ctx, func(t *txn) error {
		var status string
		err := t.QueryRow(ctx, `UPDATE workers SET paused = $2 WHERE id = $1 AND status <> 'unregistered' RETURNING status`, id, paused).Scan(&status)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: no worker %q (see the workers list)", ErrNotFound, id)
		}
		if err != nil {
			return fmt.Errorf("pause worker: %w", err)
		}
		event := "worker.resumed"
		if paused {
			event = "worker.paused"
		}
		// The status is the worker's own (online/offline), so a replay of the
		// log still rebuilds it; the event type says what happened.
		t.emit(Change{Kind: "worker", ID: id, Status: status, Event: event})
		return nil
	})
	if err != nil {
		return w, err
	}
	return s.GetWorker(ctx, id)
}

// AcknowledgeWorker clears a worker's needs-attention state: an admin has
// looked at the builds it handed back. Only releases after this count
// towards raising it again.
func (s *Store) AcknowledgeWorker(ctx context.Context, id string) (api.Worker, error) {
	err := s.withTx(ctx, func(t *txn) error {
		var was *string
		err := t.QueryRow(ctx, `UPDATE workers w SET attention_reason = NULL, attention_at = now()
			FROM workers old WHERE w.id = $1 AND old.id = w.id AND w.status <> 'unregistered'
			RETURNING old.attention_reason`, id).Scan(&was)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: no worker %q (see the workers list)", ErrNotFound, id)
		}
		if err != nil {
			return fmt.Errorf("acknowledge worker: %w", err)
		}
		if was != nil {
			t.emit(Change{Kind: "worker", ID: id, Event: "worker.acknowledged", Detail: map[string]any{"reason": *was}})
		}
		return nil
	})
	if err != nil {
		return api.Worker{}, err
	}
	return s.GetWorker(ctx, id)
}

// GetWorker returns one worker that has not unregistered.
func (s *Store) GetWorker(ctx context.Context, id string) (api.Worker, error) {
	ws, err := s.listWorkers(ctx, id)
	if err != nil {
		return api.Worker{}, err
	}
	if len(ws) == 0 {
		return api.Worker{}, fmt.Errorf("%w: no worker %q", ErrNotFound, id)
	}
	return ws[0], nil
}

// EventRow is an audit event as the dashboard's events page shows it, with
// the names the database still knows for who was involved: the API key
// that submitted its build (build.submitted) and the worker it names (its
// payload's worker_id, its attempt's worker, or the worker it is about).
// Either is "" when unknown or deleted since.
type EventRow struct {
	api.Event
	Submitter string
	Worker    string
}

// EventsBefore returns up to limit sealed audit events with a sequence
// below before (0: the newest), newest first.
func (s *Store) EventsBefore(ctx context.Context, before int64, limit int) ([]EventRow, error) {
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	if before <= 0 {
		before = math.MaxInt64
	}
	rows, err := s.pool.Query(ctx, `SELECT
			CASE WHEN e.event_type = 'build.submitted' THEN COALESCE((SELECT k.name FROM builds b JOIN api_keys k ON k.id = b.submitted_by
				WHERE b.id = e.entity_id), '') ELSE '' END,
			COALESCE((SELECT w.name FROM workers w WHERE w.id = e.payload->>'worker_id'),
				(SELECT w.name FROM build_attempts a JOIN workers w ON w.id = a.worker_id WHERE a.id = e.payload->>'attempt_id'),
				(SELECT w.name FROM workers w WHERE e.entity_type = 'worker' AND w.id = e.entity_id), ''),
			`+eventColumns+` FROM event_chain c JOIN events e ON e.ord = c.ord
		WHERE c.sequence < $1 ORDER BY c.sequence DESC LIMIT $2`, before, limit)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (EventRow, error) {
		var row EventRow
		ev, err := scanEventAfter(r, &row.Submitter, &row.Worker)
		row.Event = ev
		return row, err
	})
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	return evs, nil
}
