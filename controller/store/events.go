package store

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/controller/api"
)

// auditEvent is what a Change appends to the log; log growth is not a state
// change and appends nothing.
func (c Change) auditEvent() (eventType string, payload []byte, ok bool) {
	if c.Kind != "build" && c.Kind != "worker" && c.Kind != "controller" {
		return "", nil, false
	}
	eventType = c.Event
	if eventType == "" {
		eventType = c.Kind + "." + c.Status
	}
	p := make(map[string]any, len(c.Detail)+2)
	for k, v := range c.Detail {
		p[k] = v
	}
	if c.Status != "" {
		p["status"] = c.Status
	}
	if c.Platform != "" {
		p["platform"] = c.Platform
	}
	payload, err := json.Marshal(p)
	if err != nil { // Detail holds plain values only; a failure here is a programming error
		payload = []byte(fmt.Sprintf(`{"status":%q,"detail_error":%q}`, c.Status, err.Error()))
	}
	return eventType, payload, true
}

// The sealer's advisory lock: one replica seals at a time.
const sealLockKey = 7201003

// sealBatch bounds one sealing transaction.
const sealBatch = 5000

// SealEvents gives final events their sequence and hashes, in ord order, and
// returns how many it sealed. An ord is final once every transaction that
// could have drawn it has ended: the sealer reads the ord sequence's high
// mark H first and a snapshot's xmax X after it, so any transaction that drew
// an ord ≤ H had its transaction id (< X) before; once the oldest running
// transaction is ≥ X, every ord ≤ H is either visible or was rolled back.
// Transactions never wait for one another here, so the log adds one INSERT
// to each state change and no global lock.
func (s *Store) SealEvents(ctx context.Context) (int, error) {
	var high int64
	var called bool
	if err := s.pool.QueryRow(ctx, `SELECT last_value, is_called FROM events_ord`).Scan(&high, &called); err != nil {
		return 0, fmt.Errorf("seal events: read high mark: %w", err)
	}
	if !called {
		return 0, nil
	}
	var xmax uint64
	if err := s.pool.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&xmax); err != nil {
		return 0, fmt.Errorf("seal events: read snapshot: %w", err)
	}
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		var done bool
		if err := s.pool.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint >= $1`, xmax).Scan(&done); err != nil {
			return 0, fmt.Errorf("seal events: read snapshot: %w", err)
		}
		if done {
			break
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(wait):
		}
	}
	total := 0
	for {
		n, err := s.sealUpTo(ctx, high)
		total += n
		if err != nil || n < sealBatch {
			return total, err
		}
	}
}

func (s *Store) sealUpTo(ctx context.Context, high int64) (int, error) {
	sealed := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var locked bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, sealLockKey).Scan(&locked); err != nil {
			return fmt.Errorf("seal events: take lock: %w", err)
		}
		if !locked {
			return nil // another replica is sealing
		}
		var last int64
		var prev string
		err := tx.QueryRow(ctx, `SELECT sequence, event_hash FROM events WHERE sequence IS NOT NULL ORDER BY sequence DESC LIMIT 1`).Scan(&last, &prev)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("seal events: read chain head: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT `+eventColumns+` FROM events WHERE sequence IS NULL AND ord <= $1 ORDER BY ord LIMIT $2`, high, sealBatch)
		if err != nil {
			return fmt.Errorf("seal events: %w", err)
		}
		evs, err := pgx.CollectRows(rows, scanEvent)
		if err != nil {
			return fmt.Errorf("seal events: %w", err)
		}
		if len(evs) == 0 {
			return nil
		}
		ids, seqs, prevs, hashes := make([]string, len(evs)), make([]int64, len(evs)), make([]string, len(evs)), make([]string, len(evs))
		for i := range evs {
			e := &evs[i]
			last++
			e.Sequence, e.PreviousHash = last, prev
			h, err := eventHash(e)
			if err != nil {
				return fmt.Errorf("seal event %s: %w", e.ID, err)
			}
			ids[i], seqs[i], prevs[i], hashes[i] = e.ID, e.Sequence, prev, h
			prev = h
		}
		if _, err := tx.Exec(ctx, `UPDATE events e SET sequence = u.seq, previous_hash = u.prev, event_hash = u.hash
			FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[]) AS u(id, seq, prev, hash) WHERE e.id = u.id`,
			ids, seqs, prevs, hashes); err != nil {
			return fmt.Errorf("seal events: %w", err)
		}
		sealed = len(evs)
		return nil
	})
	return sealed, err
}

const eventColumns = `id::text, COALESCE(sequence, 0), created_at, event_type, entity_type, entity_id, payload::text,
	source_controller_id, COALESCE(previous_hash, ''), COALESCE(event_hash, '')`

func scanEvent(row pgx.CollectableRow) (api.Event, error) {
	var e api.Event
	var payload string
	err := row.Scan(&e.ID, &e.Sequence, &e.Timestamp, &e.EventType, &e.EntityType, &e.EntityID, &payload,
		&e.SourceControllerID, &e.PreviousHash, &e.EventHash)
	e.Timestamp = e.Timestamp.UTC()
	e.Payload = json.RawMessage(payload)
	return e, err
}

// canonicalEvent is the hashed form: keys in lexical order, no spaces, the
// payload's keys sorted too, the timestamp with exactly microseconds (what
// Postgres keeps), and previous_hash "" for the first event.
type canonicalEvent struct {
	EntityID           string          `json:"entity_id"`
	EntityType         string          `json:"entity_type"`
	EventType          string          `json:"event_type"`
	ID                 string          `json:"id"`
	Payload            json.RawMessage `json:"payload"`
	PreviousHash       string          `json:"previous_hash"`
	Sequence           int64           `json:"sequence"`
	SourceControllerID string          `json:"source_controller_id"`
	Timestamp          string          `json:"timestamp"`
}

// eventHash returns the hex SHA-256 of the event's canonical JSON.
func eventHash(e *api.Event) (string, error) {
	payload, err := canonicalJSON(e.Payload)
	if err != nil {
		return "", fmt.Errorf("payload: %w", err)
	}
	b, err := marshalNoEscape(canonicalEvent{EntityID: e.EntityID, EntityType: e.EntityType, EventType: e.EventType, ID: e.ID,
		Payload: payload, PreviousHash: e.PreviousHash, Sequence: e.Sequence, SourceControllerID: e.SourceControllerID,
		Timestamp: e.Timestamp.UTC().Format("2006-01-02T15:04:05.000000Z")})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// canonicalJSON re-encodes a JSON value with sorted keys and numbers kept as written.
func canonicalJSON(raw []byte) (json.RawMessage, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return marshalNoEscape(v)
}

func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Events returns sealed events with a sequence above since, in order.
func (s *Store) Events(ctx context.Context, since int64, limit int) ([]api.Event, error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	rows, err := s.pool.Query(ctx, `SELECT `+eventColumns+` FROM events WHERE sequence > $1 ORDER BY sequence LIMIT $2`, since, limit)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	evs, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	return evs, nil
}

// VerifyEvents recomputes every sealed event's hash and link, from the first,
// and names the first sequence that does not check out.
func (s *Store) VerifyEvents(ctx context.Context) (api.EventVerification, error) {
	v := api.EventVerification{Valid: true}
	var after int64
	prev := ""
	for {
		evs, err := s.Events(ctx, after, 1000)
		if err != nil {
			return v, err
		}
		for i := range evs {
			e := &evs[i]
			reason := ""
			switch h, err := eventHash(e); {
			case e.Sequence != after+1:
				reason = fmt.Sprintf("sequence %d follows %d", e.Sequence, after)
			case e.PreviousHash != prev:
				reason = "previous_hash does not match the event before"
			case err != nil:
				reason = "payload is not valid JSON: " + err.Error()
			case h != e.EventHash:
				reason = "event_hash does not match the event's contents"
			}
			if reason != "" {
				seq := e.Sequence
				v.Valid, v.FirstBrokenSequence, v.Reason = false, &seq, reason
				return v, nil
			}
			v.Checked++
			after, prev = e.Sequence, e.EventHash
		}
		if len(evs) < 1000 {
			return v, nil
		}
	}
}

// Difference is a state the event log and the tables disagree on.
type Difference struct {
	EntityType string `json:"entity_type"`
	EntityID   string `json:"entity_id"`
	FromEvents string `json:"from_events"` // "" when the log never mentions the entity
	InTable    string `json:"in_table"`    // "" when the table has no such row
}

// ReplayEvents rebuilds every build's and worker's status from the event log
// alone and compares them with the tables, reading both in one snapshot (so
// changes committed meanwhile cannot show as differences).
func (s *Store) ReplayEvents(ctx context.Context) (replayed int64, diffs []Difference, err error) {
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		type key struct{ kind, id string }
		state := map[key]string{}
		// Sealed events come first in ord order; committed ones not yet
		// sealed follow them (every sealed ord is below every unsealed one).
		rows, err := tx.Query(ctx, `SELECT entity_type, entity_id, COALESCE(payload->>'status', '') FROM events
			WHERE entity_type IN ('build', 'worker') ORDER BY ord`)
		if err != nil {
			return fmt.Errorf("replay events: %w", err)
		}
		var kind, id, status string
		_, err = pgx.ForEachRow(rows, []any{&kind, &id, &status}, func() error {
			replayed++
			if status != "" {
				state[key{kind, id}] = status
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("replay events: %w", err)
		}
		for kind, table := range map[string]string{"build": "builds", "worker": "workers"} {
			rows, err := tx.Query(ctx, `SELECT id, status FROM `+table)
			if err != nil {
				return fmt.Errorf("replay events: read %s: %w", table, err)
			}
			seen := map[string]bool{}
			_, err = pgx.ForEachRow(rows, []any{&id, &status}, func() error {
				seen[id] = true
				if got := state[key{kind, id}]; got != status {
					diffs = append(diffs, Difference{EntityType: kind, EntityID: id, FromEvents: got, InTable: status})
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("replay events: read %s: %w", table, err)
			}
			for k, st := range state {
				if k.kind == kind && !seen[k.id] {
					diffs = append(diffs, Difference{EntityType: kind, EntityID: k.id, FromEvents: st})
				}
			}
		}
		return nil
	})
	slices.SortFunc(diffs, func(a, b Difference) int {
		return cmp.Or(cmp.Compare(a.EntityType, b.EntityType), cmp.Compare(a.EntityID, b.EntityID))
	})
	return replayed, diffs, err
}
