package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hookd/hookd/internal/store"
)

// PruneProcessed deletes the dedup markers older than olderThan and returns
// how many it deleted. Markers only guard against Stripe redelivering an
// event, which it stops doing after three days; without a prune the table
// grows by one row per webhook for the life of the deployment.
//
// It deletes in batches of store.PruneBatchSize until a batch comes back short, so
// it never holds a long lock or builds a huge transaction.
func (s *Store) PruneProcessed(ctx context.Context, olderThan time.Duration) (int64, error) {
	var cutoff time.Time
	if err := s.db.QueryRow(ctx, `SELECT now() - make_interval(secs => $1)`,
		olderThan.Seconds()).Scan(&cutoff); err != nil {
		return 0, fmt.Errorf("prune markers: compute cutoff: %w", err)
	}
	return store.DeleteInBatches(ctx, s.db, "markers", `
		DELETE FROM processed_webhook_events
		WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM processed_webhook_events
			WHERE processed_at < $1
			LIMIT $2))`,
		cutoff)
}

// CountPrunable returns how many markers PruneProcessed(olderThan) would
// delete now, for a confirmation before a manual prune.
func (s *Store) CountPrunable(ctx context.Context, olderThan time.Duration) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, `
		SELECT count(*) FROM processed_webhook_events
		WHERE processed_at < now() - make_interval(secs => $1)`,
		olderThan.Seconds()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count prunable markers: %w", err)
	}
	return n, nil
}

// exactMarkerCountBelow is the planner estimate under which the marker count
// is counted exactly. COUNT(*) over 10 million markers took 434 ms on a
// 2-core machine, too slow for a page that refreshes itself every few
// seconds; below this size it takes a few milliseconds.
const exactMarkerCountBelow = 200_000

// markerCount returns the number of dedup markers: exact when the table is
// small, otherwise the planner's estimate (which scales the last ANALYZE's
// row density by the table's current size, so it follows growth between
// autovacuum runs).
func (s *Store) markerCount(ctx context.Context) (n int64, estimated bool, err error) {
	var plan []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		} `json:"Plan"`
	}
	var raw []byte
	if err := s.db.QueryRow(ctx,
		`EXPLAIN (FORMAT JSON) SELECT 1 FROM processed_webhook_events`).Scan(&raw); err != nil {
		return 0, false, fmt.Errorf("estimate marker count: %w", err)
	}
	if err := json.Unmarshal(raw, &plan); err != nil || len(plan) == 0 {
		return 0, false, fmt.Errorf("estimate marker count: unexpected plan %q", raw)
	}
	if est := int64(plan[0].Plan.Rows); est >= exactMarkerCountBelow {
		return est, true, nil
	}
	if err := s.db.QueryRow(ctx,
		`SELECT count(*) FROM processed_webhook_events`).Scan(&n); err != nil {
		return 0, false, fmt.Errorf("count markers: %w", err)
	}
	return n, false, nil
}
