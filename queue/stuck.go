package queue

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// The stuck rule. A pending event is stuck when it was claimed
// stuckClaims times or more without an outcome (Reclaimed: its claimer died
// or hung mid-attempt), or has been due for longer than the claim window
// without any retry loop claiming it (Overdue: no loop is running, or none
// keeps up). Dead events are never stuck: nothing is meant to happen to
// them. The rule is here once: in Go on Event, in SQL as reclaimedSQL, and
// in the partial index webhook_events_reclaimed_idx of migration
// 00012_claims.sql, whose predicate a test compares with reclaimedSQL.

// stuckClaims is how many claims without an outcome make an event stuck.
const stuckClaims = 2

// reclaimedSQL is Reclaimed in SQL, for a pending row. It is written into
// the statements, not passed as a parameter, so that the planner can match
// it, with pending, to webhook_events_reclaimed_idx.
var reclaimedSQL = "claims >= " + strconv.Itoa(stuckClaims)

// Stuck reports whether a pending event is stuck at now, with claimWindow
// as the claim window: Reclaimed or Overdue.
func (e Event) Stuck(now time.Time, claimWindow time.Duration) bool {
	return e.Reclaimed() || e.Overdue(now, claimWindow)
}

// Reclaimed reports whether a pending event was claimed stuckClaims times
// or more since its last outcome.
func (e Event) Reclaimed() bool {
	return e.Status != StatusDead && e.Claims >= stuckClaims
}

// Overdue reports whether a pending event has been due for longer than
// claimWindow at now.
func (e Event) Overdue(now time.Time, claimWindow time.Duration) bool {
	return e.Status != StatusDead && now.Sub(e.NextRetryAt) > claimWindow
}

// CountStuck returns how many pending events are stuck (see Event.Stuck).
func (s *Store) CountStuck(ctx context.Context, claimWindow time.Duration) (int64, error) {
	// A union of two index scans, not one OR over the pending rows: the
	// overdue ones by the due index, the reclaimed ones by their own.
	var n int64
	err := s.db.QueryRow(ctx, `
		SELECT count(*) FROM (
			SELECT id FROM webhook_events
			WHERE `+pending+` AND next_retry_at < now() - make_interval(secs => $1)
			UNION
			SELECT id FROM webhook_events
			WHERE `+pending+` AND `+reclaimedSQL+`
		) stuck`, claimWindow.Seconds()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count stuck events: %w", err)
	}
	return n, nil
}

// RetryLoopStall says whether the retry loop has stalled: no loop has
// looked for due events within after (last is when one last did, nil if
// none ever did), or none ever did while events wait for a retry.
func (s *Store) RetryLoopStall(ctx context.Context, after time.Duration) (stalled bool, last *time.Time, now time.Time, err error) {
	// The pending check runs only without any tick: every hookd serve
	// ticks at start, so that is a database no retry loop has ever served.
	// It reads the first pending row in due order, off the due index; an
	// EXISTS would let the planner drop the order and scan the table.
	var waiting bool
	err = s.db.QueryRow(ctx, `
		WITH tick AS (SELECT last_run_at FROM worker_status WHERE component = 'retrier')
		SELECT (SELECT last_run_at FROM tick), now(),
		       NOT EXISTS (SELECT 1 FROM tick) AND (
		           SELECT next_retry_at FROM webhook_events WHERE `+pending+`
		           ORDER BY next_retry_at LIMIT 1) IS NOT NULL`).Scan(&last, &now, &waiting)
	if err != nil {
		return false, nil, time.Time{}, fmt.Errorf("read retry loop status: %w", err)
	}
	if last == nil {
		return waiting, nil, now, nil
	}
	return now.Sub(*last) > after, last, now, nil
}
