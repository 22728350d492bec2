package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// AttemptPath says who ran a processing attempt.
type AttemptPath string

const (
	PathInline AttemptPath = "inline" // the receiver, while Stripe waited
	PathRetry  AttemptPath = "retry"  // the retry loop, on its schedule
	PathManual AttemptPath = "manual" // the retry loop, after a person asked
	// PathReconcile is an event Stripe's delivery never brought, recovered
	// from Stripe's Events API by reconciliation.
	PathReconcile AttemptPath = "reconcile"
)

// Attempt is one processing attempt of an event.
type Attempt struct {
	Source      string        `db:"source"`
	EventID     string        `db:"event_id"`
	AttemptedAt time.Time     `db:"attempted_at"`
	Duration    time.Duration `db:"-"`
	DurationMS  float64       `db:"duration_ms"`
	Succeeded   bool          `db:"-"`
	Outcome     string        `db:"outcome"`
	HTTPStatus  *int          `db:"http_status"`
	Error       *string       `db:"error"`
	Path        AttemptPath   `db:"path"`
	// Number is the attempt's number: 0 inline, then the retry number.
	Number int `db:"attempt"`
}

// NewAttempt describes an attempt for RecordAttempt.
type NewAttempt struct {
	Source     string
	EventID    string
	Duration   time.Duration
	Succeeded  bool
	HTTPStatus int // 0: none (the processor made no HTTP call or got no answer)
	Error      string
	Path       AttemptPath
	Number     int
}

// RecordAttempt appends an attempt to the event's history. Call it on the Tx
// that writes the attempt's outcome, so history and state commit together.
func (s *Store) RecordAttempt(ctx context.Context, a NewAttempt) error {
	var c attemptColumns
	c.add(a)
	if _, err := s.db.Exec(ctx, recordAttemptSQL, c.args()...); err != nil {
		return fmt.Errorf("record attempt of %s: %w", a.EventID, err)
	}
	return nil
}

var recordAttemptSQL = insertAttemptsSQL(1)

// Attempts returns the event's attempts, oldest first.
func (s *Store) Attempts(ctx context.Context, source, eventID string) ([]Attempt, error) {
	rows, err := s.db.Query(ctx, `
		SELECT source, event_id, attempted_at, duration_ms, outcome, http_status, error, path, attempt
		FROM webhook_attempts
		WHERE source = $1 AND event_id = $2
		ORDER BY attempted_at, id`, source, eventID)
	if err != nil {
		return nil, fmt.Errorf("read attempts of %s: %w", eventID, err)
	}
	attempts, err := pgx.CollectRows(rows, pgx.RowToStructByName[Attempt])
	if err != nil {
		return nil, fmt.Errorf("read attempts of %s: %w", eventID, err)
	}
	for i := range attempts {
		a := &attempts[i]
		a.Duration = time.Duration(a.DurationMS * float64(time.Millisecond))
		a.Succeeded = a.Outcome == "succeeded"
	}
	return attempts, nil
}

// WorkerStatus is what the background loops last reported, across replicas.
type WorkerStatus struct {
	// RetrierTick is the last time any retry loop looked for due events;
	// nil when none ever ran.
	RetrierTick *time.Time
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
		       now()`).Scan(&ws.RetrierTick, &ws.PrunerRun, &removed, &ws.Now)
	if err != nil {
		return WorkerStatus{}, fmt.Errorf("read worker status: %w", err)
	}
	if removed != nil {
		ws.PrunerRemoved = *removed
	}
	return ws, nil
}
