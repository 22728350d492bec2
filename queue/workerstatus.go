package queue

import (
	"context"
	"fmt"
	"time"
)

// WorkerStatus is what the background loops last reported, across replicas.
type WorkerStatus struct {
	// RetrierTick is the last time any retry loop looked for due events;
	// nil when none ever ran.
	RetrierTick *time.Time
	// RetrierHolds reports whether some retry loop holds live leases of
	// events it claimed, or retries one at a time because every retry of
	// its destination failed (DestinationState.RetriesNarrowed): it is
	// taking events now, and the due ones behind them wait their turn (see
	// DueWait).
	RetrierHolds bool
	// PrunerRun is the last time markers were pruned, by the pruner or by a
	// person, and PrunerRemoved how many that removed.
	PrunerRun     *time.Time
	PrunerRemoved int64
	// Now is the database's clock when this was read, to compute ages.
	Now time.Time
}

// RecordRetrierTick notes that a retry loop just looked for due events.
func (s *Store) RecordRetrierTick(ctx context.Context) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO worker_status (component, last_run_at) VALUES ('retrier', now())
		ON CONFLICT (component) DO UPDATE SET last_run_at = excluded.last_run_at`)
	if err != nil {
		return fmt.Errorf("record retrier tick: %w", err)
	}
	return nil
}

// RecordPrune notes that a prune just removed removed markers.
func (s *Store) RecordPrune(ctx context.Context, removed int64) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO worker_status (component, last_run_at, last_removed) VALUES ('pruner', now(), $1)
		ON CONFLICT (component) DO UPDATE
		SET last_run_at = excluded.last_run_at, last_removed = excluded.last_removed`, removed)
	if err != nil {
		return fmt.Errorf("record prune: %w", err)
	}
	return nil
}

// WorkerStatus returns what the retry loops and pruners last reported.
func (s *Store) WorkerStatus(ctx context.Context) (WorkerStatus, error) {
	var ws WorkerStatus
	var removed *int64
	err := s.db.QueryRow(ctx, `
		SELECT (SELECT last_run_at FROM worker_status WHERE component = 'retrier'),
		       (SELECT last_run_at FROM worker_status WHERE component = 'pruner'),
		       (SELECT last_removed FROM worker_status WHERE component = 'pruner'),
		       EXISTS (SELECT 1 FROM webhook_leases l WHERE path IN ($1, $2) AND `+liveLeaseSQL("l")+`)
		         OR EXISTS (SELECT 1 FROM destinations WHERE retries_narrowed_at > now() - make_interval(secs => $3)),
		       now()`, string(PathRetry), string(PathManual), OverdueAfter.Seconds()).Scan(&ws.RetrierTick, &ws.PrunerRun, &removed, &ws.RetrierHolds, &ws.Now)
	if err != nil {
		return WorkerStatus{}, fmt.Errorf("read worker status: %w", err)
	}
	if removed != nil {
		ws.PrunerRemoved = *removed
	}
	return ws, nil
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
