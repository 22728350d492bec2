// Package store is what every store of hookd shares, defined once: what
// their statements run on (the pool, or one transaction of it), their
// reads of one row or a list, and the DELETEs their prunes run, whole or
// in batches. It is a package of its own, below them all, so that no store
// needs to import queue for it and queue may import the stores it reads
// beside its own tables.
package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DBTX is what both *pgxpool.Pool and pgx.Tx provide, so every store
// method runs the same way on the pool or inside a transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Tx is the open transaction a store's own Tx type embeds, which gives
// that type PgxTx.
type Tx struct{ tx pgx.Tx }

// PgxTx returns the transaction itself, for the writes of other stores
// that must commit with this one's: an operator's action or an account
// change and its audit entry (audit.Record) commit together or not at all.
func (t Tx) PgxTx() pgx.Tx { return t.tx }

// InTx runs fn in a transaction on db: committed when fn returns nil,
// rolled back when it returns an error.
func InTx(ctx context.Context, db DBTX, fn func(Tx) error) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error { return fn(Tx{tx: tx}) })
}

// PruneBatchSize bounds each DELETE of a prune (markers, attempt history,
// the rejection log), so a prune of millions of rows is many short
// transactions instead of one long one holding row locks and bloating the
// WAL in a single commit.
const PruneBatchSize = 10_000

// DeleteInBatches runs sql, a DELETE of at most PruneBatchSize rows whose
// last parameter is that bound, until a batch comes back short, and
// returns how many rows it deleted; what names the rows in its error.
func DeleteInBatches(ctx context.Context, db DBTX, what, sql string, args ...any) (int64, error) {
	args = append(args, PruneBatchSize)
	var total int64
	for {
		tag, err := db.Exec(ctx, sql, args...)
		if err != nil {
			return total, fmt.Errorf("prune %s: %w", what, err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < PruneBatchSize {
			return total, nil
		}
	}
}

// Delete runs sql, one DELETE, and returns how many rows it deleted; what
// names the statement in its error.
func Delete(ctx context.Context, db DBTX, what, sql string, args ...any) (int64, error) {
	tag, err := db.Exec(ctx, sql, args...)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return tag.RowsAffected(), nil
}

// QueryOne runs sql on db and reads its one row into a T, column by field
// name (pgx.RowToStructByName): every store's read of a single row, so
// that each says only what none means to it. found is false, with no
// error, when there is no row; more than one is an error.
func QueryOne[T any](ctx context.Context, db DBTX, sql string, args ...any) (v T, found bool, err error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return v, false, err
	}
	v, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[T])
	if errors.Is(err, pgx.ErrNoRows) {
		return v, false, nil
	}
	return v, err == nil, err
}

// QueryAll runs sql on db and reads all its rows into Ts, column by field
// name (pgx.RowToStructByName): every store's read of a list, so that
// each says only what the list is.
func QueryAll[T any](ctx context.Context, db DBTX, sql string, args ...any) ([]T, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[T])
}
