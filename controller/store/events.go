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
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
)

// auditEvent is what a Change appends to the log; log growth is not a state
// change and appends nothing. Project changes (variables, credentials) are
// audited but carry no status: a replay ignores them.
func (c Change) auditEvent() (eventType string, payload []byte, ok bool) {
	if c.Kind != "build" && c.Kind != "worker" && c.Kind != "controller" && c.Kind != "project" && c.Kind != KindSubmission {
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
	if !called || high <= s.sealedThrough.Load() {
		return 0, nil // nothing drawn since the last complete pass
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
		if err != nil {
			return total, err
		}
		if n < sealBatch {
			s.sealedThrough.Store(high)
			return total, nil
		}
	}
}

func (s *Store) sealUpTo(ctx context.Context, high int64) (int, error) {
	sealed := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Blocking: whoever seals next continues the chain the other left,
		// and a caller (events verify, a test) can rely on its own call.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, sealLockKey); err != nil {
			return fmt.Errorf("seal events: take lock: %w", err)
		}
		var last, lastOrd int64
		var prev string
		err := tx.QueryRow(ctx, `SELECT sequence, ord, event_hash FROM event_chain ORDER BY sequence DESC LIMIT 1`).Scan(&last, &lastOrd, &prev)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("seal events: read chain head: %w", err)
		}
		// Every ord up to the head is sealed or was rolled back, so the
		// next events are simply the ones above it.
		rows, err := tx.Query(ctx, `SELECT e.ord, `+eventBaseColumns+`, 0, '', '' FROM events e
			WHERE e.ord > $1 AND e.ord <= $2 ORDER BY e.ord LIMIT $3`, lastOrd, high, sealBatch)
		if err != nil {
			return fmt.Errorf("seal events: %w", err)
		}
		var ords []int64
		evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (api.Event, error) {
			var ord int64
			e, err := scanEventAfter(row, &ord)
			ords = append(ords, ord)
			return e, err
		})
		if err != nil {
			return fmt.Errorf("seal events: %w", err)
		}
		if len(evs) == 0 {
			return nil
		}
		seqs, prevs, hashes := make([]int64, len(evs)), make([]string, len(evs)), make([]string, len(evs))
		for i := range evs {
			e := &evs[i]
			last++
			e.Sequence, e.PreviousHash = last, prev
			h, err := eventHash(e)
			if err != nil {
				return fmt.Errorf("seal event %s: %w", e.ID, err)
			}
			seqs[i], prevs[i], hashes[i] = last, prev, h
			prev = h
		}
		if _, err := tx.Exec(ctx, `INSERT INTO event_chain (sequence, ord, previous_hash, event_hash)
			SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[])`,
			seqs, ords, prevs, hashes); err != nil {
			return fmt.Errorf("seal events: %w", err)
		}
		// One notification per pass tells live views (the dashboard) that
		// something changed: progress between the states a long poll or a
		// log follow waits for is not announced by its own transaction.
		note, err := json.Marshal([]Change{{Kind: "events", ID: strconv.FormatInt(last, 10)}})
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, NotifyChannel, string(note)); err != nil {
			return fmt.Errorf("seal events: notify: %w", err)
		}
		sealed = len(evs)
		return nil
	})
	return sealed, err
}

// eventColumns read a sealed event from events e joined with event_chain c.
const (
	eventBaseColumns = `e.id::text, e.created_at, e.event_type, e.entity_type, e.entity_id, e.payload::text, e.source_controller_id`
	eventColumns     = eventBaseColumns + `, c.sequence, c.previous_hash, c.event_hash`
)

func scanEvent(row pgx.CollectableRow) (api.Event, error) { return scanEventAfter(row) }

// scanEventAfter scans eventColumns after the leading columns in first.
func scanEventAfter(row pgx.CollectableRow, first ...any) (api.Event, error) {
	var e api.Event
	var payload string
	err := row.Scan(append(first, &e.ID, &e.Timestamp, &e.EventType, &e.EntityType, &e.EntityID, &payload,
		&e.SourceControllerID, &e.Sequence, &e.PreviousHash, &e.EventHash)...)
	e.Timestamp = e.Timestamp.UTC()
	e.Payload = json.RawMessage(payload)
	return e, err
}

// canonicalEvent is the hashed form: keys in lexical order, no spaces, the
// payload as stored without insignificant whitespace (the controller writes
// it with sorted keys), the timestamp with exactly microseconds (what
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
	var payload bytes.Buffer
	if err := json.Compact(&payload, e.Payload); err != nil {
		return "", fmt.Errorf("payload: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(canonicalEvent{EntityID: e.EntityID, EntityType: e.EntityType, EventType: e.EventType, ID: e.ID,
		Payload: payload.Bytes(), PreviousHash: e.PreviousHash, Sequence: e.Sequence, SourceControllerID: e.SourceControllerID,
		Timestamp: e.Timestamp.UTC().Format("2006-01-02T15:04:05.000000Z")})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return hex.EncodeToString(sum[:]), nil
}

// LastSequence is the sequence of the newest sealed event, 0 when none.
func (s *Store) LastSequence(ctx context.Context) (int64, error) {
	var seq int64
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(max(sequence), 0) FROM event_chain`).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("read the newest event's sequence: %w", err)
	}
	return seq, nil
}

// Events returns sealed events with a sequence above since, in order.
func (s *Store) Events(ctx context.Context, since int64, limit int) ([]api.Event, error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	rows, err := s.pool.Query(ctx, `SELECT `+eventColumns+` FROM event_chain c JOIN events e ON e.ord = c.ord
		WHERE c.sequence > $1 ORDER BY c.sequence LIMIT $2`, since, limit)
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
		// Every committed event, sealed or not, in ord (chain) order.
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

// ScopeChanged reports whether an event sealed after sequence after
// concerns a build scope sees (only build buildID, when it is not ""), and
// returns the sealed head to ask from next time: a project-bound live view
// is told of its own projects' changes only, never of another's.
func (s *Store) ScopeChanged(ctx context.Context, after int64, scope Scope, buildID string) (head int64, changed bool, err error) {
	err = s.pool.QueryRow(ctx, `SELECT COALESCE(max(c.sequence), $1), COALESCE(bool_or(b.id IS NOT NULL), false)
		FROM event_chain c JOIN events e ON e.ord = c.ord
		LEFT JOIN builds b ON e.entity_type = 'build' AND b.id = e.entity_id
			AND ($2::text[] IS NULL OR b.project = ANY($2)) AND ($3 = '' OR b.id = $3)
		WHERE c.sequence > $1`, after, scope.filter(), buildID).Scan(&head, &changed)
	if err != nil {
		return after, false, fmt.Errorf("read the changes a live view may see: %w", err)
	}
	return head, changed, nil
}
