// Package queue is hookd's durable state in PostgreSQL: the dedup markers that
// make a redelivered Stripe event a no-op, the per-event advisory lock that
// serializes concurrent deliveries of one event, and the retry queue that keeps
// every event whose processing failed until it succeeds or a person gives up
// on it. The dashboard's accounts and its audit log are stores of their own,
// in queue/accounts and queue/audit.
//
// Every timestamp is taken from the database's now(), so replicas on different
// machines share one clock.
package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SourceStripe is the source recorded for events received from Stripe.
const SourceStripe = "stripe"

var (
	// ErrNotFound is returned when the row asked for does not exist.
	ErrNotFound = errors.New("not found")

	// ErrEventLocked is returned by TryLockEvent when another delivery of the
	// same event holds its lock.
	ErrEventLocked = errors.New("event is locked by another delivery")
)

// DBTX is what both *pgxpool.Pool and pgx.Tx provide, so every Store method
// runs the same way on the pool or inside a transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Store runs hookd's queries against a pool or, as the Store inside a Tx,
// against one transaction.
type Store struct {
	db DBTX
	// pool is the pool db is, for the statements that need a connection of
	// their own (BeginEvent); nil in the Store of a Tx.
	pool *pgxpool.Pool
	// demoBackoff shortens the backoff schedule for the demo; see
	// WithDemoBackoff.
	demoBackoff bool
}

// Option changes how a Store behaves.
type Option func(*Store)

// New returns a Store over pool.
func New(pool *pgxpool.Pool, opts ...Option) *Store {
	s := &Store{db: pool, pool: pool}
	for _, o := range opts {
		o(s)
	}
	return s
}

// on returns a Store like s that runs its queries on db, a transaction.
func (s *Store) on(db DBTX) Store {
	return Store{db: db, demoBackoff: s.demoBackoff}
}

// Tx is a Store bound to one open transaction, as returned by TryLockEvent.
// Its methods run inside that transaction, so the writes they make commit or
// roll back together, and any lock the transaction holds lasts until then.
type Tx struct {
	Store
	tx txHandle
}

// txHandle is an open transaction: pgx's own, or one BeginEvent began in a
// pipeline.
type txHandle interface {
	DBTX
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
	// commitWith runs b's statements, then commits, in one round trip where
	// the transaction allows it.
	commitWith(ctx context.Context, b *pgx.Batch) error
}

func (s *Store) newTx(tx pgx.Tx) *Tx {
	return &Tx{Store: s.on(tx), tx: pgxTx{tx}}
}

// pgxTx is a transaction begun by pgx: its Commit is a round trip of its own.
type pgxTx struct{ pgx.Tx }

func (t pgxTx) commitWith(ctx context.Context, b *pgx.Batch) error {
	if err := t.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	return t.Commit(ctx)
}

// pipelinedTx is a transaction whose BEGIN went out in a pipeline with its
// first statements, on a connection of the pool held until it ends. Its
// last statements go out with the COMMIT, so the whole transaction costs two
// round trips.
type pipelinedTx struct {
	*pgxpool.Conn
	ended bool
}

// Begin would nest a transaction, which no caller of a pipelined one needs.
func (t *pipelinedTx) Begin(context.Context) (pgx.Tx, error) {
	return nil, errors.New("queue: no nested transaction in a pipelined one")
}

func (t *pipelinedTx) Commit(ctx context.Context) error {
	return t.commitWith(ctx, &pgx.Batch{})
}

func (t *pipelinedTx) commitWith(ctx context.Context, b *pgx.Batch) error {
	if t.ended {
		return pgx.ErrTxClosed
	}
	b.Queue("COMMIT")
	br := t.SendBatch(ctx, b)
	var tag pgconn.CommandTag
	var err error
	for range b.Len() {
		if tag, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// The transaction is aborted, or the connection is gone: Rollback
		// ends it, or the pool drops the connection.
		return err
	}
	t.end()
	// COMMIT of a transaction an error aborted answers ROLLBACK, no error.
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

func (t *pipelinedTx) Rollback(ctx context.Context) error {
	if t.ended {
		return pgx.ErrTxClosed
	}
	_, err := t.Exec(ctx, "ROLLBACK")
	t.end()
	return err
}

// end gives the connection back; the pool closes it instead when it is
// still in a transaction, e.g. after a ROLLBACK that did not get through.
func (t *pipelinedTx) end() {
	t.ended = true
	t.Release()
}

// Commit commits the transaction and releases its locks.
func (t *Tx) Commit(ctx context.Context) error {
	if err := t.tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Rollback rolls the transaction back and releases its locks. After Commit
// it does nothing, so it is safe to defer.
func (t *Tx) Rollback(ctx context.Context) error {
	err := t.tx.Rollback(ctx)
	if err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}

// InTx runs fn in a transaction: committed when fn returns nil, rolled back
// when it returns an error.
func (s *Store) InTx(ctx context.Context, fn func(tx *Tx) error) error {
	return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		return fn(s.newTx(tx))
	})
}

// TryLockEvent takes the per-event lock for eventID without waiting and
// returns the transaction that holds it, or ErrEventLocked when another
// delivery of the same event holds it already.
//
// Hold the returned Tx across the whole dedup read, processing and the write
// of the outcome: while it is held, a second delivery of the same event gets
// ErrEventLocked and the receiver answers 503, so Stripe redelivers after the
// first delivery has committed its marker, and that redelivery's dedup read
// short-circuits. Without the lock the dedup read is check-then-act: two
// concurrent deliveries both see "not processed" and both run the processor.
//
// It tries rather than blocks (pg_try_advisory_xact_lock, not
// pg_advisory_xact_lock) because a blocking acquire would park a pooled
// connection for as long as the holder processes, including its outbound
// call, so a redelivery storm on one hot event could pin the pool just
// waiting. The loser gives its connection back at once and lets Stripe's own
// backoff redeliver; the marker settles the race anyway. Distinct events hash
// to distinct keys and never contend.
//
// The lock is transaction-scoped, so Commit or Rollback releases it on every
// path, including a panic or a lost connection; it cannot leak the way a
// session lock on a pooled connection would. The key is eventLockKey's.
func (s *Store) TryLockEvent(ctx context.Context, eventID string) (*Tx, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin event lock: %w", err)
	}
	var acquired bool
	err = tx.QueryRow(ctx, tryLockEventSQL, eventID).Scan(&acquired)
	if err != nil {
		_ = tx.Rollback(ctx)
		return nil, fmt.Errorf("lock event: %w", err)
	}
	if !acquired {
		_ = tx.Rollback(ctx)
		return nil, ErrEventLocked
	}
	return s.newTx(tx), nil
}

// eventLockKey is the SQL expression of the advisory-lock key of the event
// whose id the SQL expression id gives. A delivery (TryLockEvent,
// BeginEvent) and a retry batch (TryLockEvents, LockClaims) keep each other
// off one event only because they lock the same key, so every statement that
// locks an event builds its key here. The "stripe_webhook:" prefix keeps the
// keys apart from any other advisory lock.
//
// Never change its value: during a rolling upgrade, replicas of the old and
// the new release lock events side by side, and a different key would let
// one of each process the same event at once. A test pins the value.
func eventLockKey(id string) string {
	return "hashtextextended('stripe_webhook:' || " + id + ", 0)"
}

var (
	// tryLockEventSQL takes the lock of the event $1 without waiting.
	tryLockEventSQL = `SELECT pg_try_advisory_xact_lock(` + eventLockKey("$1::text") + `)`
	// tryLockEventsSQL takes the locks of the events $1 without waiting and
	// returns the ids it locked, in their order.
	tryLockEventsSQL = `
	SELECT e.id
	FROM unnest($1::text[]) WITH ORDINALITY AS e(id, ord)
	WHERE pg_try_advisory_xact_lock(` + eventLockKey("e.id") + `)
	ORDER BY e.ord`
)

// Ping checks that the database answers a query.
func (s *Store) Ping(ctx context.Context) error {
	if _, err := s.db.Exec(ctx, `SELECT 1`); err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return nil
}
