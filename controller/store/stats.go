package store

import (
	"context"
	"fmt"
	"time"
)

// LiveStats is the queue's state at one moment, for metrics. Its query
// costs in proportion to the builds not yet ended (partial indexes), never
// to the whole history.
type LiveStats struct {
	Pending, Assigned, Building int
	// OldestPending is how long the longest-waiting pending build has
	// waited since it was submitted; zero when none waits.
	OldestPending time.Duration
	// OnlineWorkers counts the workers not yet offline; WorkerSlots sums the
	// builds they announce they can run at once (max_concurrent_builds).
	OnlineWorkers, WorkerSlots int
}

// LiveStats counts the live builds and the online workers' slots, and finds
// the oldest pending one.
func (s *Store) LiveStats(ctx context.Context) (LiveStats, error) {
	var st LiveStats
	var oldest float64
	err := s.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM builds WHERE status = 'pending'),
		(SELECT count(*) FROM builds WHERE status = 'assigned'),
		(SELECT count(*) FROM builds WHERE status = 'building'),
		COALESCE(extract(epoch FROM now() - (SELECT min(m) FROM (
			SELECT (SELECT min(submitted_at) FROM builds WHERE status = 'pending' AND priority = p) AS m
			FROM generate_series(0, 3) p) q)), 0)::float8,
		(SELECT count(*) FROM workers WHERE status = 'online'),
		(SELECT COALESCE(sum(COALESCE((capabilities->>'max_concurrent_builds')::int, 1)), 0) FROM workers WHERE status = 'online')`).
		Scan(&st.Pending, &st.Assigned, &st.Building, &oldest, &st.OnlineWorkers, &st.WorkerSlots)
	if err != nil {
		return st, fmt.Errorf("count live builds: %w", err)
	}
	st.OldestPending = time.Duration(max(0, oldest) * float64(time.Second))
	return st, nil
}

// FinishedCounts counts ended builds by status (completed, failed,
// cancelled). It reads the whole history (about 0.2 s at a million builds),
// so callers refresh it sparingly.
func (s *Store) FinishedCounts(ctx context.Context) (map[string]int, error) {
	out := map[string]int{"completed": 0, "failed": 0, "cancelled": 0}
	rows, err := s.pool.Query(ctx, `SELECT status, count(*) FROM builds
		WHERE status IN ('completed', 'failed', 'cancelled') GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count finished builds: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			return nil, fmt.Errorf("count finished builds: %w", err)
		}
		out[status] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count finished builds: %w", err)
	}
	return out, nil
}
