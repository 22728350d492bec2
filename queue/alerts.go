package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// AlertCondition names one condition hookd alerts on.
type AlertCondition string

const (
	// AlertDead: events went dead.
	AlertDead AlertCondition = "dead"
	// AlertPendingAge: the oldest pending event is older than the limit.
	AlertPendingAge AlertCondition = "pending_age"
	// AlertRetrierStalled: no retry loop has looked for due events lately.
	AlertRetrierStalled AlertCondition = "retrier_stalled"
	// AlertSignatureFailures: many deliveries failed signature checks.
	AlertSignatureFailures AlertCondition = "signature_failures"
)

// AlertState is what the replicas agree on about one condition.
type AlertState struct {
	Condition AlertCondition `db:"condition"`
	Active    bool           `db:"active"`
	// Since is when the condition started, LastSeen when it was last seen
	// to hold; both nil while it is not active.
	Since    *time.Time `db:"since"`
	LastSeen *time.Time `db:"last_seen_at"`
	// Count is, for AlertDead, how many events went dead since it started.
	Count int64 `db:"count"`
}

// LockAlertStates locks the alert conditions no other transaction holds and
// returns them with the database's clock. A condition locked elsewhere is
// being checked by another replica right now and is left out, so each
// change of a condition is seen, and announced, by one replica only.
func (t *Tx) LockAlertStates(ctx context.Context) ([]AlertState, time.Time, error) {
	rows, err := t.db.Query(ctx, `
		SELECT condition, active, since, last_seen_at, count FROM alert_conditions
		ORDER BY condition
		FOR UPDATE SKIP LOCKED`)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("lock alert conditions: %w", err)
	}
	states, err := pgx.CollectRows(rows, pgx.RowToStructByName[AlertState])
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("lock alert conditions: %w", err)
	}
	var now time.Time
	if err := t.db.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return nil, time.Time{}, fmt.Errorf("read the clock: %w", err)
	}
	return states, now, nil
}

// SetAlertState stores st, whose row the transaction locked with
// LockAlertStates.
func (t *Tx) SetAlertState(ctx context.Context, st AlertState) error {
	_, err := t.db.Exec(ctx, `
		UPDATE alert_conditions SET active = $2, since = $3, last_seen_at = $4, count = $5
		WHERE condition = $1`, st.Condition, st.Active, st.Since, st.LastSeen, st.Count)
	if err != nil {
		return fmt.Errorf("store alert condition %s: %w", st.Condition, err)
	}
	return nil
}

// DeadEvent is an event that went dead, as an alert names it.
type DeadEvent struct {
	EventID   string    `db:"event_id"`
	EventType string    `db:"event_type"`
	DiedAt    time.Time `db:"died_at"`
}

// TakeNewlyDead marks the dead events not announced yet as announced and
// returns them, oldest death first. Each death is returned by exactly one
// call, whichever replica makes it, because the mark is a row update under
// the row's lock. A row another transaction holds (a person sending it
// back, say) is skipped rather than waited for, so the check never waits
// on, or deadlocks with, a bulk retry; it is taken at the next check if it
// is still dead.
//
// The mark is the statement's clock_timestamp(), not now(): a death's
// last_attempt_at is the start of the retry loop's transaction, which may
// come after this transaction's start, and a mark older than the death
// would announce it again.
func (t *Tx) TakeNewlyDead(ctx context.Context) ([]DeadEvent, error) {
	rows, err := t.db.Query(ctx, `
		WITH taken AS (
			UPDATE webhook_events SET dead_alerted_at = clock_timestamp()
			WHERE id = ANY (ARRAY(
				SELECT id FROM webhook_events
				WHERE status = 'dead' AND (dead_alerted_at IS NULL OR dead_alerted_at < last_attempt_at)
				FOR UPDATE SKIP LOCKED))
			RETURNING event_id, event_type, coalesce(last_attempt_at, created_at) AS died_at
		)
		SELECT event_id, event_type, died_at FROM taken ORDER BY died_at, event_id`)
	if err != nil {
		return nil, fmt.Errorf("take newly dead events: %w", err)
	}
	dead, err := pgx.CollectRows(rows, pgx.RowToStructByName[DeadEvent])
	if err != nil {
		return nil, fmt.Errorf("take newly dead events: %w", err)
	}
	return dead, nil
}

// PendingEvent is the oldest pending event, as an alert names it.
type PendingEvent struct {
	EventID    string    `db:"event_id"`
	EventType  string    `db:"event_type"`
	ReceivedAt time.Time `db:"created_at"`
}

// OldestPending returns the failed or retrying event received first, and
// how many are pending; nil when none is.
func (s *Store) OldestPending(ctx context.Context) (*PendingEvent, int64, error) {
	rows, err := s.db.Query(ctx, `
		SELECT event_id, event_type, created_at FROM webhook_events
		WHERE `+pending+`
		ORDER BY created_at LIMIT 1`)
	if err != nil {
		return nil, 0, fmt.Errorf("find the oldest pending event: %w", err)
	}
	oldest, err := pgx.CollectRows(rows, pgx.RowToStructByName[PendingEvent])
	if err != nil {
		return nil, 0, fmt.Errorf("find the oldest pending event: %w", err)
	}
	if len(oldest) == 0 {
		return nil, 0, nil
	}
	n, err := s.CountEvents(ctx, EventFilter{Status: StatusPending})
	if err != nil {
		return nil, 0, err
	}
	return &oldest[0], n, nil
}
