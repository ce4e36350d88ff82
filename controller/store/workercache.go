package store

import (
	"context"
	"fmt"

	"github.com/freeagent-build/freeagent/api"
)

// SetWorkerCache records what the worker reports of its dependency caches
// (PUT /api/workers/cache): its keys replace the ones it reported before,
// in one transaction, so a claim sees either the old set or the new one.
// The figures are the worker's own, since its agent started.
func (s *Store) SetWorkerCache(ctx context.Context, w WorkerAuth, c api.WorkerCache) error {
	if len(c.Keys) > api.MaxWorkerCacheKeys {
		return fmt.Errorf("%w: %d cache keys; report at most the newest %d", ErrInvalid, len(c.Keys), api.MaxWorkerCacheKeys)
	}
	for _, k := range c.Keys {
		if !sha256Hex.MatchString(k) {
			return fmt.Errorf("%w: cache key %q is not 64 lowercase hex digits", ErrInvalid, k)
		}
	}
	if c.Bytes < 0 || c.Hits < 0 || c.Misses < 0 {
		return fmt.Errorf("%w: bytes, hits and misses must not be negative", ErrInvalid)
	}
	keys := c.Keys
	if keys == nil {
		keys = []string{}
	}
	return s.withTx(ctx, func(t *txn) error {
		if _, err := t.Exec(ctx, `DELETE FROM worker_cache_keys WHERE worker_id = $1`, w.WorkerID); err != nil {
			return fmt.Errorf("replace the worker's cache keys: %w", err)
		}
		if _, err := t.Exec(ctx, `INSERT INTO worker_cache_keys (worker_id, cache_key)
			SELECT $1, k FROM unnest($2::text[]) AS k ON CONFLICT DO NOTHING`, w.WorkerID, keys); err != nil {
			return fmt.Errorf("replace the worker's cache keys: %w", err)
		}
		if _, err := t.Exec(ctx, `UPDATE workers SET cache_bytes = $2, cache_hits = $3, cache_misses = $4 WHERE id = $1`,
			w.WorkerID, c.Bytes, c.Hits, c.Misses); err != nil {
			return fmt.Errorf("record the worker's cache figures: %w", err)
		}
		return nil
	})
}
