package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/hookd/hookd/internal/store"
	"github.com/jackc/pgx/v5"
)

// The seed's API: the single-event functions of the seed's webhook_events
// module, each with the seed's meaning. hookd itself calls none of them; it
// does the same work in batches, under each event's lease, in the short
// transactions of the other files:
//
//	the seed's              here            what production calls instead
//	try_lock_event          TryLockEvent    Exchange (receive.go), ClaimAttempts (retries.go)
//	mark_event_processed    MarkProcessed   SettleDeliveries (receive.go), SettleAndStart (retries.go)
//	insert_failed_event     Enqueue         SettleDeliveries (receive.go)
//	get_retryable_events    ClaimDue        ClaimAttempts (retries.go)
//	mark_processed          Resolve         SettleAndStart (retries.go)
//	schedule_retry          ScheduleRetry   SettleAndStart (retries.go)
//	get_dead_events         DeadEvents      Events (events.go)
//	is_event_processed      IsProcessed     Exchange's state read (receive.go), Locate (search.go)
//
// The seed's other functions are production's own:
// prune_processed_events is PruneProcessed (markers.go), retry_dead_event
// RetryDead (events.go).
//
// The seed's contract tests (seed_test.go) run against what production
// calls, not against these:
//
//	contract test                                        runs against
//	TestContract_ProcessedEventIsFoundProcessed          Exchange, SettleDeliveries, IsProcessed
//	TestContract_RedeliveriesLeaveOneMarker              Exchange, SettleDeliveries
//	TestContract_ConcurrentDuplicatesLeaveOneMarker      Exchange, SettleDeliveries
//	TestContract_LeaseTurnsASecondDeliveryAwayAtOnce     Exchange, SettleDeliveries
//	TestContract_PruneRespectsTheRetentionBoundary       PruneProcessed, IsProcessed, Exchange
//	TestContract_ClaimDefersRowsToTheLeaseExpiry         ClaimAttempts
//	TestContract_ConcurrentClaimsNeverClaimARowTwice     ClaimAttempts
//	TestContract_ClaimsExcludeFutureDeadAndExhaustedRows ClaimAttempts
//	TestContract_FailedAttemptRetriesAfterTheBackoff     SettleAndStart, with RetryDelay (policy.go)
//	TestContract_FifthFailureMakesTheEventDead           SettleAndStart, ClaimAttempts, Events
//	TestContract_RetryDeadResurrectsOnlyDeadRows         RetryDead, ClaimAttempts
//	TestContract_DoneAttemptRemovesTheRowAndWritesTheMarker, TestContract_DoneAttemptIsAtomic
//	                                                     SettleAndStart
//
// These functions stay for the tests, here and in other packages, that put
// rows and leases in place with them; seed_api_test.go tests them, so each
// keeps the meaning those tests rely on.

// DefaultClaimBatch is the seed's batch size for ClaimDue.
const DefaultClaimBatch = 10

// DefaultLeaseFor is the processor time TryLockEvent leases an event for.
const DefaultLeaseFor = 10 * time.Second

// Lease is a held lease on one event, as TryLockEvent returns it.
type Lease struct {
	store   *Store
	EventID string
	Owner   uuid.UUID
	// Deadline is when the holder's processor must have ended, on this
	// machine's clock; the lease expires LeaseMargin after it at the
	// earliest.
	Deadline time.Time
}

// TryLockEvent takes the lease of eventID for DefaultLeaseFor without
// waiting, or returns ErrEventLocked when another holder has a live one.
// It is the seed's per-event lock: a second delivery of the event is turned
// away at once (the receiver answers 503 and Stripe redelivers) instead of
// parking a connection until the first finishes. Release gives it back.
func (s *Store) TryLockEvent(ctx context.Context, eventID string) (*Lease, error) {
	return s.TryLease(ctx, eventID, PathInline, DefaultLeaseFor)
}

// Release gives the lease back without an outcome, so the event may be
// taken at once. It returns ErrLeaseLost when the lease was no longer
// this holder's.
func (l *Lease) Release(ctx context.Context) error {
	n, err := l.store.releaseLeases(ctx, []string{l.EventID}, []uuid.UUID{l.Owner})
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrLeaseLost
	}
	return nil
}

// MarkProcessed writes the dedup marker for eventID. Call it only after the
// event's side effects are durable. It is idempotent: a concurrent duplicate
// or a redelivery leaves the one existing row as it is. It is the seed's
// call: the receiver and the retry loop write markers with their outcomes,
// under the event's lease (SettleDeliveries, SettleAndStart).
func (s *Store) MarkProcessed(ctx context.Context, eventID string) error {
	if _, err := s.db.Exec(ctx, `INSERT INTO processed_webhook_events (event_id) VALUES ($1) ON CONFLICT DO NOTHING`,
		eventID); err != nil {
		return fmt.Errorf("write dedup marker: %w", err)
	}
	return nil
}

// Enqueue puts a failed event on the retry queue, due after RetryDelay(0)
// (one minute, the seed's column default), and
// reports whether it inserted a row: an event already on the queue (same
// source and event id) keeps its one row, whatever its status. It is the
// seed's call: the receiver queues events with their outcomes, under the
// event's lease (SettleDeliveries).
func (s *Store) Enqueue(ctx context.Context, e FailedEvent) (inserted bool, err error) {
	var id string
	err = s.db.QueryRow(ctx, `
		INSERT INTO webhook_events (source, event_id, event_type, payload, signature, last_error, last_attempt_at, next_retry_at)
		VALUES ($1, $2, $3, $4, NULLIF($5, ''), $6, now(), now() + make_interval(secs => $7))
		ON CONFLICT (source, event_id) DO NOTHING
		RETURNING event_id`,
		e.Source, e.EventID, e.EventType, string(e.Payload), e.Signature, e.Error, s.RetryDelay(0).Seconds()).Scan(&id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("enqueue event: %w", err)
	}
	return true, nil
}

// ClaimDue claims up to batchSize due events (failed or retrying, attempts
// left, next_retry_at passed), oldest due first, and defers each by
// claimWindow in the same statement.
//
// It claims rather than reads: the rows are selected FOR UPDATE SKIP LOCKED
// and their next_retry_at pushed out, so an overlapping tick or another
// replica skips them instead of running the processor a second time. The
// caller then resolves each claimed event (Resolve) or reschedules it
// (ScheduleRetry); the retry loop does both for a batch, under leases
// (ClaimAttempts, SettleAndStart). A worker that dies in between leaves its events due again
// once the window has passed: processing is at least once, never lost.
func (s *Store) ClaimDue(ctx context.Context, batchSize int, claimWindow time.Duration) ([]Event, error) {
	// The claimed ids are collected into an array first, so the UPDATE
	// finds each row by primary key; joining a CTE instead let the planner
	// hash the whole table on every claim.
	events, err := store.QueryAll[Event](ctx, s.db, `
		UPDATE webhook_events
		SET next_retry_at = now() + make_interval(secs => $2), claims = claims + 1
		WHERE id = ANY (ARRAY(
			SELECT id FROM webhook_events
			WHERE `+pending+`
			  AND attempts < $3
			  AND next_retry_at <= now()
			ORDER BY next_retry_at
			LIMIT $1
			FOR UPDATE SKIP LOCKED))
		RETURNING `+eventColumns,
		batchSize, claimWindow.Seconds(), MaxAttempts)
	if err != nil {
		return nil, fmt.Errorf("claim due events: %w", err)
	}
	return events, nil
}

// Resolve finishes a queued event that was processed successfully: it deletes
// the queue row and writes the event's dedup marker in one statement, so
// there is never a moment, nor a crash, with neither (the event would be
// processed again) or both. It returns ErrNotFound when the row is gone.
//
// It is the seed's call, and takes no lease: the retry loop settles its
// claims with SettleAndStart, which writes the same under the lease.
func (s *Store) Resolve(ctx context.Context, id uuid.UUID) error {
	var deleted int
	err := s.db.QueryRow(ctx, `
		WITH resolved AS (DELETE FROM webhook_events WHERE id = $1 RETURNING event_id),
		marked AS (
			INSERT INTO processed_webhook_events (event_id) SELECT event_id FROM resolved
			ON CONFLICT DO NOTHING
		)
		SELECT count(*) FROM resolved`, id).Scan(&deleted)
	if err != nil {
		return fmt.Errorf("resolve event %s: %w", id, err)
	}
	if deleted == 0 {
		return ErrNotFound
	}
	return nil
}

// ScheduleRetry records a failed retry: the event now has attempts failed
// retries. Below MaxAttempts it becomes retrying, due after s.RetryDelay; at
// MaxAttempts it becomes dead. It returns the new status, or ErrNotFound.
//
// It is the seed's call, and takes no lease: the retry loop settles its
// claims with SettleAndStart.
func (s *Store) ScheduleRetry(ctx context.Context, id uuid.UUID, attempts int, lastError string) (Status, error) {
	status, wait := s.afterFailure(attempts)
	tag, err := s.db.Exec(ctx, `
		UPDATE webhook_events
		SET status = $2, attempts = $3, last_error = $4, last_attempt_at = now(), manual_retry = false, claims = 0,
		    payload = `+erasedPayloadSQL("webhook_events", "$2 = 'dead'")+`,
		    next_retry_at = coalesce(now() + make_interval(secs => $5), next_retry_at)
		WHERE id = $1`, id, status, attempts, lastError, wait)
	if err != nil {
		return "", fmt.Errorf("schedule retry of %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return "", ErrNotFound
	}
	return status, nil
}

// DeadEvents returns a page of dead events, newest first, with their total.
func (s *Store) DeadEvents(ctx context.Context, limit, offset int) (EventPage, error) {
	return s.Events(ctx, EventFilter{Status: StatusDead, Limit: limit, Offset: offset})
}

// IsProcessed reports whether eventID has a dedup marker, i.e. was processed
// successfully before. It only short-circuits redeliveries: the marker is
// written after processing succeeds, never before, so a crash mid-processing
// leaves no marker and the event is processed again on redelivery.
func (s *Store) IsProcessed(ctx context.Context, eventID string) (bool, error) {
	var exists bool
	err := s.db.QueryRow(ctx, `SELECT `+markedSQL("$1"), eventID).Scan(&exists)
	if err != nil {
		return false, fmt.Errorf("read dedup marker: %w", err)
	}
	return exists, nil
}
