// Package alerts holds the state of hookd's alert conditions, which the
// replicas share: whether each condition is active, since when, and which
// dead events were announced. It is changed only inside a transaction of
// the queue (queue.Tx's PgxTx), on locked rows, so that however many
// replicas check the conditions, each change is seen, and announced, once.
package alerts

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/queue"
)

// Condition names one condition hookd alerts on.
type Condition string

const (
	// Dead: events went dead.
	Dead Condition = "dead"
	// PendingAge: the oldest pending event is older than the limit.
	PendingAge Condition = "pending_age"
	// RetrierStalled: no retry loop has looked for due events lately.
	RetrierStalled Condition = "retrier_stalled"
	// SignatureFailures: many deliveries failed signature checks.
	SignatureFailures Condition = "signature_failures"
	// BreakerOpen: the circuit breaker holds delivery, the app looks down.
	BreakerOpen Condition = "breaker_open"
	// GenerationFailures: Stripe said it failed to generate events.
	GenerationFailures Condition = "generation_failures"
)

// State is what the replicas agree on about one condition.
type State struct {
	Condition Condition `db:"condition"`
	Active    bool      `db:"active"`
	// Since is when the condition started, LastSeen when it was last seen
	// to hold; both nil while it is not active.
	Since    *time.Time `db:"since"`
	LastSeen *time.Time `db:"last_seen_at"`
	// Count is, for Dead, how many events went dead since it started, and
	// for GenerationFailures how many notices arrived.
	Count int64 `db:"count"`
	// CreatedAt is when the condition was first checked.
	CreatedAt time.Time `db:"created_at"`
}

// Lock locks, in tx, the alert conditions no other transaction holds and
// returns them with the database's clock. A condition locked elsewhere is
// being checked by another replica right now and is left out, so each
// change of a condition is seen, and announced, by one replica only.
func Lock(ctx context.Context, tx pgx.Tx) ([]State, time.Time, error) {
	rows, err := tx.Query(ctx, `
		SELECT condition, active, since, last_seen_at, count, created_at FROM alert_conditions
		ORDER BY condition
		FOR UPDATE SKIP LOCKED`)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("lock alert conditions: %w", err)
	}
	states, err := pgx.CollectRows(rows, pgx.RowToStructByName[State])
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("lock alert conditions: %w", err)
	}
	var now time.Time
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return nil, time.Time{}, fmt.Errorf("read the clock: %w", err)
	}
	return states, now, nil
}

// Set stores st, whose row tx locked with Lock.
func Set(ctx context.Context, tx pgx.Tx, st State) error {
	_, err := tx.Exec(ctx, `
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

// TakeNewlyDead marks, in tx, the dead events not announced yet as announced and
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
func TakeNewlyDead(ctx context.Context, tx pgx.Tx) ([]DeadEvent, error) {
	rows, err := tx.Query(ctx, `
		WITH taken AS (
			UPDATE webhook_events SET dead_alerted_at = clock_timestamp()
			WHERE id = ANY (ARRAY(
				SELECT id FROM webhook_events
				WHERE status = '`+string(queue.StatusDead)+`' AND (dead_alerted_at IS NULL OR dead_alerted_at < last_attempt_at)
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
