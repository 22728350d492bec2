// Package accounts holds the dashboard's accounts in PostgreSQL: who may sign
// in, with which role and password, how fast sign-ins may be tried, and the
// housekeeping of what signing in leaves behind (expired sessions, stale
// sign-in counts, the keys forms are signed with).
//
// The rules that keep an admin in charge (nobody changes or removes their
// own account, the last admin stays) are decided here, on locked rows. An
// account change and its audit entry commit together: run the change on a
// Tx from InTx and write the entry with audit.Record on its PgxTx.
package accounts

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/store"
)

// ErrNotFound is returned when the account asked for does not exist.
var ErrNotFound = errors.New("no such account")

// Store runs the account queries against a pool or, as the Store inside a
// Tx, against one transaction.
type Store struct {
	db store.DBTX
	// checks counts the password checks Authenticate made, shared by the
	// Store and every Tx made from it.
	checks *atomic.Int64
}

// New returns a Store over pool.
func New(pool *pgxpool.Pool) *Store {
	return &Store{db: pool, checks: new(atomic.Int64)}
}

// Tx is a Store bound to one open transaction, as given by InTx: the
// account changes that must be decided on locked rows (SetRole,
// RemoveUser) are only on it.
type Tx struct {
	Store
	store.Tx
}

// InTx runs fn in a transaction: committed when fn returns nil, rolled back
// when it returns an error.
func (s *Store) InTx(ctx context.Context, fn func(tx *Tx) error) error {
	return store.InTx(ctx, s.db, func(t store.Tx) error {
		return fn(&Tx{Store: Store{db: t.PgxTx(), checks: s.checks}, Tx: t})
	})
}
