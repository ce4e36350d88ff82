package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
)

// BuildRow is a build as the dashboard's list shows it: the build and what
// its spec (api.BuildSpec) says about it, extracted in SQL so that a list
// page decodes no spec. The spec fields are "" for a raw API submit.
type BuildRow struct {
	api.Build
	AppName     string
	AppSlug     string
	ProfileName string
	Message     string
	GitCommit   string
	// Submitter is the name of the API key that submitted the build; ""
	// once the key is deleted.
	Submitter string
}

// specColumns are BuildRow's extra columns, read from the spec's JSON.
const specColumns = `COALESCE(b.spec->'app'->>'name', ''), COALESCE(b.spec->'app'->>'slug', ''),
	COALESCE(b.spec->>'profile_name', ''), COALESCE(b.spec->>'message', ''),
	COALESCE(b.spec->>'git_commit', ''), COALESCE((SELECT k.name FROM api_keys k WHERE k.id = b.submitted_by), '')`

// ListBuildRows is ListBuilds with what the builds list shows of each spec.
func (s *Store) ListBuildRows(ctx context.Context, f ListFilter) (rows []BuildRow, nextCursor string, err error) {
	return s.listBuilds(ctx, f)
}

// AppName is an app the farm has built: its slug (the build's project) and
// the name its latest build's spec gives it.
type AppName struct {
	Slug string
	Name string
}

// Apps lists the apps of the builds scope may see, by slug, each named as
// its latest build names it.
func (s *Store) Apps(ctx context.Context, scope Scope) ([]AppName, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT ON (b.project) b.project, COALESCE(b.spec->'app'->>'name', '')
		FROM builds b WHERE b.project <> '' AND ($1::text[] IS NULL OR b.project = ANY($1))
		ORDER BY b.project, b.submitted_at DESC`, scope.filter())
	if err != nil {
		return nil, fmt.Errorf("list apps: %w", err)
	}
	apps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AppName, error) {
		var a AppName
		return a, r.Scan(&a.Slug, &a.Name)
	})
	if err != nil {
		return nil, fmt.Errorf("list apps: %w", err)
	}
	return apps, nil
}

// ChartWindow bounds the charts: the days before today and today.
const ChartWindow = 30 * 24 * time.Hour

// ChartFilter selects the builds a chart aggregates.
type ChartFilter struct {
	// Project keeps one app's builds; "" keeps every app's.
	Project string
	Scope   Scope
	// Since is the first instant counted; zero means ChartWindow before now.
	Since time.Time
}

func (f ChartFilter) since() time.Time {
	if f.Since.IsZero() {
		return time.Now().Add(-ChartWindow)
	}
	return f.Since
}

// DayFigure is one day's figure of one series (a platform, or all builds).
type DayFigure struct {
	Day      time.Time // midnight UTC
	Platform string    // "" when the figure covers both platforms
	P50, P90 float64   // seconds (durations, waits)
	Rate     float64   // 0–1 (success rate, utilisation)
	Count    int       // the builds (or attempts) behind the figure
}

// Charts are the dashboard's aggregates over the chart window, per UTC day.
type Charts struct {
	// Duration: p50/p90 of the running time of completed builds, per platform.
	Duration []DayFigure
	// QueueWait: p50/p90 of submit → start of the builds that started, per platform.
	QueueWait []DayFigure
	// Success: completed / (completed + failed) of the builds that ended
	// (cancelled builds are the developer's choice, not a failure).
	Success []DayFigure
	// Utilisation: the workers' build time over their capacity (each
	// registered worker's max_concurrent_builds, all day long); nil when
	// the filter is one app's or the scope is not the whole farm.
	Utilisation []DayFigure
}

// Charts aggregates the figures of the dashboard's charts in SQL.
func (s *Store) Charts(ctx context.Context, f ChartFilter) (Charts, error) {
	if f.Project != "" {
		if err := ValidateProject("project", f.Project); err != nil {
			return Charts{}, err
		}
	}
	var c Charts
	since, scope := f.since(), f.Scope.filter()
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		var err error
		keep := `b.%s >= $1 AND ($2 = '' OR b.project = $2) AND ($3::text[] IS NULL OR b.project = ANY($3))`
		if c.Duration, err = dayFigures(ctx, tx, `SELECT date_trunc('day', b.completed_at AT TIME ZONE 'UTC'), b.platform,
				percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM b.completed_at - b.started_at)::float8),
				percentile_cont(0.9) WITHIN GROUP (ORDER BY extract(epoch FROM b.completed_at - b.started_at)::float8), 0::float8, count(*)
			FROM builds b WHERE b.status = 'completed' AND b.started_at IS NOT NULL AND `+fmt.Sprintf(keep, "completed_at")+`
			GROUP BY 1, 2 ORDER BY 1, 2`, since, f.Project, scope); err != nil {
			return fmt.Errorf("chart build durations: %w", err)
		}
		if c.QueueWait, err = dayFigures(ctx, tx, `SELECT date_trunc('day', b.started_at AT TIME ZONE 'UTC'), b.platform,
				percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM b.started_at - b.submitted_at)::float8),
				percentile_cont(0.9) WITHIN GROUP (ORDER BY extract(epoch FROM b.started_at - b.submitted_at)::float8), 0::float8, count(*)
			FROM builds b WHERE b.started_at IS NOT NULL AND `+fmt.Sprintf(keep, "started_at")+`
			GROUP BY 1, 2 ORDER BY 1, 2`, since, f.Project, scope); err != nil {
			return fmt.Errorf("chart queue waits: %w", err)
		}
		if c.Success, err = dayFigures(ctx, tx, `SELECT date_trunc('day', b.completed_at AT TIME ZONE 'UTC'), '',
				0::float8, 0::float8, avg((b.status = 'completed')::int)::float8, count(*)
			FROM builds b WHERE b.status IN ('completed', 'failed') AND `+fmt.Sprintf(keep, "completed_at")+`
			GROUP BY 1 ORDER BY 1`, since, f.Project, scope); err != nil {
			return fmt.Errorf("chart success rate: %w", err)
		}
		if f.Project != "" || scope != nil {
			return nil
		}
		// Each day's busy time is the overlap of every attempt with the
		// day; the capacity is the registered workers' slots over the part
		// of the day that has passed.
		if c.Utilisation, err = dayFigures(ctx, tx, `WITH days AS (
				SELECT d AS day, LEAST(d + interval '1 day', now() AT TIME ZONE 'UTC') AS day_end
				FROM generate_series(date_trunc('day', $1::timestamptz AT TIME ZONE 'UTC'), now() AT TIME ZONE 'UTC', interval '1 day') d),
			capacity AS (SELECT COALESCE(sum(GREATEST(COALESCE((w.capabilities->>'max_concurrent_builds')::int, 1), 1)), 0) AS slots
				FROM workers w WHERE w.status <> 'unregistered')
			SELECT d.day, '', 0::float8, 0::float8,
				CASE WHEN c.slots = 0 THEN 0::float8 ELSE LEAST(1, COALESCE(sum(extract(epoch FROM
					LEAST(COALESCE(a.ended_at, now()) AT TIME ZONE 'UTC', d.day_end) - GREATEST(a.started_at AT TIME ZONE 'UTC', d.day)))
					FILTER (WHERE a.id IS NOT NULL), 0)
					/ (c.slots * GREATEST(extract(epoch FROM d.day_end - d.day), 1)))::float8 END,
				count(a.id)
			FROM days d CROSS JOIN capacity c
			LEFT JOIN build_attempts a ON a.started_at AT TIME ZONE 'UTC' < d.day_end
				AND COALESCE(a.ended_at, now()) AT TIME ZONE 'UTC' > d.day
			GROUP BY d.day, d.day_end, c.slots ORDER BY d.day`, since); err != nil {
			return fmt.Errorf("chart worker utilisation: %w", err)
		}
		return nil
	})
	return c, err
}

func dayFigures(ctx context.Context, tx pgx.Tx, sql string, args ...any) ([]DayFigure, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (DayFigure, error) {
		var d DayFigure
		err := r.Scan(&d.Day, &d.Platform, &d.P50, &d.P90, &d.Rate, &d.Count)
		d.Day = d.Day.UTC()
		return d, err
	})
}
