package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/store"
)

// SourceStripe is the source recorded for events received from Stripe.
const SourceStripe = "stripe"

var (
	// ErrNotFound is returned when the row asked for does not exist.
	ErrNotFound = errors.New("not found")
)

// Store runs hookd's queries against a pool or, as the Store inside a Tx,
// against one transaction.
type Store struct {
	db store.DBTX
	// pool is the pool db is, for the short transactions sent as one
	// pipeline (shortTx); nil in the Store of a Tx.
	pool *pgxpool.Pool
	// demoBackoff shortens the backoff schedule for the demo; see
	// WithDemoBackoff.
	demoBackoff bool
	// breaker counts app-down failures with the outcomes; see WithBreaker.
	breaker breakerConfig
	// replica is the replica whose beats keep this Store's leases live;
	// nil for leases judged by their expiry alone. See WithReplica.
	replica *replicaID
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
func (s *Store) on(db store.DBTX) Store {
	return Store{db: db, demoBackoff: s.demoBackoff, replica: s.replica}
}

// Tx is a Store bound to one open transaction, as InTx gives it. Its
// methods run inside that transaction, so the writes they make commit or
// roll back together: an operator's action and its audit entry.
type Tx struct {
	Store
	store.Tx
}

// InTx runs fn in a transaction: committed when fn returns nil, rolled back
// when it returns an error.
func (s *Store) InTx(ctx context.Context, fn func(tx *Tx) error) error {
	return store.InTx(ctx, s.db, func(t store.Tx) error {
		return fn(&Tx{Store: s.on(t.PgxTx()), Tx: t})
	})
}

// DB returns what s runs its queries on, for the other stores that keep
// their tables on the same database and must run the way s does: on the
// main pool, or under the dashboard reader's time limit (reconcileruns).
func (s *Store) DB() store.DBTX { return s.db }

// Ping checks that the database answers a query.
func (s *Store) Ping(ctx context.Context) error {
	if _, err := s.db.Exec(ctx, `SELECT 1`); err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return nil
}

// DescribeDB names the database a connection string reaches, for messages:
// host, port, database and user, never the password.
func DescribeDB(c *pgconn.Config) string {
	return fmt.Sprintf("%s:%d/%s as %s", c.Host, c.Port, c.Database, c.User)
}

// oneRow runs sql and reads its one row into a T by column name
// (store.QueryOne), or returns ErrNotFound when there is none; what names
// the read in errors.
func oneRow[T any](ctx context.Context, db store.DBTX, what, sql string, args ...any) (T, error) {
	v, found, err := store.QueryOne[T](ctx, db, sql, args...)
	switch {
	case err != nil:
		return v, fmt.Errorf("%s: %w", what, err)
	case !found:
		return v, ErrNotFound
	}
	return v, nil
}
