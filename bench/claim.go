package bench

import (
	"context"
	"fmt"
	"time"
)

// ClaimResult is the claim latency against a small and a huge queue.
type ClaimResult struct {
	Small ClaimPoint `json:"small"`
	Large ClaimPoint `json:"large"`
	// InsertSeconds is the bulk INSERT … SELECT of the rows added for the
	// large queue, with its VACUUM ANALYZE.
	InsertSeconds float64 `json:"insert_seconds"`
	Ratio         float64 `json:"ratio"` // Large p50 ÷ Small p50
}

// ClaimPoint is the latency of Poll(wait=0) calls that each claimed a build,
// with Pending builds queued when the measurement began.
type ClaimPoint struct {
	Pending int      `json:"pending"`
	Latency Dist     `json:"latency"`
	Cores   CPUSplit `json:"cpu_cores"` // average cores each party kept busy meanwhile
}

const claimWarmup = 5 // claims not timed before each measurement

func runClaim(ctx context.Context, e *env) (*ClaimResult, error) {
	cfg := e.cfg
	c := e.client()
	w, err := registerWorker(ctx, c, "claim")
	if err != nil {
		return nil, err
	}
	if err := e.holdColdCaches(ctx, w); err != nil {
		return nil, err
	}
	r := &ClaimResult{}
	next := int64(1) // generate_series position of the next inserted row
	fill := func(target int) error {
		var pending int
		if err := e.db.QueryRow(ctx, `SELECT count(*) FROM builds WHERE status = 'pending'`).Scan(&pending); err != nil {
			return err
		}
		n := int64(target - pending)
		if n <= 0 {
			return nil
		}
		// Ids have the shape store.ValidID accepts ('z' and hex digits);
		// submitted_at rises with the row number, so the claim order is
		// the insert order. Each needs a dependency cache the worker does
		// not hold, and they were submitted a moment ago (run_after), so
		// every claim looks ahead for a warm one and finds none.
		_, err := e.db.Exec(ctx, `
			INSERT INTO builds (id, status, platform, token_hash, source_size, source_sha256, source_format, timeout_seconds, submitted_at,
				cache_keys)
			SELECT 'zz' || lpad(to_hex(g), 24, '0'), 'pending', 'android', sha256(('bench-claim-' || g)::bytea),
				1024, repeat('0', 64), 'tar.gz', 1800, now() - interval '1 day' + g * interval '1 millisecond',
				ARRAY[encode(sha256(('bench-claim-cache-' || g % 10)::bytea), 'hex')]
			FROM generate_series($1::bigint, $2::bigint) g`, next, next+n-1)
		if err != nil {
			return fmt.Errorf("insert %d pending builds: %w", n, err)
		}
		next += n
		// VACUUM (ANALYZE): fresh statistics for the planner, and the
		// visibility map set now rather than by an autovacuum that would
		// land in the measurement.
		if _, err := e.db.Exec(ctx, `VACUUM (ANALYZE) builds`); err != nil {
			return err
		}
		return e.checkpoint(ctx)
	}
	measure := func(target int) (ClaimPoint, error) {
		p := ClaimPoint{Pending: target}
		var ds []time.Duration
		cpu0, err := e.cpu()
		if err != nil {
			return p, err
		}
		start := time.Now()
		for i := range cfg.ClaimSamples + claimWarmup {
			t0 := time.Now()
			job, err := w.poll(ctx, 0)
			d := time.Since(t0)
			if err != nil {
				return p, err
			}
			if job == nil {
				return p, fmt.Errorf("a poll claimed nothing with about %d builds pending", target-i)
			}
			if i >= claimWarmup {
				ds = append(ds, d)
			}
			// Complete it (untimed) so the worker never reaches its
			// concurrency limit.
			if err := w.complete(ctx, job); err != nil {
				return p, err
			}
		}
		p.Latency = distOf(ds)
		cpu1, err := e.cpu()
		p.Cores = cpu1.sub(cpu0).per(time.Since(start).Seconds())
		return p, err
	}

	if err := fill(cfg.ClaimSmall); err != nil {
		return nil, err
	}
	if r.Small, err = measure(cfg.ClaimSmall); err != nil {
		return nil, err
	}
	e.logf("   claim with %d pending: %v", cfg.ClaimSmall, r.Small.Latency)
	start := time.Now()
	e.logf("   inserting up to %d pending builds", cfg.ClaimLarge)
	if err := fill(cfg.ClaimLarge); err != nil {
		return nil, err
	}
	r.InsertSeconds = time.Since(start).Seconds()
	if r.Large, err = measure(cfg.ClaimLarge); err != nil {
		return nil, err
	}
	e.logf("   claim with %d pending: %v", cfg.ClaimLarge, r.Large.Latency)
	if r.Small.Latency.P50 > 0 {
		r.Ratio = r.Large.Latency.P50 / r.Small.Latency.P50
	}
	return r, e.alive()
}
