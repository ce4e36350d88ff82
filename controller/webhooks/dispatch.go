package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/metrics"
	"github.com/freeagent-build/freeagent/controller/seal"
	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/internal/config"
)

// Config tunes delivery. Zero fields take the defaults of DefaultConfig.
type Config struct {
	Interval    time.Duration // how often the event log and due deliveries are checked
	Timeout     time.Duration // one attempt, connection to last body byte
	MaxAttempts int           // attempts before a delivery is dead
	BackoffBase time.Duration // wait after the first failure; doubles after each
	Concurrency int           // attempts in flight per replica
	// Lease is how long a claimed delivery is hidden from other replicas; a
	// replica that dies mid-attempt leaves it to be retried after this.
	Lease time.Duration
	// Retention is how long delivered and dead deliveries stay in the log.
	Retention time.Duration
	// Allow lists the non-public addresses (loopback, private, link-local…)
	// deliveries may reach; every other such address is refused when dialled.
	Allow []netip.Prefix
}

// DefaultConfig: 30 s timeout, 5 attempts with 2, 4, 8, 16 s between them (seed 004).
func DefaultConfig() Config {
	return Config{Interval: time.Second, Timeout: 30 * time.Second, MaxAttempts: 5, BackoffBase: 2 * time.Second,
		Concurrency: 8, Lease: 2 * time.Minute, Retention: 30 * 24 * time.Hour}
}

// Dispatcher fans events out to endpoints and sends the deliveries.
type Dispatcher struct {
	st      *store.Store
	pool    *pgxpool.Pool
	box     seal.Box
	cfg     Config
	client  *http.Client
	metrics *metrics.Metrics
	log     logrus.FieldLogger
	kick    chan struct{}
	slots   chan struct{} // one token per attempt in flight
}

// New returns a dispatcher over the store's database. masterKey is the
// controller's certificate key (endpoint secrets are sealed under a key
// derived from it). m may be nil.
func New(st *store.Store, masterKey []byte, cfg Config, m *metrics.Metrics, log logrus.FieldLogger) (*Dispatcher, error) {
	def := DefaultConfig()
	cfg.Interval = config.OrDefault(cfg.Interval, def.Interval)
	cfg.Timeout = config.OrDefault(cfg.Timeout, def.Timeout)
	cfg.MaxAttempts = config.OrDefault(cfg.MaxAttempts, def.MaxAttempts)
	cfg.BackoffBase = config.OrDefault(cfg.BackoffBase, def.BackoffBase)
	cfg.Concurrency = config.OrDefault(cfg.Concurrency, def.Concurrency)
	cfg.Retention = config.OrDefault(cfg.Retention, def.Retention)
	cfg.Lease = config.OrDefault(cfg.Lease, def.Lease)
	// A lease no longer than an attempt would hand a delivery still in
	// flight to another replica.
	if cfg.Lease <= cfg.Timeout {
		cfg.Lease = cfg.Timeout + time.Minute
	}
	master, err := seal.New(masterKey)
	if err != nil {
		return nil, fmt.Errorf("webhook secret key: %w", err)
	}
	box, err := master.Derive(secretsPurpose)
	if err != nil {
		return nil, fmt.Errorf("webhook secret key: %w", err)
	}
	return &Dispatcher{st: st, pool: st.Pool(), box: box, cfg: cfg, metrics: m, log: log,
		kick: make(chan struct{}, 1), slots: make(chan struct{}, cfg.Concurrency),
		client: &http.Client{
			Timeout: cfg.Timeout,
			Transport: &http.Transport{
				Proxy:               nil, // a proxy would dial for us, past the address check
				DialContext:         dialer(cfg.Allow, cfg.Timeout).DialContext,
				TLSHandshakeTimeout: cfg.Timeout,
				ForceAttemptHTTP2:   true,
				IdleConnTimeout:     90 * time.Second,
			},
			// A redirect is an answer, not a new destination: following it
			// would send a signed event to a URL nobody registered.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}}, nil
}

// Kick makes the dispatcher look for work now. It never blocks.
func (d *Dispatcher) Kick() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Run fans out and delivers until ctx ends, then waits for the attempts in
// flight (which ctx cancels) to be put back.
func (d *Dispatcher) Run(ctx context.Context) {
	var inflight sync.WaitGroup
	defer inflight.Wait()
	t := time.NewTicker(d.cfg.Interval)
	defer t.Stop()
	var pruned time.Time
	for {
		if time.Since(pruned) > time.Hour {
			if _, err := d.Prune(ctx); err != nil && ctx.Err() == nil {
				d.log.WithError(err).Warn("webhooks: prune old deliveries; will retry")
			}
			pruned = time.Now()
		}
		if err := d.fanOut(ctx); err != nil && ctx.Err() == nil {
			d.log.WithError(err).Warn("webhooks: read the event log; will retry")
		}
		if err := d.deliverDue(ctx, &inflight); err != nil && ctx.Err() == nil {
			d.log.WithError(err).Warn("webhooks: claim due deliveries; will retry")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.kick:
		}
	}
}

// Prune deletes delivered and dead deliveries (with their attempt logs)
// older than the retention period and returns how many.
func (d *Dispatcher) Prune(ctx context.Context) (int, error) {
	tag, err := d.pool.Exec(ctx, `DELETE FROM webhook_deliveries WHERE status IN ('delivered', 'dead') AND created_at < now() - $1::interval`,
		d.cfg.Retention)
	if err != nil {
		return 0, fmt.Errorf("prune webhook deliveries: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// fanOut turns sealed events after the cursor into deliveries for the
// endpoints that want them, and moves the cursor, in one transaction. The
// cursor row's lock makes one replica at a time do it; the others skip.
func (d *Dispatcher) fanOut(ctx context.Context) error {
	for {
		more, err := d.fanOutBatch(ctx, 500)
		if err != nil || !more {
			return err
		}
	}
}

type endpointFilter struct {
	id       string
	patterns []string
	projects []string // empty: every event
	after    int64
}

// wants reports whether the endpoint delivers ev, whose project (for a build
// or project event) is project. An endpoint bound to projects gets only
// their builds' and their own events: farm-wide events (workers,
// controllers) and other projects' stay with the unbound endpoints.
func (e endpointFilter) wants(ev api.Event, project string, projectKnown bool) bool {
	if ev.Sequence <= e.after || !matches(e.patterns, ev.EventType) {
		return false
	}
	return len(e.projects) == 0 || (projectKnown && slices.Contains(e.projects, project))
}

func (d *Dispatcher) fanOutBatch(ctx context.Context, batch int) (more bool, err error) {
	err = pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		var cursor int64
		err := tx.QueryRow(ctx, `SELECT sequence FROM webhook_cursor WHERE id = 1 FOR UPDATE SKIP LOCKED`).Scan(&cursor)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // another replica is fanning out
		}
		if err != nil {
			return fmt.Errorf("lock the webhook cursor: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT id, event_types, projects, after_sequence FROM webhook_endpoints`)
		if err != nil {
			return fmt.Errorf("read webhook endpoints: %w", err)
		}
		endpoints, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (endpointFilter, error) {
			var e endpointFilter
			err := r.Scan(&e.id, &e.patterns, &e.projects, &e.after)
			return e, err
		})
		if err != nil {
			return fmt.Errorf("read webhook endpoints: %w", err)
		}
		if len(endpoints) == 0 {
			// Nobody to deliver to: skip reading the events, but keep the
			// cursor at the head, where a new endpoint starts.
			head, err := d.st.LastSequence(ctx)
			if err != nil || head <= cursor {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE webhook_cursor SET sequence = $1 WHERE id = 1`, head); err != nil {
				return fmt.Errorf("move the webhook cursor: %w", err)
			}
			return nil
		}
		events, err := d.st.Events(ctx, cursor, batch)
		if err != nil || len(events) == 0 {
			return err
		}
		projects, err := buildProjects(ctx, tx, endpoints, events)
		if err != nil {
			return err
		}
		var epIDs, eventIDs, types []string
		var seqs []int64
		var bodies [][]byte
		for _, ev := range events {
			var body []byte
			project, known := eventProject(ev, projects)
			for _, ep := range endpoints {
				if !ep.wants(ev, project, known) {
					continue
				}
				if body == nil {
					if body, err = json.Marshal(ev); err != nil {
						return fmt.Errorf("encode event %d: %w", ev.Sequence, err)
					}
				}
				epIDs, eventIDs, seqs, types, bodies = append(epIDs, ep.id), append(eventIDs, ev.ID), append(seqs, ev.Sequence),
					append(types, ev.EventType), append(bodies, body)
			}
		}
		if len(epIDs) > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO webhook_deliveries (endpoint_id, event_id, event_sequence, event_type, body)
				SELECT * FROM unnest($1::text[], $2::uuid[], $3::bigint[], $4::text[], $5::bytea[])
				ON CONFLICT (endpoint_id, event_id) DO NOTHING`, epIDs, eventIDs, seqs, types, bodies); err != nil {
				return fmt.Errorf("queue webhook deliveries: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE webhook_cursor SET sequence = $1 WHERE id = 1`, events[len(events)-1].Sequence); err != nil {
			return fmt.Errorf("move the webhook cursor: %w", err)
		}
		more = len(events) == batch
		return nil
	})
	return more, err
}

// buildProjects returns the project of each build the events name, read
// only when some endpoint is bound to projects.
func buildProjects(ctx context.Context, tx pgx.Tx, endpoints []endpointFilter, events []api.Event) (map[string]string, error) {
	if !slices.ContainsFunc(endpoints, func(e endpointFilter) bool { return len(e.projects) > 0 }) {
		return nil, nil
	}
	var ids []string
	for _, ev := range events {
		if ev.EntityType == "build" {
			ids = append(ids, ev.EntityID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, `SELECT id, project FROM builds WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("read the projects of the events' builds: %w", err)
	}
	out := map[string]string{}
	var id, project string
	_, err = pgx.ForEachRow(rows, []any{&id, &project}, func() error {
		out[id] = project
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the projects of the events' builds: %w", err)
	}
	return out, nil
}

// eventProject is the project an event belongs to: its build's, or the
// project itself for a project event; none for farm-wide events.
func eventProject(ev api.Event, buildProjects map[string]string) (string, bool) {
	switch ev.EntityType {
	case "build":
		p, ok := buildProjects[ev.EntityID]
		return p, ok && p != ""
	case "project":
		return ev.EntityID, true
	}
	return "", false
}

type claimed struct {
	id, endpointID, eventType, url string
	body, sealedSecret             []byte
	attempts                       int
}

// deliverDue claims as many due deliveries as there are free slots and
// starts an attempt for each. A claim pushes next_attempt_at a lease ahead,
// so other replicas skip the row until this one records the outcome.
func (d *Dispatcher) deliverDue(ctx context.Context, inflight *sync.WaitGroup) error {
	free := cap(d.slots) - len(d.slots)
	if free == 0 {
		return nil
	}
	rows, err := d.pool.Query(ctx, `
		WITH due AS (
			SELECT id FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= now()
			ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED
		)
		UPDATE webhook_deliveries w SET next_attempt_at = now() + $2::interval
		FROM due, webhook_endpoints e WHERE w.id = due.id AND e.id = w.endpoint_id
		RETURNING w.id::text, w.endpoint_id, w.event_type, e.url, w.body, e.secret_sealed, w.attempts`, free, d.cfg.Lease)
	if err != nil {
		return err
	}
	batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (claimed, error) {
		var c claimed
		err := r.Scan(&c.id, &c.endpointID, &c.eventType, &c.url, &c.body, &c.sealedSecret, &c.attempts)
		return c, err
	})
	if err != nil {
		return err
	}
	for _, c := range batch {
		d.slots <- struct{}{}
		inflight.Add(1)
		go func() {
			defer func() { <-d.slots; inflight.Done(); d.Kick() }() // a free slot takes the next due delivery now
			d.attempt(ctx, c)
		}()
	}
	return nil
}

// attempt sends one delivery once and records the outcome.
func (d *Dispatcher) attempt(ctx context.Context, c claimed) {
	start := time.Now()
	code, err := d.send(ctx, c)
	if ctx.Err() != nil {
		// Shutting down: this was not the receiver's failure. Hand the
		// delivery back at once rather than after the lease.
		bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := d.pool.Exec(bg, `UPDATE webhook_deliveries SET next_attempt_at = now() WHERE id = $1 AND status = 'pending'`, c.id); err != nil {
			d.log.WithError(err).WithField("delivery", c.id).Warn("webhooks: hand back a delivery on shutdown")
		}
		return
	}
	outcome := metrics.WebhookDelivered
	var errText *string
	if err != nil {
		msg := err.Error()
		errText, outcome = &msg, metrics.WebhookFailed
		if c.attempts+1 >= d.cfg.MaxAttempts {
			outcome = metrics.WebhookDead
		}
	}
	var codePtr *int
	if code != 0 {
		codePtr = &code
	}
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	status := map[string]string{metrics.WebhookDelivered: "delivered", metrics.WebhookFailed: "pending", metrics.WebhookDead: "dead"}[outcome]
	err = pgx.BeginFunc(bg, d.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(bg, `UPDATE webhook_deliveries SET status = $2, attempts = attempts + 1,
				next_attempt_at = now() + $3::interval, last_response_code = $4, last_error = $5,
				delivered_at = CASE WHEN $2 = 'delivered' THEN now() END
			WHERE id = $1`, c.id, status, backoff(d.cfg.BackoffBase, c.attempts+1), codePtr, errText)
		if err != nil || tag.RowsAffected() == 0 {
			return err // 0 rows: the endpoint was deleted meanwhile
		}
		_, err = tx.Exec(bg, `INSERT INTO webhook_attempts (delivery_id, number, attempted_at, response_code, error, duration_ms)
			VALUES ($1, (SELECT COALESCE(max(number), 0) + 1 FROM webhook_attempts WHERE delivery_id = $1), $2, $3, $4, $5)`,
			c.id, start, codePtr, errText, time.Since(start).Milliseconds())
		if err != nil {
			return err
		}
		// The endpoint's delivery log, open in a dashboard, refreshes: a
		// ping or a redelivery shows its outcome without a reload.
		_, err = tx.Exec(bg, `SELECT pg_notify($1, $2)`, store.NotifyChannel, deliveryNote(c.endpointID))
		return err
	})
	if err != nil {
		d.log.WithError(err).WithField("delivery", c.id).Warn("webhooks: record a delivery attempt (it will be retried after its lease)")
		return
	}
	d.metrics.Webhook(outcome)
	if outcome == metrics.WebhookDead {
		d.log.WithFields(logrus.Fields{"delivery": c.id, "webhook": c.endpointID, "error": *errText}).Warn("webhook delivery is dead after its last attempt")
	}
}

// deliveryNote is the change notification of an attempt at one of
// endpointID's deliveries.
func deliveryNote(endpointID string) string {
	note, _ := json.Marshal([]store.Change{{Kind: store.KindWebhook, ID: endpointID}}) // plain strings always encode
	return string(note)
}

// send POSTs the delivery, signed, and reports the response code and why it
// counts as a failure (nil for a 2xx).
func (d *Dispatcher) send(ctx context.Context, c claimed) (int, error) {
	secret, err := openSecret(d.box, c.endpointID, c.sealedSecret)
	if err != nil {
		return 0, err
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(c.body))
	if err != nil {
		return 0, fmt.Errorf("build the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "FreeAgent-Webhooks/1")
	req.Header.Set(api.HeaderWebhookEvent, c.eventType)
	req.Header.Set(api.HeaderWebhookDelivery, c.id)
	req.Header.Set(api.HeaderWebhookTimestamp, ts)
	req.Header.Set(api.HeaderWebhookSignature, Sign(secret, ts, c.body))
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) //nolint:errcheck // drained for connection reuse only
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("the endpoint answered %s", resp.Status)
	}
	return resp.StatusCode, nil
}

// Sign is the X-FreeAgent-Signature value of body sent at timestamp ts.
func Sign(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}
