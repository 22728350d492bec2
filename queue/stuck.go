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
// without any retry loop claiming it while nothing explains the wait
// (Overdue: no loop is running, or none takes events). Dead events are never
// stuck: nothing is meant to happen to them. The rule is here once: in Go on
// Event, in SQL as reclaimedSQL, and in the partial index
// webhook_events_reclaimed_idx of migration 00012_claims.sql, whose
// predicate a test compares with reclaimedSQL.
//
// Two things explain that due events wait, and while either holds no event
// is Overdue (DueWait):
//
//   - Delivery is held, by a person's pause or the circuit breaker: the
//     retry loop claims nothing (but the breaker's probe) on purpose, and
//     every due event waits for the resume. Such events are Held instead.
//   - A retry loop is working through a backlog: it holds live leases of
//     events it claimed (WorkerStatus.RetrierHolds). Claims take due events
//     oldest due first, a batch only as many as HOOKD_FORWARD_RATE lets
//     start within one processor run, and the next batch follows as soon
//     as one ends; so an event due behind a backlog waits its turn, however
//     long the backlog takes at the rate, and is taken when the loop gets to
//     it. A loop that died or hung holds no live lease once its leases
//     expire, and its events are stuck again from then on.
//     A loop that found every retry of a turn failed retries one event at a
//     time, an interval apart, until one succeeds (the worker's retry
//     window), and says so on its destination's row each such turn: its
//     due events wait their turn behind the app's failures. A loop that
//     stops saying so for OverdueAfter explains nothing any more.
//
// Reclaimed needs no such exception: a claim that never reached an outcome
// twice is about the event, not about the queue, and a held loop claims
// nothing that would make it so.

// OverdueAfter is how long an event may stay due with no retry loop
// claiming it before it is stuck (Overdue). A loop looks every
// HOOKD_RETRY_INTERVAL (5 s by default) and a claim pushes an event's next
// retry to its lease's expiry, so two minutes past due, with no loop busy
// with other events, means no loop runs or none takes events.
const OverdueAfter = 2 * time.Minute

// stuckClaims is how many claims without an outcome make an event stuck.
const stuckClaims = 2

// reclaimedSQL is Reclaimed in SQL, for a pending row. It is written into
// the statements, not passed as a parameter, so that the planner can match
// it, with pending, to webhook_events_reclaimed_idx.
var reclaimedSQL = "claims >= " + strconv.Itoa(stuckClaims)

// DueWait is what explains that due events wait on the queue, if anything
// does (see the stuck rule above).
type DueWait int

const (
	// WaitUnexplained: nothing does; an event due for longer than
	// OverdueAfter is stuck.
	WaitUnexplained DueWait = iota
	// WaitHeld: delivery is held by a person's pause or the circuit
	// breaker.
	WaitHeld
	// WaitInLine: a retry loop holds events of its own; the due events
	// behind them wait their turn.
	WaitInLine
)

// DueWaitOf says what explains that due events wait, from c, delivery
// control as the page shows it, and ws, what the retry loops report.
func DueWaitOf(c DeliveryControl, ws WorkerStatus) DueWait {
	switch {
	case c.Held():
		return WaitHeld
	case ws.RetrierHolds:
		return WaitInLine
	}
	return WaitUnexplained
}

// Stuck reports whether a pending event is stuck at now, overdue after
// overdueAfter (OverdueAfter in production) while wait explains nothing:
// Reclaimed or Overdue.
func (e Event) Stuck(now time.Time, overdueAfter time.Duration, wait DueWait) bool {
	return e.Reclaimed() || e.Overdue(now, overdueAfter, wait)
}

// Reclaimed reports whether a pending event was claimed stuckClaims times
// or more since its last outcome.
func (e Event) Reclaimed() bool {
	return e.Status.Pending() && e.Claims >= stuckClaims
}

// Overdue reports whether a pending event has been due for longer than
// overdueAfter at now, with nothing (wait) to explain it.
func (e Event) Overdue(now time.Time, overdueAfter time.Duration, wait DueWait) bool {
	return wait == WaitUnexplained && e.Status.Pending() && now.Sub(e.NextRetryAt) > overdueAfter
}

// Held reports whether a pending event is due at now while c holds
// delivery: it goes out once delivery is resumed, not before.
func (e Event) Held(now time.Time, c DeliveryControl) bool {
	return c.Held() && e.Status.Pending() && !e.NextRetryAt.After(now)
}

// CountStuck returns how many pending events are stuck (see Event.Stuck).
func (s *Store) CountStuck(ctx context.Context, overdueAfter time.Duration, wait DueWait) (int64, error) {
	var n int64
	if wait != WaitUnexplained {
		err := s.db.QueryRow(ctx, `SELECT count(*) FROM webhook_events WHERE `+pending+` AND `+reclaimedSQL).Scan(&n)
		if err != nil {
			return 0, fmt.Errorf("count stuck events: %w", err)
		}
		return n, nil
	}
	// A union of two index scans, not one OR over the pending rows: the
	// overdue ones by the due index, the reclaimed ones by their own.
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
