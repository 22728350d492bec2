package queue

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// The stuck rule. A pending event is stuck when it was claimed
// stuckClaims times or more without an outcome (Reclaimed: its claimer died
// or hung mid-attempt), or has been due for longer than OverdueAfter
// without any retry loop claiming it (Overdue: no loop is running, or none
// keeps up). Dead events are never stuck: nothing is meant to happen to
// them. The rule is here once: in Go on Event, in SQL as reclaimedSQL, and
// in the partial index webhook_events_reclaimed_idx of migration
// 00012_claims.sql, whose predicate a test compares with reclaimedSQL.

// OverdueAfter is how long an event may stay due with no retry loop
// claiming it before it is stuck (Overdue). A loop looks every
// HOOKD_RETRY_INTERVAL (5 s by default) and a claim pushes an event's next
// retry to its lease's expiry, so two minutes past due means no loop runs,
// or none keeps up.
const OverdueAfter = 2 * time.Minute

// stuckClaims is how many claims without an outcome make an event stuck.
const stuckClaims = 2

// reclaimedSQL is Reclaimed in SQL, for a pending row. It is written into
// the statements, not passed as a parameter, so that the planner can match
// it, with pending, to webhook_events_reclaimed_idx.
var reclaimedSQL = "claims >= " + strconv.Itoa(stuckClaims)

// Stuck reports whether a pending event is stuck at now, overdue after
// overdueAfter (OverdueAfter in production): Reclaimed or Overdue.
func (e Event) Stuck(now time.Time, overdueAfter time.Duration) bool {
	return e.Reclaimed() || e.Overdue(now, overdueAfter)
}

// Reclaimed reports whether a pending event was claimed stuckClaims times
// or more since its last outcome.
func (e Event) Reclaimed() bool {
	return e.Status != StatusDead && e.Claims >= stuckClaims
}

// Overdue reports whether a pending event has been due for longer than
// overdueAfter at now.
func (e Event) Overdue(now time.Time, overdueAfter time.Duration) bool {
	return e.Status != StatusDead && now.Sub(e.NextRetryAt) > overdueAfter
}

// CountStuck returns how many pending events are stuck (see Event.Stuck).
func (s *Store) CountStuck(ctx context.Context, overdueAfter time.Duration) (int64, error) {
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
		) stuck`, overdueAfter.Seconds()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count stuck events: %w", err)
	}
	return n, nil
}
