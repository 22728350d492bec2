// Package migrations holds hookd's schema as numbered goose migrations,
// embedded in the binary so it needs nothing beside PostgreSQL. A migration is
// never edited once it is on main: change the schema with the next number
// (`make check` runs .ci/migrations.sh, which enforces it).
package migrations

// 00003 was never released.

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

const (
	lockRetry = 500 * time.Millisecond
	lockWait  = 5 * time.Minute
)

//go:embed *.sql
var files embed.FS

// FS is the set of migration files, for callers that need to fingerprint the
// schema (the test helper names its template database by their hash).
var FS fs.FS = files

// Up applies every pending migration. It is safe to call from several
// processes at once, directly or through a pooler in transaction pooling
// mode: goose holds a lock row in its goose_lock table while it migrates
// (kept alive by its own heartbeat, taken over 30 s after a holder dies),
// so replicas starting together apply each migration exactly once. A
// session advisory lock would need a session, which a pooler hands to
// whichever client comes next: the lock would leak with it.
func Up(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	return up(ctx, db)
}

func up(ctx context.Context, db *sql.DB) ([]string, error) {
	// A replica that finds another migrating asks again every half second
	// (goose's default is 5 s) for up to five minutes.
	locker, err := lock.NewPostgresTableLocker(lock.WithTableLockTimeout(lockRetry, uint64(lockWait/lockRetry)))
	if err != nil {
		return nil, fmt.Errorf("migration lock: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, files, goose.WithLocker(locker))
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	results, err := provider.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("apply migrations: %w", err)
	}
	applied := make([]string, 0, len(results))
	for _, r := range results {
		applied = append(applied, r.Source.Path)
	}
	return applied, nil
}
