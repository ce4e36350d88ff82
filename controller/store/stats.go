package store

import (
	"context"
	"fmt"
	"time"
)

// BuildStats is the queue's state at one moment, for metrics.
type BuildStats struct {
	ByStatus map[string]int // every status, zero included
	// QueueDepth counts pending builds; OldestPending is how long the
	// oldest of them has been claimable (zero when none is).
	QueueDepth    int
	OldestPending time.Duration
}

// BuildStats counts builds by status and measures the oldest claimable
// pending build, in one query (the status index makes the count an
// index-only scan).
func (s *Store) BuildStats(ctx context.Context) (BuildStats, error) {
	st := BuildStats{ByStatus: map[string]int{}}
	for _, v := range []string{"pending", "assigned", "building", "completed", "failed", "cancelled"} {
		st.ByStatus[v] = 0
	}
	rows, err := s.pool.Query(ctx, `
		SELECT status, count(*)::bigint,
			COALESCE(extract(epoch FROM now() - min(run_after) FILTER (WHERE run_after <= now())), 0)::float8
		FROM builds GROUP BY status`)
	if err != nil {
		return st, fmt.Errorf("count builds by status: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int
		var oldest float64
		if err := rows.Scan(&status, &n, &oldest); err != nil {
			return st, fmt.Errorf("count builds by status: %w", err)
		}
		st.ByStatus[status] = n
		if status == "pending" {
			st.QueueDepth, st.OldestPending = n, time.Duration(oldest*float64(time.Second))
		}
	}
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("count builds by status: %w", err)
	}
	return st, nil
}
