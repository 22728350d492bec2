package queuetest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Count runs sql, a query returning one integer such as a count(*), and
// fails t when it cannot.
func Count(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// Markers counts the dedup markers (processed_webhook_events) exactly: what
// a test checks to know how many events were delivered once.
func Markers(t testing.TB, pool *pgxpool.Pool) int64 {
	t.Helper()
	return Count(t, pool, `SELECT count(*) FROM processed_webhook_events`)
}
