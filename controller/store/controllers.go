package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
)

// RegisterController records this replica (again, if it had expired while
// alive, e.g. after a long database outage) for ttl.
func (s *Store) RegisterController(ctx context.Context, n api.Controller, ttl time.Duration) error {
	return s.withTx(ctx, func(t *txn) error {
		_, err := t.Exec(ctx, `INSERT INTO controllers (id, name, url, version, expires_at) VALUES ($1, $2, $3, $4, now() + $5::interval)
			ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, url = EXCLUDED.url, version = EXCLUDED.version,
				last_heartbeat_at = now(), expires_at = EXCLUDED.expires_at`, n.ID, n.Name, n.URL, n.Version, ttl)
		if err != nil {
			return fmt.Errorf("register controller: %w", err)
		}
		t.emit(Change{Kind: "controller", ID: n.ID, Status: "online", Event: "controller.registered",
			Detail: map[string]any{"name": n.Name, "url": n.URL, "version": n.Version}})
		return nil
	})
}

// RefreshController extends this replica's registration; false means it was
// expired meanwhile and must register again.
func (s *Store) RefreshController(ctx context.Context, id string, ttl time.Duration) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE controllers SET last_heartbeat_at = now(), expires_at = now() + $2::interval WHERE id = $1`, id, ttl)
	if err != nil {
		return false, fmt.Errorf("refresh controller registration: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// DeregisterController removes a replica that is shutting down.
func (s *Store) DeregisterController(ctx context.Context, id string) error {
	return s.withTx(ctx, func(t *txn) error {
		tag, err := t.Exec(ctx, `DELETE FROM controllers WHERE id = $1`, id)
		if err != nil {
			return fmt.Errorf("deregister controller: %w", err)
		}
		if tag.RowsAffected() == 1 {
			t.emit(Change{Kind: "controller", ID: id, Status: "stopped", Event: "controller.stopped"})
		}
		return nil
	})
}

// ExpireControllers removes replicas whose registration ran out and returns
// their ids. Any replica may run it; each expiry happens once.
func (s *Store) ExpireControllers(ctx context.Context) ([]string, error) {
	var ids []string
	err := s.withTx(ctx, func(t *txn) error {
		rows, err := t.Query(ctx, `DELETE FROM controllers WHERE expires_at < now() RETURNING id`)
		if err != nil {
			return fmt.Errorf("expire controllers: %w", err)
		}
		if ids, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return fmt.Errorf("expire controllers: %w", err)
		}
		for _, id := range ids {
			t.emit(Change{Kind: "controller", ID: id, Status: "expired", Event: "controller.expired"})
		}
		return nil
	})
	return ids, err
}

// Controllers lists the registered replicas, oldest first.
func (s *Store) Controllers(ctx context.Context) ([]api.Controller, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, name, url, version, started_at, last_heartbeat_at, expires_at
		FROM controllers ORDER BY started_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list controllers: %w", err)
	}
	nodes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[api.Controller])
	if err != nil {
		return nil, fmt.Errorf("list controllers: %w", err)
	}
	return nodes, nil
}
