// Package webhooks delivers the audit event log to HTTP endpoints: an admin
// registers a URL with the event types it wants; every sealed event that
// matches becomes a delivery row (an outbox, so a restart loses none), sent
// signed with the endpoint's secret, retried with exponential backoff and
// kept in a delivery log with redelivery. Replicas share the work: the fan-out
// cursor and due deliveries are claimed with row locks (SKIP LOCKED), so no
// two replicas send the same attempt.
package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/seal"
	"github.com/freeagent-build/freeagent/controller/store"
)

// validPattern is an event type ("build.completed"), a prefix ("build.*") or "*".
var validPattern = regexp.MustCompile(`^(\*|[a-z][a-z0-9_]*(\.[a-z0-9_]+)*(\.\*)?)$`)

// matches reports whether an event type is selected by an endpoint's patterns.
func matches(patterns []string, eventType string) bool {
	for _, p := range patterns {
		switch {
		case p == "*", p == eventType:
			return true
		case strings.HasSuffix(p, ".*") && strings.HasPrefix(eventType, strings.TrimSuffix(p, "*")):
			return true
		}
	}
	return false
}

// validateURL allows https anywhere and plain http only to this machine.
func validateURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("%w: field \"url\" must be an absolute URL such as https://example.com/hooks", store.ErrInvalid)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
		return fmt.Errorf("%w: field \"url\" must use https (plain http is allowed only to a loopback address)", store.ErrInvalid)
	}
	return fmt.Errorf("%w: field \"url\" must be an https URL", store.ErrInvalid)
}

func validate(req *api.WebhookRequest) error {
	req.URL = strings.TrimSpace(req.URL)
	if err := validateURL(req.URL); err != nil {
		return err
	}
	if len(req.Events) == 0 {
		return fmt.Errorf("%w: field \"events\" needs at least one event type, a prefix such as \"build.*\", or \"*\"", store.ErrInvalid)
	}
	if len(req.Events) > 100 || len(req.Description) > 1000 || len(req.URL) > 2000 {
		return fmt.Errorf("%w: at most 100 events, a 1000-character description and a 2000-character url", store.ErrInvalid)
	}
	for _, e := range req.Events {
		if !validPattern.MatchString(e) {
			return fmt.Errorf("%w: field \"events\": %q is not an event type (\"build.completed\"), a prefix (\"build.*\") or \"*\"", store.ErrInvalid, e)
		}
	}
	if len(req.Projects) > 100 {
		return fmt.Errorf("%w: field \"projects\" lists %d projects; at most 100", store.ErrInvalid, len(req.Projects))
	}
	for _, p := range req.Projects {
		if err := store.ValidateProject("projects", p); err != nil {
			return err
		}
	}
	slices.Sort(req.Projects)
	req.Projects = slices.Compact(req.Projects)
	if req.Projects == nil {
		req.Projects = []string{}
	}
	return nil
}

// secretsPurpose derives the key that seals endpoint secrets. They cannot
// be stored as hashes (each delivery is signed with them), so they are
// encrypted under a key derived from the controller's certificate key, which
// replicas already share; the endpoint id is the additional data.
const secretsPurpose = "freeagent webhook secrets v1"

func openSecret(box seal.Box, endpointID string, sealed []byte) ([]byte, error) {
	plain, err := box.Open(sealed, []byte(endpointID))
	if err != nil {
		return nil, fmt.Errorf("open the secret of webhook %s (was the certificate key changed?): %w", endpointID, err)
	}
	return plain, nil
}

// Create registers an endpoint. It receives every event the fan-out has
// not yet passed: those sealed from about now on.
func (d *Dispatcher) Create(ctx context.Context, req api.WebhookRequest) (api.Webhook, error) {
	if err := validate(&req); err != nil {
		return api.Webhook{}, err
	}
	raw := make([]byte, 32)
	rand.Read(raw) //nolint:errcheck // crypto/rand.Read never fails
	w := api.Webhook{ID: store.NewID(), URL: req.URL, Events: req.Events, Description: req.Description, Projects: req.Projects,
		Secret: "whsec_" + base64.RawURLEncoding.EncodeToString(raw)}
	// The cursor's row lock waits out a fan-out in flight, so every event
	// after the cursor is fanned out by a later pass that sees this endpoint.
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		var cursor int64
		if err := tx.QueryRow(ctx, `SELECT sequence FROM webhook_cursor WHERE id = 1 FOR UPDATE`).Scan(&cursor); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO webhook_endpoints (id, url, event_types, description, secret_sealed, after_sequence, projects)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING created_at`,
			w.ID, w.URL, w.Events, w.Description, d.box.Seal([]byte(w.Secret), []byte(w.ID)), cursor, w.Projects).Scan(&w.CreatedAt)
	})
	if err != nil {
		return api.Webhook{}, fmt.Errorf("create webhook: %w", err)
	}
	d.Kick()
	return w, nil
}

// List returns every endpoint, oldest first, without secrets.
func (d *Dispatcher) List(ctx context.Context) (api.WebhookList, error) {
	rows, err := d.pool.Query(ctx, `SELECT id, url, event_types, description, projects, created_at FROM webhook_endpoints ORDER BY created_at, id`)
	if err != nil {
		return api.WebhookList{}, fmt.Errorf("list webhooks: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.Webhook, error) {
		var w api.Webhook
		err := r.Scan(&w.ID, &w.URL, &w.Events, &w.Description, &w.Projects, &w.CreatedAt)
		return w, err
	})
	if err != nil {
		return api.WebhookList{}, fmt.Errorf("list webhooks: %w", err)
	}
	if list == nil {
		list = []api.Webhook{}
	}
	return api.WebhookList{Webhooks: list}, nil
}

// Delete removes an endpoint with its deliveries and their log.
func (d *Dispatcher) Delete(ctx context.Context, id string) error {
	tag, err := d.pool.Exec(ctx, `DELETE FROM webhook_endpoints WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete webhook: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: no webhook %q", store.ErrNotFound, id)
	}
	return nil
}

const deliveryColumns = `d.id::text, d.endpoint_id, d.event_id::text, d.event_sequence, d.event_type, d.status, d.attempts,
	CASE WHEN d.status = 'pending' THEN d.next_attempt_at END, d.last_response_code, d.last_error, d.created_at, d.delivered_at,
	COALESCE((SELECT jsonb_agg(jsonb_build_object('number', a.number, 'at', a.attempted_at, 'response_code', a.response_code,
		'error', a.error, 'duration_ms', a.duration_ms) ORDER BY a.number) FROM webhook_attempts a WHERE a.delivery_id = d.id), '[]')`

func scanDelivery(r pgx.CollectableRow) (api.WebhookDelivery, error) {
	var v api.WebhookDelivery
	err := r.Scan(&v.ID, &v.WebhookID, &v.EventID, &v.EventSequence, &v.EventType, &v.Status, &v.Attempts, &v.NextAttemptAt,
		&v.LastResponseCode, &v.LastError, &v.CreatedAt, &v.DeliveredAt, &v.Log)
	return v, err
}

// Deliveries lists an endpoint's latest deliveries (newest first) with their attempt logs.
func (d *Dispatcher) Deliveries(ctx context.Context, endpointID string, limit int) (api.WebhookDeliveryList, error) {
	var exists bool
	if err := d.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE id = $1)`, endpointID).Scan(&exists); err != nil {
		return api.WebhookDeliveryList{}, fmt.Errorf("list webhook deliveries: %w", err)
	}
	if !exists {
		return api.WebhookDeliveryList{}, fmt.Errorf("%w: no webhook %q", store.ErrNotFound, endpointID)
	}
	// Newest first by when each was queued: a ping (sequence 0) sorts with
	// the deliveries of its moment, not below every event.
	rows, err := d.pool.Query(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries d WHERE d.endpoint_id = $1
		ORDER BY d.created_at DESC, d.event_sequence DESC LIMIT $2`, endpointID, limit)
	if err != nil {
		return api.WebhookDeliveryList{}, fmt.Errorf("list webhook deliveries: %w", err)
	}
	list, err := pgx.CollectRows(rows, scanDelivery)
	if err != nil {
		return api.WebhookDeliveryList{}, fmt.Errorf("list webhook deliveries: %w", err)
	}
	if list == nil {
		list = []api.WebhookDelivery{}
	}
	return api.WebhookDeliveryList{Deliveries: list}, nil
}

// Redeliver queues a delivery again now, with a fresh round of attempts,
// whatever its status. The delivery id stays the same, so a receiver that
// deduplicates by it can tell a redelivery.
func (d *Dispatcher) Redeliver(ctx context.Context, endpointID, deliveryID string) (api.WebhookDelivery, error) {
	rows, err := d.pool.Query(ctx, `
		WITH u AS (
			UPDATE webhook_deliveries SET status = 'pending', attempts = 0, next_attempt_at = now(), delivered_at = NULL
			WHERE endpoint_id = $1 AND id::text = $2 RETURNING *
		)
		SELECT `+deliveryColumns+` FROM u d`, endpointID, deliveryID)
	if err != nil {
		return api.WebhookDelivery{}, fmt.Errorf("redeliver webhook: %w", err)
	}
	list, err := pgx.CollectRows(rows, scanDelivery)
	if err != nil {
		return api.WebhookDelivery{}, fmt.Errorf("redeliver webhook: %w", err)
	}
	if len(list) == 0 {
		return api.WebhookDelivery{}, fmt.Errorf("%w: webhook %q has no delivery %q", store.ErrNotFound, endpointID, deliveryID)
	}
	d.Kick()
	return list[0], nil
}

// PingEvent is the event type of a test delivery (Ping).
const PingEvent = "ping"

// Ping queues a test delivery to one endpoint, due now, as GitHub's ping
// does: the body is an api.Event of type "ping" (entity "webhook", the
// endpoint's id; payload its URL and event types), signed like any other,
// in the endpoint's delivery log with its attempts and redeliverable. It is
// not an audit event: its sequence is 0 and no other endpoint gets it.
func (d *Dispatcher) Ping(ctx context.Context, endpointID string) (api.WebhookDelivery, error) {
	var hook api.Webhook
	err := d.pool.QueryRow(ctx, `SELECT id, url, event_types FROM webhook_endpoints WHERE id = $1`, endpointID).Scan(&hook.ID, &hook.URL, &hook.Events)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.WebhookDelivery{}, fmt.Errorf("%w: no webhook %q", store.ErrNotFound, endpointID)
	}
	if err != nil {
		return api.WebhookDelivery{}, fmt.Errorf("ping webhook: %w", err)
	}
	payload, err := json.Marshal(map[string]any{"webhook_id": hook.ID, "url": hook.URL, "events": hook.Events,
		"zen": "Free Agent says hello: this endpoint is reachable and its secret checks out."})
	if err != nil {
		return api.WebhookDelivery{}, fmt.Errorf("ping webhook: encode the payload: %w", err)
	}
	ev := api.Event{ID: newUUID(), Timestamp: time.Now().UTC(), EventType: PingEvent, EntityType: "webhook", EntityID: hook.ID, Payload: payload}
	body, err := json.Marshal(ev)
	if err != nil {
		return api.WebhookDelivery{}, fmt.Errorf("ping webhook: encode the event: %w", err)
	}
	rows, err := d.pool.Query(ctx, `
		WITH i AS (
			INSERT INTO webhook_deliveries (endpoint_id, event_id, event_sequence, event_type, body)
			VALUES ($1, $2, 0, $3, $4) RETURNING *
		)
		SELECT `+deliveryColumns+` FROM i d`, hook.ID, ev.ID, PingEvent, body)
	if err != nil {
		return api.WebhookDelivery{}, fmt.Errorf("ping webhook: %w", err)
	}
	list, err := pgx.CollectRows(rows, scanDelivery)
	if err != nil {
		return api.WebhookDelivery{}, fmt.Errorf("ping webhook: %w", err)
	}
	if len(list) != 1 {
		return api.WebhookDelivery{}, fmt.Errorf("ping webhook: the insert returned %d rows", len(list))
	}
	d.Kick()
	return list[0], nil
}

// newUUID is a random (version 4) UUID, the id of a ping's event.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand.Read never fails
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// backoff is the wait after the n-th failed attempt: base, 2·base, 4·base…
// capped at 1024 s.
func backoff(base time.Duration, n int) time.Duration {
	return min(base<<min(n-1, 20), 1024*time.Second)
}
