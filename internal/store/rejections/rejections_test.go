package rejections_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/store/rejections"
	"github.com/hookd/hookd/queue/queuetest"
)

// testBundle is what a test of the rejection log works with besides its
// Store.
type testBundle struct {
	// pool is on the test's own fresh, migrated database, for the
	// assertions a test makes in SQL.
	pool *pgxpool.Pool
}

// setup returns a Store on a fresh, migrated database of t's own, and the
// bundle of what else the test needs. Every test of the package starts
// with it.
func setup(t testing.TB) (*rejections.Store, *testBundle) {
	t.Helper()
	pool := queuetest.NewPool(t)
	return rejections.New(pool), &testBundle{pool: pool}
}

func TestPrune_KeepsTheNewestWithinTheRetention(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := context.Background()
	now := time.Now()
	var rs []rejections.Rejection
	// 40 days old, then one a minute for the last 30 minutes.
	for i := range 5 {
		rs = append(rs, rejections.Rejection{At: now.Add(-40*24*time.Hour - time.Duration(i)*time.Minute),
			Reason: rejections.WrongSignature, HTTPStatus: 400, Detail: "old"})
	}
	for i := range 30 {
		rs = append(rs, rejections.Rejection{At: now.Add(-time.Duration(i) * time.Minute), Reason: rejections.NoSignature,
			HTTPStatus: 400, Detail: "recent", Count: int64(i%3 + 1)})
	}
	if err := s.Record(ctx, rs); err != nil {
		t.Fatal(err)
	}

	byReason, err := s.ByReason(ctx, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(byReason) != 1 || byReason[0].Reason != rejections.NoSignature || byReason[0].Count != 60 {
		t.Errorf("last 24 h by reason: %+v, want 60 no_signature (30 rows adding up to 60)", byReason)
	}

	deleted, err := s.Prune(ctx, 30*24*time.Hour, 20)
	if err != nil {
		t.Fatal(err)
	}
	if deleted != 15 {
		t.Errorf("pruned %d rows, want the 5 older than 30 days and the 10 beyond the newest 20", deleted)
	}
	var left int64
	var oldest time.Time
	if err := bundle.pool.QueryRow(ctx, `SELECT count(*), min(at) FROM webhook_rejections`).Scan(&left, &oldest); err != nil {
		t.Fatal(err)
	}
	if left != 20 || now.Sub(oldest) > 20*time.Minute {
		t.Errorf("%d rows left, the oldest %s old; want the newest 20, none older than 20 minutes", left, now.Sub(oldest))
	}
}
