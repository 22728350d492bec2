// Package alerts holds the state of hookd's alert conditions, which the
// replicas share: whether each condition is active and since when, and what
// Stripe last said of each endpoint (watch.go). A condition is changed only
// inside a transaction of the queue (queue.Tx's PgxTx), on locked rows, so
// that however many replicas check the conditions, each change is seen, and
// announced, once. Which dead events were announced is a column of the
// queue's own rows, taken in that same transaction by queue.Tx's
// TakeNewlyDead: this package writes only its own two tables.
package alerts

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/store"
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
	// HeldKeys: a dead event holds a key of an ordered destination.
	HeldKeys Condition = "held_keys"
)

// State is what the replicas agree on about one condition.
type State struct {
	Condition Condition `db:"condition"`
	Active    bool      `db:"active"`
	// Since is when the condition started, LastSeen when it was last seen
	// to hold; both nil while it is not active.
	Since    *time.Time `db:"since"`
	LastSeen *time.Time `db:"last_seen_at"`
	// Count is, for Dead, how many events went dead since it started,
	// for GenerationFailures how many notices arrived, and for HeldKeys
	// how many keys are held.
	Count int64 `db:"count"`
	// CreatedAt is when the condition was first checked.
	CreatedAt time.Time `db:"created_at"`
}

// Lock locks, in tx, the alert conditions no other transaction holds and
// returns them with the database's clock. A condition locked elsewhere is
// being checked by another replica right now and is left out, so each
// change of a condition is seen, and announced, by one replica only.
func Lock(ctx context.Context, tx pgx.Tx) ([]State, time.Time, error) {
	states, err := store.QueryAll[State](ctx, tx, `
		SELECT condition, active, since, last_seen_at, count, created_at FROM alert_conditions
		ORDER BY condition
		FOR UPDATE SKIP LOCKED`)
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
