// Package store is the controller's Postgres state: API keys, workers, builds,
// attempts with their leases, logs and artifact records. Every state change
// runs in a transaction opened by withTx and reports what changed through
// txn.emit, the single place where change events leave the transaction.
package store

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/freeagent-build/freeagent/internal/config"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// NotifyChannel is the Postgres channel on which committed changes are
// announced to every controller replica.
const NotifyChannel = "freeagent_changes"

// Config holds the lifecycle timings and limits the store enforces.
type Config struct {
	LeaseTTL           time.Duration // a lease not renewed for this long expires
	TokenTTL           time.Duration // worker token lifetime
	TokenRotateAfter   time.Duration // a token older than this is replaced on its next use
	OTPTTL             time.Duration
	VMTokenTTL         time.Duration
	WorkerOfflineAfter time.Duration // no contact for this long → offline, builds requeued
	MaxAttempts        int
	DefaultTimeout     time.Duration // per-build timeout when the submitter sets none
	TimeoutGrace       time.Duration // the reaper's backstop fires this long after the timeout
	MaxBackoff         time.Duration
	ControllerID       string // this replica's id, recorded as each audit event's source
	// TokenDeliveryGrace is how long a new worker token may go unused
	// before the previous one, presented, replaces it (the answer carrying
	// it is then taken as lost). Longer than the longest long poll.
	TokenDeliveryGrace time.Duration
	// A worker that hands back ReleaseAttentionCount attempts that had
	// fetched their credentials within ReleaseAttentionWindow needs an
	// admin's attention.
	ReleaseAttentionCount  int
	ReleaseAttentionWindow time.Duration
	// BuildTokenTTL is how long a build token works after its submit.
	BuildTokenTTL time.Duration
	// How long after a build ends the garbage collector keeps its
	// artifacts, its source (what a retry copies) and its log; 0 keeps
	// them forever.
	RetainArtifacts, RetainSources, RetainLogs time.Duration
	// WarmPlacementWait bounds cache-aware placement: a polling worker
	// prefers a build of the queue head's priority whose dependency caches
	// it holds, unless the head has been claimable for longer than this
	// (then the claim is first come, first served), so no build waits much
	// more than this behind warm ones.
	WarmPlacementWait time.Duration
}

// DefaultConfig returns the production timings of docs/design.md.
func DefaultConfig() Config {
	return Config{
		LeaseTTL:           90 * time.Second,
		TokenTTL:           90 * time.Second,
		TokenRotateAfter:   30 * time.Second,
		OTPTTL:             5 * time.Minute,
		VMTokenTTL:         24 * time.Hour,
		WorkerOfflineAfter: 5 * time.Minute,
		MaxAttempts:        5,
		DefaultTimeout:     30 * time.Minute,
		TimeoutGrace:       2 * time.Minute,
		MaxBackoff:         1024 * time.Second,
		TokenDeliveryGrace: 45 * time.Second,

		ReleaseAttentionCount:  3,
		ReleaseAttentionWindow: time.Hour,
		BuildTokenTTL:          30 * 24 * time.Hour,

		RetainArtifacts: 30 * 24 * time.Hour,
		RetainSources:   7 * 24 * time.Hour,
		RetainLogs:      90 * 24 * time.Hour,

		WarmPlacementWait: 30 * time.Second,
	}
}

// Off, set in a Config field whose zero takes the default (MaxBackoff,
// TokenRotateAfter, TokenDeliveryGrace, WarmPlacementWait), turns that
// behaviour off: retries without backoff, a new token on every use, an
// unused new token taken as lost at once, first come first served.
const Off = -1

// WithDefaults is c with every zero field taken from DefaultConfig, so no
// caller runs with 0 s leases: the composition root applies it. The fields
// that can be off take Off (returned as the 0 the store reads as "off");
// RetainArtifacts, RetainSources and RetainLogs keep their zero, which
// keeps files forever (as on the command line), and ControllerID stays as given.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	c.LeaseTTL = config.OrDefault(c.LeaseTTL, d.LeaseTTL)
	c.TokenTTL = config.OrDefault(c.TokenTTL, d.TokenTTL)
	c.OTPTTL = config.OrDefault(c.OTPTTL, d.OTPTTL)
	c.VMTokenTTL = config.OrDefault(c.VMTokenTTL, d.VMTokenTTL)
	c.WorkerOfflineAfter = config.OrDefault(c.WorkerOfflineAfter, d.WorkerOfflineAfter)
	c.DefaultTimeout = config.OrDefault(c.DefaultTimeout, d.DefaultTimeout)
	c.TimeoutGrace = config.OrDefault(c.TimeoutGrace, d.TimeoutGrace)
	c.ReleaseAttentionWindow = config.OrDefault(c.ReleaseAttentionWindow, d.ReleaseAttentionWindow)
	c.BuildTokenTTL = config.OrDefault(c.BuildTokenTTL, d.BuildTokenTTL)
	c.MaxAttempts = config.OrDefault(c.MaxAttempts, d.MaxAttempts)
	c.ReleaseAttentionCount = config.OrDefault(c.ReleaseAttentionCount, d.ReleaseAttentionCount)
	c.MaxBackoff = config.OrOff(c.MaxBackoff, d.MaxBackoff)
	c.TokenRotateAfter = config.OrOff(c.TokenRotateAfter, d.TokenRotateAfter)
	c.TokenDeliveryGrace = config.OrOff(c.TokenDeliveryGrace, d.TokenDeliveryGrace)
	c.WarmPlacementWait = config.OrOff(c.WarmPlacementWait, d.WarmPlacementWait)
	for _, p := range []*time.Duration{&c.RetainArtifacts, &c.RetainSources, &c.RetainLogs} {
		*p = max(*p, 0)
	}
	return c
}

// Store is the controller's database.
type Store struct {
	pool *pgxpool.Pool
	cfg  Config
	// sealedThrough is the highest event ord this replica's sealer knows
	// to be sealed or rolled back, so an idle sealer costs one query a tick.
	sealedThrough atomic.Int64
}

// Open connects to the database at dsn. It does not migrate; call Migrate.
func Open(ctx context.Context, dsn string, cfg Config) (*Store, error) {
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	// Guard against a stuck client holding xmin back and bloating the queue.
	pcfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = "60000"
	pcfg.ConnConfig.RuntimeParams["statement_timeout"] = "60000"
	if pcfg.MaxConns < 16 {
		pcfg.MaxConns = 16
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	return &Store{pool: pool, cfg: cfg}, nil
}

// Close releases the connection pool.
func (s *Store) Close() { s.pool.Close() }

// Config returns the timings the store enforces.
func (s *Store) Config() Config { return s.cfg }

// Pool exposes the pool for components that need a raw connection (the
// LISTEN connection's DSN, health checks).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %q: name must start with a number and '_'", e.Name())
		}
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// LatestMigration is the schema version this binary expects.
func LatestMigration() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// Migrate applies the embedded migrations that are not applied yet. Several
// replicas may call it at once: an advisory lock serialises them.
func (s *Store) Migrate(ctx context.Context) (applied []string, err error) {
	ms, err := migrations()
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(7201001)`); err != nil {
		return nil, fmt.Errorf("migrate: take lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(7201001)`) //nolint:errcheck
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	for _, m := range ms {
		var exists bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.version).Scan(&exists); err != nil {
			return applied, fmt.Errorf("migrate: %w", err)
		}
		if exists {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("apply migration %s: %w", m.name, err)
		}
		applied = append(applied, m.name)
	}
	return applied, nil
}

// SchemaVersion returns the highest applied migration, 0 when none.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v *int
	err := s.pool.QueryRow(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if v == nil {
		return 0, nil
	}
	return *v, nil
}

// Change is what a committed transaction announces on NotifyChannel and
// appends to the audit log. The notification is deliberately small:
// listeners re-read state they care about.
type Change struct {
	Kind     string `json:"k"`           // "build", "worker", "controller", "project", "log", "events" (sealed up to sequence ID) or KindWebhook
	ID       string `json:"id"`          // entity id
	Status   string `json:"s,omitempty"` // new status
	Platform string `json:"p,omitempty"` // set for builds

	Event  string         `json:"-"` // audit event type; default Kind + "." + Status
	Detail map[string]any `json:"-"` // audit payload beside status and platform
}

// KindWebhook is the Kind of the notification that one of webhook
// endpoint ID's deliveries was attempted (controller/webhooks sends it; it
// is no audit event).
const KindWebhook = "webhook"

// ChangeClaimable reports whether a change made a build claimable now.
func (c Change) Claimable() bool { return c.Kind == "build" && c.Status == "pending" }

// maxNotifyPayload stays under Postgres's 8000-byte NOTIFY limit.
const maxNotifyPayload = 7000

// wanted reports whether anyone listens for a change: a build becoming
// claimable (long polls), ending (log follows end), a log growing (log
// follows), a worker's status, a cancel requested of a running build (the
// worker's cancel watch). Progress between those (assigned,
// building) wakes nobody, and every NOTIFY costs its transaction a turn on
// Postgres's cluster-wide notify lock through commit.
func (c Change) wanted() bool {
	switch {
	case c.Kind == "controller", c.Kind == "project", c.Kind == "key", c.Kind == "pool":
		return false
	case c.Kind != "build", c.Claimable(), c.Status == "completed", c.Status == "failed", c.Status == "cancelled":
		return true
	case c.Event == "build.cancel_requested": // the worker's cancel watch
		return true
	}
	return false
}

// queuePublish queues the transaction's events and notifications; the
// caller queues COMMIT right behind them. They run after every statement of
// the transaction, when it holds every lock it needs: that is what orders the
// audit log (see SealEvents).
func (t *txn) queuePublish(b *pgx.Batch) error {
	var types, kinds, ids, payloads []string
	for _, c := range t.changes {
		if typ, p, ok := c.auditEvent(); ok {
			types, kinds, ids, payloads = append(types, typ), append(kinds, c.Kind), append(ids, c.ID), append(payloads, string(p))
		}
	}
	notes, err := notifyPayloads(slices.DeleteFunc(t.changes, func(c Change) bool { return !c.wanted() }))
	if err != nil {
		return fmt.Errorf("publish changes: %w", err)
	}
	t.changes = nil
	if auditLog && len(types) > 0 {
		b.Queue(`INSERT INTO events (event_type, entity_type, entity_id, payload, source_controller_id)
			SELECT u.t, u.k, u.id, u.p::json, $5 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
				WITH ORDINALITY AS u(t, k, id, p, n) ORDER BY u.n`, types, kinds, ids, payloads, t.cfg.ControllerID)
	}
	for _, n := range notes {
		b.Queue(`SELECT pg_notify($1, $2)`, NotifyChannel, n)
	}
	return nil
}

// notifyPayloads splits changes into JSON arrays under the NOTIFY limit.
func notifyPayloads(changes []Change) ([]string, error) {
	var out []string
	for len(changes) > 0 {
		n := len(changes)
		var payload []byte
		for {
			var err error
			if payload, err = json.Marshal(changes[:n]); err != nil {
				return nil, err
			}
			if len(payload) <= maxNotifyPayload || n == 1 {
				break
			}
			n /= 2
		}
		out = append(out, string(payload))
		changes = changes[n:]
	}
	return out, nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }
