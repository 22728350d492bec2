package queue_test

import (
	"strings"
	"testing"

	"github.com/hookd/hookd/queue/queuetest"
)

// The queue's hot queries must be able to use their indexes. The test
// tables are tiny, where a sequential scan is cheapest, so sequential scans
// are switched off: what is left shows whether an index serves the query.
func TestQueriesUseTheirIndexes(t *testing.T) {
	t.Parallel()
	pool := queuetest.NewPool(t)
	ctx := t.Context()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name, query, index string
	}{
		{"ClaimDue", `SELECT id FROM webhook_events
			WHERE status IN ('failed', 'retrying') AND attempts < 5 AND next_retry_at <= now()
			ORDER BY next_retry_at LIMIT 10 FOR UPDATE SKIP LOCKED`, "webhook_events_due_idx"},
		{"DeadEvents", `SELECT id FROM webhook_events WHERE status = 'dead'
			ORDER BY created_at DESC LIMIT 50`, "webhook_events_dead_idx"},
		{"PruneProcessed", `SELECT ctid FROM processed_webhook_events
			WHERE processed_at < now() - interval '30 days' LIMIT 10000`, "processed_webhook_events_processed_at_brin"},
		{"IsProcessed", `SELECT EXISTS (SELECT 1 FROM processed_webhook_events WHERE event_id = 'evt_1')`, "processed_webhook_events_pkey"},
		{"IsQueued", `SELECT EXISTS (SELECT 1 FROM webhook_events WHERE source = 'stripe' AND event_id = 'evt_1')`, "webhook_events_source_event_id_key"},
	}
	for _, tc := range cases {
		var plan strings.Builder
		rows, err := conn.Query(ctx, "EXPLAIN "+tc.query)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(line + "\n")
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(plan.String(), tc.index) {
			t.Errorf("%s does not use %s:\n%s", tc.name, tc.index, plan.String())
		}
	}
}
