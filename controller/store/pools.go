package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
)

// SetPool records an admin's word on a pool: trusted with credentialed
// builds, and whether those may run on its local-driver workers.
func (s *Store) SetPool(ctx context.Context, p api.Pool) error {
	if err := ValidatePool("pool", p.Name); err != nil {
		return err
	}
	return s.withTx(ctx, func(t *txn) error {
		_, err := t.Exec(ctx, `INSERT INTO pools (name, trusted, allow_local) VALUES ($1, $2, $3)
			ON CONFLICT (name) DO UPDATE SET trusted = EXCLUDED.trusted, allow_local = EXCLUDED.allow_local, updated_at = now()`,
			p.Name, p.Trusted, p.AllowLocal)
		if err != nil {
			return fmt.Errorf("set pool: %w", err)
		}
		t.emit(Change{Kind: "pool", ID: p.Name, Event: "pool.set", Detail: map[string]any{"trusted": p.Trusted, "allow_local": p.AllowLocal}})
		return nil
	})
}

// DeletePool forgets what an admin said about a pool: its workers become
// untrusted. Its workers and the projects that list it are left alone.
func (s *Store) DeletePool(ctx context.Context, name string) error {
	return s.withTx(ctx, func(t *txn) error {
		tag, err := t.Exec(ctx, `DELETE FROM pools WHERE name = $1`, name)
		if err != nil {
			return fmt.Errorf("delete pool: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: no pool %q is configured (see `pools list`)", ErrNotFound, name)
		}
		t.emit(Change{Kind: "pool", ID: name, Event: "pool.deleted"})
		return nil
	})
}

// ListPools lists the configured pools and the pools online workers are in,
// by name.
func (s *Store) ListPools(ctx context.Context) ([]api.Pool, error) {
	rows, err := s.pool.Query(ctx, `
		WITH w AS (SELECT pool, count(*) AS n FROM workers WHERE status = 'online' AND last_seen_at > now() - $1::interval GROUP BY pool)
		SELECT COALESCE(p.name, w.pool), COALESCE(p.trusted, false), COALESCE(p.allow_local, false), COALESCE(w.n, 0)
		FROM pools p FULL JOIN w ON w.pool = p.name ORDER BY 1`, s.cfg.WorkerOfflineAfter)
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.Pool, error) {
		var p api.Pool
		err := r.Scan(&p.Name, &p.Trusted, &p.AllowLocal, &p.OnlineWorkers)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	if out == nil {
		out = []api.Pool{}
	}
	return out, nil
}

// PoolWorkers lists the workers registered in pool, by name, each saying
// whether the pool's trust reaches it (api.Worker.PoolAdmitted).
func (s *Store) PoolWorkers(ctx context.Context, pool string) ([]api.Worker, error) {
	all, err := s.ListWorkers(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(w api.Worker) bool { return cmp.Or(w.Capabilities.Pool, api.DefaultPool) != pool }), nil
}

// SetProjectPools replaces the pools a project's builds may use; none
// lets them use any pool.
func (s *Store) SetProjectPools(ctx context.Context, project string, pools []string) error {
	if err := ValidateProject("project", project); err != nil {
		return err
	}
	for _, p := range pools {
		if err := ValidatePool("pools", p); err != nil {
			return err
		}
	}
	if pools == nil {
		pools = []string{}
	}
	return s.withTx(ctx, func(t *txn) error {
		if _, err := t.Exec(ctx, `DELETE FROM project_pools WHERE project = $1`, project); err != nil {
			return fmt.Errorf("set the project's pools: %w", err)
		}
		if _, err := t.Exec(ctx, `INSERT INTO project_pools (project, pool) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING`, project, pools); err != nil {
			return fmt.Errorf("set the project's pools: %w", err)
		}
		t.emit(Change{Kind: "project", ID: project, Event: "project.pools_set", Detail: map[string]any{"pools": pools}})
		return nil
	})
}

// ProjectPools lists the pools a project's builds may use; empty: any.
func (s *Store) ProjectPools(ctx context.Context, project string) ([]string, error) {
	var out []string
	err := s.pool.QueryRow(ctx, `SELECT ARRAY(SELECT pool FROM project_pools WHERE project = $1 ORDER BY pool)`, project).Scan(&out)
	if err != nil {
		return nil, fmt.Errorf("read the project's pools: %w", err)
	}
	return out, nil
}

// AllProjectPools maps every project that lists pools to its pools.
func (s *Store) AllProjectPools(ctx context.Context) (map[string][]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT project, array_agg(pool ORDER BY pool) FROM project_pools GROUP BY project`)
	if err != nil {
		return nil, fmt.Errorf("list projects' pools: %w", err)
	}
	out := map[string][]string{}
	var project string
	var pools []string
	_, err = pgx.ForEachRow(rows, []any{&project, &pools}, func() error {
		out[project] = pools
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list projects' pools: %w", err)
	}
	return out, nil
}

// SetProjectOneCacheDomain says whether all of project's builds are one
// cache domain (see cacheDomain): with one, a build with secrets restores
// what one without them saved; without (the default), never.
func (s *Store) SetProjectOneCacheDomain(ctx context.Context, project string, one bool) error {
	if err := ValidateProject("project", project); err != nil {
		return err
	}
	return s.withTx(ctx, func(t *txn) error {
		if _, err := t.Exec(ctx, `INSERT INTO project_settings (project, one_cache_domain) VALUES ($1, $2)
			ON CONFLICT (project) DO UPDATE SET one_cache_domain = EXCLUDED.one_cache_domain, updated_at = now()`, project, one); err != nil {
			return fmt.Errorf("set the project's cache domain: %w", err)
		}
		t.emit(Change{Kind: "project", ID: project, Event: "project.cache_domain_set", Detail: map[string]any{"one_cache_domain": one}})
		return nil
	})
}

// ProjectOneCacheDomain reports whether all of project's builds are one
// cache domain.
func (s *Store) ProjectOneCacheDomain(ctx context.Context, project string) (bool, error) {
	var one bool
	err := s.pool.QueryRow(ctx, `SELECT COALESCE((SELECT one_cache_domain FROM project_settings WHERE project = $1), false)`, project).Scan(&one)
	if err != nil {
		return false, fmt.Errorf("read the project's cache domain: %w", err)
	}
	return one, nil
}
