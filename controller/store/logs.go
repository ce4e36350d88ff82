package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
)

// AppendLog appends data at byte offset to a build's log, for the live
// attempt attemptID. Bytes the log already holds (a resend) are accepted
// without change; an offset beyond the log's length gives *OffsetAheadError.
// It returns the log's length after the append.
func (s *Store) AppendLog(ctx context.Context, buildID, attemptID string, offset int64, data []byte, maxLog int64) (int64, error) {
	if offset < 0 {
		return 0, fmt.Errorf("%w: offset must be ≥ 0", ErrInvalid)
	}
	// One statement locks the build, checks the attempt and the offset,
	// and appends what the log does not hold yet: a building VM appends
	// once a second, the commonest write of a busy farm.
	end := offset + int64(len(data))
	if end < offset { // an offset no log reaches: refused as beyond the length below
		end = math.MaxInt64
	}
	var length int64
	var live, appended bool
	err := s.withTx(ctx, func(t *txn) error {
		err := t.QueryRow(ctx, `
			WITH b AS (
				SELECT log_length, attempt_id IS NOT DISTINCT FROM $2 AND status IN ('assigned', 'building') AS live
				FROM builds WHERE id = $1 FOR UPDATE
			), w AS (
				SELECT b.log_length AS at FROM b
				WHERE b.live AND $3::bigint <= b.log_length AND $6::bigint > b.log_length AND $6 <= $5::bigint
			), ins AS (
				INSERT INTO build_logs (build_id, byte_offset, data) SELECT $1, w.at, substring($4::bytea FROM (w.at - $3 + 1)::int) FROM w
			), up AS (
				UPDATE builds SET log_length = $6 FROM w WHERE builds.id = $1
			)
			SELECT log_length, live, EXISTS (SELECT 1 FROM w) FROM b`, buildID, attemptID, offset, data, maxLog, end).Scan(&length, &live, &appended)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: no build %q", ErrNotFound, buildID)
		}
		if err != nil {
			return fmt.Errorf("append log: %w", err)
		}
		if appended {
			t.emit(Change{Kind: "log", ID: buildID})
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	switch {
	case appended:
		return end, nil
	case !live:
		return 0, fmt.Errorf("%w: attempt %s of build %s has ended", ErrLeaseLost, attemptID, buildID)
	case offset > length:
		return 0, &OffsetAheadError{Length: length}
	case end <= length:
		return length, nil // already held
	}
	return 0, fmt.Errorf("%w: the build log would exceed %d bytes", ErrTooLarge, maxLog)
}

// LogSlice is part of a build log.
type LogSlice struct {
	Data   []byte
	Length int64 // the whole log's length when read
	Status api.BuildStatus
}

// ReadLog returns up to max bytes of a build's log starting at offset after.
func (s *Store) ReadLog(ctx context.Context, buildID string, after int64, max int) (LogSlice, error) {
	var out LogSlice
	if after < 0 {
		return out, fmt.Errorf("%w: parameter \"after\" must be ≥ 0", ErrInvalid)
	}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		var deleted *time.Time
		err := tx.QueryRow(ctx, `SELECT log_length, status, logs_deleted_at FROM builds WHERE id = $1`, buildID).Scan(&out.Length, &out.Status, &deleted)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: no build %q", ErrNotFound, buildID)
		}
		if deleted != nil {
			return fmt.Errorf("%w: the log of build %s expired and was deleted on %s (the controller keeps logs for --retain-logs after a build ends)",
				ErrGone, buildID, deleted.UTC().Format(time.RFC3339))
		}
		if err != nil || after >= out.Length {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT byte_offset, data FROM build_logs WHERE build_id = $1
			AND byte_offset >= COALESCE((SELECT max(byte_offset) FROM build_logs WHERE build_id = $1 AND byte_offset <= $2), 0)
			AND byte_offset < $2 + $3
			ORDER BY byte_offset`, buildID, after, max)
		if err != nil {
			return fmt.Errorf("read log: %w", err)
		}
		defer rows.Close()
		for rows.Next() && len(out.Data) < max {
			var off int64
			var chunk []byte
			if err := rows.Scan(&off, &chunk); err != nil {
				return fmt.Errorf("read log: %w", err)
			}
			if off < after {
				chunk = chunk[after-off:]
			}
			if room := max - len(out.Data); len(chunk) > room {
				chunk = chunk[:room]
			}
			out.Data = append(out.Data, chunk...)
		}
		return rows.Err()
	})
	return out, err
}
