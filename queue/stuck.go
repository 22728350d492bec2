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
