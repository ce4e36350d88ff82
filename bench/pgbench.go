package bench

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/pgcluster"
)

// lifecycleScript is one build lifecycle in the controller's own SQL.
//
//go:embed lifecycle.pgbench
var lifecycleScript []byte

// pgbenchDatabase is where pgbench runs: its own database in the same
// cluster, migrated like the controller's, so the two never share rows.
const pgbenchDatabase = "bench_pgbench"

// PgbenchResult is the Postgres ceiling: the lifecycle's SQL with nothing
// else in the way.
type PgbenchResult struct {
	Mode          string       `json:"mode"` // pgbench -M
	Seconds       float64      `json:"seconds"`
	Runs          []PgbenchRun `json:"runs"`
	BestClients   int          `json:"best_clients"`
	BestPerSecond float64      `json:"best_per_second"` // lifecycles/s (one script run = one lifecycle)
	// Ratio is HTTP lifecycles/s ÷ BestPerSecond (0 when the lifecycle
	// phase did not run).
	Ratio   float64 `json:"ratio"`
	Command string  `json:"command"` // the best run's command line
	Skipped string  `json:"skipped,omitempty"`
}

// best is the run that set the ceiling.
func (r *PgbenchResult) best() *PgbenchRun {
	for i := range r.Runs {
		if r.Runs[i].Clients == r.BestClients && r.Runs[i].PerSecond == r.BestPerSecond {
			return &r.Runs[i]
		}
	}
	return nil
}

// PgbenchRun is one pgbench invocation.
type PgbenchRun struct {
	Clients   int     `json:"clients"`
	PerSecond float64 `json:"per_second"`
	LatencyMS float64 `json:"latency_avg_ms"` // one whole lifecycle
	// CommitsPerLifecycle, from pg_stat_database, to compare with the
	// HTTP run's.
	CommitsPerLifecycle float64 `json:"commits_per_lifecycle"`
	// CPU milliseconds per lifecycle (Bench is pgbench), and the average
	// cores each party kept busy.
	CPUPerLifecycle CPUSplit `json:"cpu_ms_per_lifecycle"`
	Cores           CPUSplit `json:"cpu_cores"`
}

var (
	tpsRE     = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
	latencyRE = regexp.MustCompile(`(?m)^latency average = ([0-9.]+) ms`)
	failedRE  = regexp.MustCompile(`(?m)^number of failed transactions: ([0-9]+)`)
)

// pgbenchPath finds pgbench: the configured path, else next to the real
// server binaries (following a symlinked postgres, as /usr/local/bin may
// hold), else in PATH. "" when there is none.
func pgbenchPath(cfg Config) string {
	if cfg.PgbenchPath != "" {
		return cfg.PgbenchPath
	}
	var candidates []string
	if dir, err := pgcluster.FindBinDir(); err == nil {
		for _, server := range []string{"postgres", "initdb"} {
			if real, err := filepath.EvalSymlinks(filepath.Join(dir, server)); err == nil {
				candidates = append(candidates, filepath.Join(filepath.Dir(real), "pgbench"))
			}
		}
		candidates = append(candidates, filepath.Join(dir, "pgbench"))
	}
	if p, err := exec.LookPath("pgbench"); err == nil {
		candidates = append(candidates, p)
	}
	for _, c := range candidates {
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() {
			return c
		}
	}
	return ""
}

func runPgbench(ctx context.Context, e *env) (*PgbenchResult, error) {
	cfg := e.cfg
	r := &PgbenchResult{Mode: cfg.PgbenchMode, Seconds: float64(int(cfg.PgbenchDuration.Seconds()))}
	bin := pgbenchPath(cfg)
	if bin == "" {
		r.Skipped = "pgbench not found next to the PostgreSQL server binaries or in PATH (pass its path with --pgbench)"
		e.logf("   skipped: %s", r.Skipped)
		return r, nil
	}
	script := filepath.Join(e.dir, "lifecycle.pgbench")
	if err := os.WriteFile(script, lifecycleScript, 0o644); err != nil {
		return nil, err
	}
	if _, err := e.db.Exec(ctx, `DROP DATABASE IF EXISTS `+pgbenchDatabase); err != nil {
		return nil, err
	}
	if _, err := e.db.Exec(ctx, `CREATE DATABASE `+pgbenchDatabase); err != nil {
		return nil, err
	}
	dsn := e.cluster.DSN(pgbenchDatabase)
	migrate := exec.CommandContext(ctx, e.bin, "migrate", "--database-url", dsn)
	migrate.Env = childEnv()
	if out, err := migrate.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("migrate %s: %v\n%s", pgbenchDatabase, err, out)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))

	for _, clients := range cfg.PgbenchClients {
		if err := seedPgbench(ctx, conn, clients); err != nil {
			return nil, fmt.Errorf("seed: %w", err)
		}
		if err := e.checkpoint(ctx); err != nil {
			return nil, err
		}
		args := []string{"-n", "-f", script, "-c", strconv.Itoa(clients), "-j", strconv.Itoa(min(2, clients)),
			"-T", strconv.Itoa(int(r.Seconds)), "-M", cfg.PgbenchMode,
			"-h", "127.0.0.1", "-p", strconv.Itoa(e.port), "-U", "postgres", pgbenchDatabase}
		c0, err := e.commits(ctx, pgbenchDatabase)
		if err != nil {
			return nil, err
		}
		cpu0, err := e.cpu()
		if err != nil {
			return nil, err
		}
		start := time.Now()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = childEnv()
		cmd.Dir = e.dir
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("pgbench %s: %v\n%s%s", strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
		}
		// Let the backends' statistics reach pg_stat_database, and the
		// exited backends' CPU time their parent's account.
		if err := api.Sleep(ctx, 1100*time.Millisecond); err != nil {
			return nil, err
		}
		cpu1, err := e.cpu()
		if err != nil {
			return nil, err
		}
		elapsed := time.Since(start).Seconds()
		used := cpu1.sub(cpu0)
		used.bench += (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds() // pgbench
		c1, err := e.commits(ctx, pgbenchDatabase)
		if err != nil {
			return nil, err
		}
		run, processed, err := parsePgbench(stdout.String())
		if err != nil {
			return nil, fmt.Errorf("pgbench %s: %w\n%s", strings.Join(args, " "), err, stdout.Bytes())
		}
		run.Clients = clients
		if processed > 0 {
			run.CommitsPerLifecycle = float64(c1-c0) / float64(processed)
			run.CPUPerLifecycle = used.per(float64(processed) / 1000)
		}
		run.Cores = used.per(elapsed)
		r.Runs = append(r.Runs, run)
		e.logf("   pgbench -c %d: %.0f lifecycles/s (%.1f ms each)", clients, run.PerSecond, run.LatencyMS)
		if run.PerSecond > r.BestPerSecond {
			r.BestPerSecond, r.BestClients = run.PerSecond, clients
			r.Command = filepath.Base(bin) + " " + strings.Join(args, " ")
		}
	}
	return r, nil
}

var processedRE = regexp.MustCompile(`(?m)^number of transactions actually processed: ([0-9]+)`)

// parsePgbench reads a run's rate and latency and fails on failed
// transactions. It also returns the number of script runs.
func parsePgbench(out string) (PgbenchRun, int64, error) {
	var run PgbenchRun
	m := tpsRE.FindStringSubmatch(out)
	if m == nil {
		return run, 0, errors.New("no tps line in pgbench's output")
	}
	run.PerSecond, _ = strconv.ParseFloat(m[1], 64)
	if m := latencyRE.FindStringSubmatch(out); m != nil {
		run.LatencyMS, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := failedRE.FindStringSubmatch(out); m != nil && m[1] != "0" {
		return run, 0, fmt.Errorf("%s lifecycles failed", m[1])
	}
	var processed int64
	if m := processedRE.FindStringSubmatch(out); m != nil {
		processed, _ = strconv.ParseInt(m[1], 10, 64)
	}
	return run, processed, nil
}

// seedPgbench resets the pgbench database for clients clients: the API key,
// one worker per client whose token check always takes the read-only fast
// path (issued and last seen "in the future"), and a backlog of
// pending builds (like the HTTP run's bounded queue) so that every claim
// finds one.
func seedPgbench(ctx context.Context, conn *pgx.Conn, clients int) error {
	backlog := max(64, 4*clients)
	_, err := conn.Exec(ctx, `
		TRUNCATE builds, build_attempts, artifacts, build_logs, workers, api_keys, api_key_projects, api_key_pools, dashboard_sessions CASCADE;
		INSERT INTO api_keys (id, name, role, key_hash) VALUES ('benchkey', 'bench', 'admin', sha256('fak_bench'::bytea));
		INSERT INTO workers (id, name, capabilities, instance_id, status, token_hash, token_issued_at, token_expires_at, last_seen_at)
			SELECT 'w' || n, 'bench ' || n, '{"platforms":["ios","android"],"max_concurrent_builds":64}', 'i' || n, 'online',
				sha256(('fwt_bench_' || n)::bytea), now() + interval '1 day', now() + interval '1 day', now() + interval '1 day'
			FROM generate_series(0, `+strconv.Itoa(clients-1)+`) n;
		INSERT INTO builds (id, status, platform, token_hash, submitted_by, source_size, source_sha256, source_format, timeout_seconds, submitted_at)
			SELECT lpad(to_hex(n), 26, '0'), 'pending', 'android', sha256(('fbt_seed_' || n)::bytea), 'benchkey',
				1024, repeat('0', 64), 'tar.gz', 1800, now() - interval '1 hour' + n * interval '1 millisecond'
			FROM generate_series(1, `+strconv.Itoa(backlog)+`) n;`)
	// No ANALYZE: statistics describing 64 rows would make the planner
	// choose sequential scans that get slower with every completed build
	// of the run (prepared plans keep them until autovacuum's next
	// ANALYZE). Freshly truncated tables have none, as at the start of
	// every HTTP run (resetQueue).
	return err
}
