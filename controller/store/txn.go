package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// txn is a transaction that records the state changes made in it. Every state
// transition of a build, worker or controller calls emit; at commit,
// queuePublish appends the changes to the audit log and announces them with
// pg_notify inside the same transaction, so an event exists exactly when its
// change commits, and listeners never hear of a change that rolled back.
//
// It saves two round trips per transaction over pgx.BeginFunc: BEGIN travels
// with the first statement and COMMIT with the publishing statement, in one
// pipelined batch each. At hundreds of transactions a second every round
// trip is a pair of context switches on both sides.
type txn struct {
	conn    *pgxpool.Conn
	begun   bool
	cfg     Config
	changes []Change
}

// emit records a change; call it only after the write it reports, so the
// transaction holds its id before it draws its events' ord (SealEvents
// depends on that).
func (t *txn) emit(c Change) { t.changes = append(t.changes, c) }

// withTx runs fn in a transaction, publishes its changes and commits.
func (s *Store) withTx(ctx context.Context, fn func(*txn) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire database connection: %w", err)
	}
	t := &txn{conn: conn, cfg: s.cfg}
	defer func() {
		if t.begun {
			// A transaction still open here failed or panicked. A connection
			// that cannot roll back is closed rather than reused.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if _, err := conn.Exec(rctx, "ROLLBACK"); err != nil {
				conn.Conn().Close(rctx) //nolint:errcheck // already failing
			}
			cancel()
		}
		conn.Release()
	}()
	if err := fn(t); err != nil {
		return err
	}
	return t.commit(ctx)
}

// batch is sql alone, or behind BEGIN when it is the transaction's first statement.
func (t *txn) batch(sql string, args []any) *pgx.Batch {
	b := &pgx.Batch{}
	if !t.begun {
		b.Queue("BEGIN")
	}
	b.Queue(sql, args...)
	return b
}

// send runs one statement, opening the transaction with it when it is the
// first. The caller reads its result from the returned batch.
func (t *txn) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	first := !t.begun
	br := t.conn.SendBatch(ctx, t.batch(sql, args))
	t.begun = true // even a failed BEGIN leaves it to the deferred ROLLBACK
	if first {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, fmt.Errorf("begin transaction: %w", err)
		}
	}
	return br, nil
}

// Exec runs a statement in the transaction.
func (t *txn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, err := t.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	return tag, errors.Join(err, br.Close())
}

// Query runs a query in the transaction; close the rows (CollectRows does).
func (t *txn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br, err := t.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow runs a query expected to return at most one row.
func (t *txn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	return &txnRow{rows: rows, err: err}
}

// commit publishes the changes and commits in one round trip.
func (t *txn) commit(ctx context.Context) error {
	if !t.begun {
		if len(t.changes) > 0 {
			return errors.New("commit: changes emitted without a statement") // a programming error
		}
		return nil
	}
	b := &pgx.Batch{}
	if err := t.queuePublish(b); err != nil {
		return err
	}
	b.Queue("COMMIT")
	br := t.conn.SendBatch(ctx, b)
	var tag pgconn.CommandTag
	var err error
	for range b.Len() {
		if tag, err = br.Exec(); err != nil {
			break
		}
	}
	if err = errors.Join(err, br.Close()); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	t.begun = false
	if tag.String() != "COMMIT" { // an aborted transaction answers COMMIT with ROLLBACK
		return fmt.Errorf("commit: the transaction was rolled back (%s)", tag)
	}
	return nil
}

// batchRows closes the batch with the rows.
type batchRows struct {
	pgx.Rows
	br pgx.BatchResults
}

func (r *batchRows) Close() {
	r.Rows.Close()
	r.br.Close()
}

// txnRow is pgx.Row over a transaction's Query, like pgx's own.
type txnRow struct {
	rows pgx.Rows
	err  error
}

func (r *txnRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}
