package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/store"
)

// DefaultReadTimeout is HOOKD_DASHBOARD_TIMEOUT's default: the longest one
// query of a dashboard page may run. The failures page over 100,000 queued
// events takes well under a second; a filter that scans far more than that
// is stopped rather than left to hold a connection and a core.
const DefaultReadTimeout = 5 * time.Second

// ReadTimeoutError is a dashboard read that ran past its limit and was
// stopped by the database.
type ReadTimeoutError struct {
	// Limit is the statement timeout the read ran into.
	Limit time.Duration
	err   error
}

func (e *ReadTimeoutError) Error() string {
	return fmt.Sprintf("read stopped after %s: %v", e.Limit, e.err)
}

func (e *ReadTimeoutError) Unwrap() error { return e.err }

// NewReader returns a Store for the dashboard's reads over pool, which
// should be a small pool of their own: however many people load pages, and
// however slow their filters, they hold at most its connections, and the
// receiver's pool is left to the receiver.
//
// Every query runs in a read-only transaction of its own that sets
// statement_timeout to timeout (DefaultReadTimeout when zero) with SET
// LOCAL, so the limit ends with the transaction: it works through PgBouncer
// in transaction pooling mode, where a session setting would stay behind
// on a server connection another client gets next. A query past the limit
// fails with a *ReadTimeoutError. The Store refuses writes.
func NewReader(pool *pgxpool.Pool, timeout time.Duration, opts ...Option) *Store {
	s := &Store{db: TimedReads(pool, timeout)}
	for _, o := range opts {
		o(s)
	}
	return s
}

// TimedReads is what NewReader reads through, for the other stores whose
// reads the dashboard shows (activity counts, the rejection log): each statement in a read-only transaction of its own
// under timeout (DefaultReadTimeout when zero).
func TimedReads(pool *pgxpool.Pool, timeout time.Duration) store.DBTX {
	if timeout <= 0 {
		timeout = DefaultReadTimeout
	}
	// Whole milliseconds, PostgreSQL's unit; never 0, which means no limit.
	ms := max(timeout.Milliseconds(), 1)
	return timedReads{
		pool:    pool,
		begin:   fmt.Sprintf("BEGIN READ ONLY; SET LOCAL statement_timeout = %d", ms),
		timeout: time.Duration(ms) * time.Millisecond,
	}
}

// timedReads is a DBTX whose every statement runs in a read-only
// transaction of its own under a statement timeout. The transaction's
// BEGIN and SET LOCAL go as one simple-protocol message, so a read costs
// one round trip more than on the pool (the rollback that ends it).
type timedReads struct {
	pool    *pgxpool.Pool
	begin   string
	timeout time.Duration
}

// Begin opens a read-only transaction under the timeout; a Store's InTx on
// the reader runs all its statements in it.
func (r timedReads) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := r.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: r.begin})
	if err != nil {
		return nil, r.translate(ctx, err)
	}
	return timedTx{Tx: tx, r: r}, nil
}

func (r timedReads) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tx, err := r.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: r.begin})
	if err != nil {
		return pgconn.CommandTag{}, r.translate(ctx, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	tag, err := tx.Exec(ctx, sql, args...)
	return tag, r.translate(ctx, err)
}

func (r timedReads) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	tx, err := r.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: r.begin})
	if err != nil {
		return nil, r.translate(ctx, err)
	}
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, r.translate(ctx, err)
	}
	return &timedRows{Rows: rows, tx: tx, ctx: ctx, r: r}, nil
}

func (r timedReads) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := r.Query(ctx, sql, args...)
	return timedRow{rows: rows, err: err}
}

// translate turns the database's cancel of a statement that ran past the
// timeout into a *ReadTimeoutError. A cancel because the request went away
// (ctx done) stays what it is.
func (r timedReads) translate(ctx context.Context, err error) error {
	var pgErr *pgconn.PgError
	if err != nil && ctx.Err() == nil && errors.As(err, &pgErr) && pgErr.Code == "57014" {
		return &ReadTimeoutError{Limit: r.timeout, err: err}
	}
	return err
}

// timedRows ends its transaction when closed.
type timedRows struct {
	pgx.Rows
	tx     pgx.Tx
	ctx    context.Context
	r      timedReads
	closed bool
}

func (t *timedRows) Close() {
	t.Rows.Close()
	if !t.closed {
		t.closed = true
		// Read only: a rollback is as good as a commit, and ends the
		// transaction whatever happened in it.
		_ = t.tx.Rollback(context.WithoutCancel(t.ctx))
	}
}

func (t *timedRows) Err() error { return t.r.translate(t.ctx, t.Rows.Err()) }

// timedRow is QueryRow's answer: pgx's own reads its first row and
// closes, and so does this one, ending the transaction.
type timedRow struct {
	rows pgx.Rows
	err  error
}

func (t timedRow) Scan(dest ...any) error {
	if t.err != nil {
		return t.err
	}
	defer t.rows.Close()
	if !t.rows.Next() {
		if err := t.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := t.rows.Scan(dest...); err != nil {
		return err
	}
	t.rows.Close()
	return t.rows.Err()
}

// timedTx translates a timeout within a transaction of the reader.
type timedTx struct {
	pgx.Tx
	r timedReads
}

func (t timedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := t.Tx.Exec(ctx, sql, args...)
	return tag, t.r.translate(ctx, err)
}

func (t timedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := t.Tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, t.r.translate(ctx, err)
	}
	return translatedRows{Rows: rows, ctx: ctx, r: t.r}, nil
}

func (t timedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return translatedRow{row: t.Tx.QueryRow(ctx, sql, args...), ctx: ctx, r: t.r}
}

type translatedRows struct {
	pgx.Rows
	ctx context.Context
	r   timedReads
}

func (t translatedRows) Err() error { return t.r.translate(t.ctx, t.Rows.Err()) }

type translatedRow struct {
	row pgx.Row
	ctx context.Context
	r   timedReads
}

func (t translatedRow) Scan(dest ...any) error { return t.r.translate(t.ctx, t.row.Scan(dest...)) }
