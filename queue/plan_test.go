package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// The queue's hot queries must be able to use their indexes. Each case calls
// the store method itself and EXPLAINs the statements it really sent, so a
// changed query is checked as it now is. The test tables are tiny, where a
// sequential scan is cheapest, so sequential scans are switched off: what is
// left shows whether an index serves the query.
func TestQueriesUseTheirIndexes(t *testing.T) {
	t.Parallel()
	pool, rec := queuetest.NewRecordingPool(t)
	store := queue.New(pool)
	ctx := t.Context()

	cases := []struct {
		name, table, index string
		run                func(context.Context) error
	}{
		{"ClaimDue", "webhook_events", "webhook_events_due_idx", func(ctx context.Context) error {
			_, err := store.ClaimDue(ctx, 10, queue.DefaultClaimWindow)
			return err
		}},
		{"DeadEvents", "webhook_events", "webhook_events_dead_idx", func(ctx context.Context) error {
			_, err := store.DeadEvents(ctx, 50, 0)
			return err
		}},
		{"PruneProcessed", "processed_webhook_events", "processed_webhook_events_processed_at_brin", func(ctx context.Context) error {
			_, err := store.PruneProcessed(ctx, 30*24*time.Hour)
			return err
		}},
		{"IsProcessed", "processed_webhook_events", "processed_webhook_events_pkey", func(ctx context.Context) error {
			_, err := store.IsProcessed(ctx, "evt_1")
			return err
		}},
		{"IsQueued", "webhook_events", "webhook_events_source_event_id_key", func(ctx context.Context) error {
			_, err := store.IsQueued(ctx, "stripe", "evt_1")
			return err
		}},
	}
	for _, tc := range cases {
		rec.Take("")
		if err := tc.run(ctx); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		queries := rec.Take(tc.table)
		if len(queries) == 0 {
			t.Fatalf("%s ran no statement on %s", tc.name, tc.table)
		}
		used := false
		for _, q := range queries {
			plan := explainWithoutSeqScan(t, pool, q)
			used = used || plan.Uses(tc.index)
			t.Logf("%s:\n%s", tc.name, plan)
		}
		if !used {
			t.Errorf("%s does not use %s", tc.name, tc.index)
		}
	}
}

// explainWithoutSeqScan plans q in a transaction that forbids sequential
// scans, rolled back so the setting never reaches the pool's connections.
func explainWithoutSeqScan(t *testing.T, pool *pgxpool.Pool, q queuetest.RecordedQuery) queuetest.PlanNode {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	return queuetest.Explain(t, tx, q)
}
