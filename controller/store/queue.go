package store

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
)

// QueueEntry is a pending build as the queue view shows it.
type QueueEntry struct {
	ID          string
	Platform    string
	Profile     string
	Priority    int
	Attempts    int
	Position    int // 1 is claimed next
	SubmittedAt time.Time
	RunAfter    time.Time // not claimable before (backoff after a failed attempt)
	Project     string
	// NeedsTrust: the build carries signing credentials or sensitive or
	// secret variables, so only a trusted pool runs it.
	NeedsTrust bool
	// Requires is what a worker must offer to run it (the spec's).
	Requires *api.Requirements
}

// QueuePage is a page of pending builds in claim order.
type QueuePage struct {
	Entries []QueueEntry
	// ClaimableAhead counts, per platform, the builds before this page that
	// are claimable now (not backing off).
	ClaimableAhead map[string]int
	Pending        int // every pending build, capped at queueCountCap
	NextCursor     string
}

// queueCountCap bounds the counts a queue page makes, so a huge backlog
// never makes the page slow.
const queueCountCap = 100000

// Queue returns up to limit pending builds in claim order (priority,
// submitted_at, id), after cursor (from a previous page's NextCursor).
func (s *Store) Queue(ctx context.Context, cursor string, limit int) (QueuePage, error) {
	page := QueuePage{ClaimableAhead: map[string]int{}}
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	var (
		curPrio *int
		curTime *time.Time
		curID   *string
	)
	if cursor != "" {
		p, t, id, err := decodeQueueCursor(cursor)
		if err != nil {
			return page, err
		}
		curPrio, curTime, curID = &p, &t, &id
	}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		var ahead, aheadIOS, aheadAndroid int
		if err := tx.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE platform = 'ios' AND run_after <= now()),
			count(*) FILTER (WHERE platform = 'android' AND run_after <= now())
			FROM (SELECT platform, run_after FROM builds WHERE status = 'pending' AND $1::smallint IS NOT NULL
				AND (priority, submitted_at, id) <= ($1, $2, $3) LIMIT $4) q`,
			curPrio, curTime, curID, queueCountCap).Scan(&ahead, &aheadIOS, &aheadAndroid); err != nil {
			return fmt.Errorf("count queue: %w", err)
		}
		page.ClaimableAhead["ios"], page.ClaimableAhead["android"] = aheadIOS, aheadAndroid
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM builds WHERE status = 'pending' LIMIT $1) q`,
			queueCountCap).Scan(&page.Pending); err != nil {
			return fmt.Errorf("count queue: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT c.id, c.platform, c.profile, c.priority, c.attempts, c.submitted_at, c.run_after, c.project, `+needsTrust+`, c.spec->'requires'
			FROM builds c WHERE c.status = 'pending' AND ($1::smallint IS NULL OR (c.priority, c.submitted_at, c.id) > ($1, $2, $3))
			ORDER BY c.priority, c.submitted_at, c.id LIMIT $4`, curPrio, curTime, curID, limit+1)
		if err != nil {
			return fmt.Errorf("list queue: %w", err)
		}
		page.Entries, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (QueueEntry, error) {
			var e QueueEntry
			ahead++
			e.Position = ahead
			err := r.Scan(&e.ID, &e.Platform, &e.Profile, &e.Priority, &e.Attempts, &e.SubmittedAt, &e.RunAfter, &e.Project, &e.NeedsTrust, &e.Requires)
			return e, err
		})
		if err != nil {
			return fmt.Errorf("list queue: %w", err)
		}
		return nil
	})
	if err != nil {
		return page, err
	}
	if len(page.Entries) > limit {
		page.Entries = page.Entries[:limit]
		last := page.Entries[limit-1]
		page.NextCursor = encodeQueueCursor(last)
	}
	return page, nil
}

func encodeQueueCursor(e QueueEntry) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(e.Priority) + "|" + e.SubmittedAt.UTC().Format(time.RFC3339Nano) + "|" + e.ID))
}

func decodeQueueCursor(c string) (int, time.Time, string, error) {
	bad := fmt.Errorf("%w: queue cursor %q is not one this server issued; use the next-page link", ErrInvalid, c)
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, time.Time{}, "", bad
	}
	parts := strings.Split(string(raw), "|")
	if len(parts) != 3 || !ValidID(parts[2]) {
		return 0, time.Time{}, "", bad
	}
	p, err := strconv.Atoi(parts[0])
	if err != nil || p < 0 || p > 3 {
		return 0, time.Time{}, "", bad
	}
	t, err := time.Parse(time.RFC3339Nano, parts[1])
	if err != nil {
		return 0, time.Time{}, "", bad
	}
	return p, t, parts[2], nil
}
