package queuetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/queue"
)

// The seed's API: the single-event functions of the seed's webhook_events
// module, each with the seed's meaning and name, kept here for the tests
// that put rows and leases in place with them. hookd itself calls none of
// them; it does the same work in batches, under each event's lease, in the
// short transactions of package queue:
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
// prune_processed_events is queue.Store.PruneProcessed, retry_dead_event
// queue.Store.RetryDead. The seed's contract tests (queue/seed_test.go)
// run against what production calls, not against these; seed_test.go here
// tests these, so each keeps the meaning the tests that use it rely on.

// DefaultClaimBatch is the seed's batch size for ClaimDue.
const DefaultClaimBatch = 10

// DefaultLeaseFor is the processor time TryLockEvent leases an event for.
const DefaultLeaseFor = 10 * time.Second

// DefaultClaimWindow is how far the seed's ClaimDue defers a claimed
// event: a worker that dies between claim and resolve leaves the event due
// again after this long. Production's claims defer an event to its lease's
// expiry instead (queue.Store.ClaimAttempts).
const DefaultClaimWindow = 2 * time.Minute

// Seed is a Store with the seed's single-event functions, for tests.
type Seed struct{ *queue.Store }

// NewSeed returns the seed's API over s.
func NewSeed(s *queue.Store) Seed { return Seed{Store: s} }

// TryLockEvent takes the lease of eventID for DefaultLeaseFor without
// waiting, or returns queue.ErrEventLocked when another holder has a live
// one. It is the seed's per-event lock: a second delivery of the event is
// turned away at once instead of parking a connection until the first
// finishes. Lease.Release gives it back.
func (s Seed) TryLockEvent(ctx context.Context, eventID string) (*queue.Lease, error) {
	return s.TryLease(ctx, eventID, queue.PathInline, DefaultLeaseFor)
}

// MarkProcessed writes the dedup marker for eventID. It is idempotent: a
// concurrent duplicate or a redelivery leaves the one existing row as it is.
func (s Seed) MarkProcessed(ctx context.Context, eventID string) error {
	if _, err := s.DB().Exec(ctx, `INSERT INTO processed_webhook_events (event_id) VALUES ($1) ON CONFLICT DO NOTHING`,
		eventID); err != nil {
		return fmt.Errorf("write dedup marker: %w", err)
	}
	return nil
}

// Enqueue puts a failed event on the retry queue, due after RetryDelay(0)
// (one minute, the seed's column default), and reports whether it inserted
// a row: an event already on the queue (same source and event id) keeps its
// one row, whatever its status.
func (s Seed) Enqueue(ctx context.Context, e queue.FailedEvent) (inserted bool, err error) {
	var id string
	err = s.DB().QueryRow(ctx, `
		INSERT INTO webhook_events (source, event_id, event_type, payload, signature, last_error, last_attempt_at, next_retry_at,
		                            destination)
		VALUES ($1, $2, $3, $4, NULLIF($5, ''), $6, now(), now() + make_interval(secs => $7), $8)
		ON CONFLICT (source, event_id, destination) DO NOTHING
		RETURNING event_id`,
		e.Source, e.EventID, e.EventType, string(e.Payload), e.Signature, e.Error, s.RetryDelay(0).Seconds(),
		cmp.Or(e.Destination, queue.DefaultDestination)).Scan(&id)
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
// claimWindow in the same statement, so that an overlapping claim skips
// them. The caller then resolves each (Resolve) or reschedules it
// (ScheduleRetry); a worker that dies in between leaves its events due
// again once the window has passed.
func (s Seed) ClaimDue(ctx context.Context, batchSize int, claimWindow time.Duration) ([]queue.Event, error) {
	rows, err := s.DB().Query(ctx, `
		UPDATE webhook_events
		SET next_retry_at = now() + make_interval(secs => $2), claims = claims + 1
		WHERE id = ANY (ARRAY(
			SELECT id FROM webhook_events
			WHERE status IN ('failed', 'retrying')
			  AND attempts < $3
			  AND next_retry_at <= now()
			ORDER BY next_retry_at
			LIMIT $1
			FOR UPDATE SKIP LOCKED))
		RETURNING id`,
		batchSize, claimWindow.Seconds(), queue.MaxAttempts)
	if err != nil {
		return nil, fmt.Errorf("claim due events: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("claim due events: %w", err)
	}
	events := make([]queue.Event, 0, len(ids))
	for _, id := range ids {
		e, err := s.Event(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("read claimed event: %w", err)
		}
		events = append(events, e)
	}
	return events, nil
}

// Resolve finishes a queued event that was processed successfully: it
// deletes the queue row and writes the event's dedup marker in one
// statement, so there is never a moment, nor a crash, with neither or
// both. It returns queue.ErrNotFound when the row is gone.
func (s Seed) Resolve(ctx context.Context, id uuid.UUID) error {
	var deleted int
	err := s.DB().QueryRow(ctx, `
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
		return queue.ErrNotFound
	}
	return nil
}

// ScheduleRetry records a failed retry: the event now has attempts failed
// retries. Below queue.MaxAttempts it becomes retrying, due after
// RetryDelay(attempts); at queue.MaxAttempts it becomes dead, and loses its
// payload when its customer's payloads were erased. It returns the new
// status, or queue.ErrNotFound.
func (s Seed) ScheduleRetry(ctx context.Context, id uuid.UUID, attempts int, lastError string) (queue.Status, error) {
	status, delay := queue.StatusRetrying, s.RetryDelay(attempts).Seconds()
	wait := &delay
	if attempts >= queue.MaxAttempts {
		status, wait = queue.StatusDead, nil
	}
	tag, err := s.DB().Exec(ctx, `
		UPDATE webhook_events
		SET status = $2, attempts = $3, last_error = $4, last_attempt_at = now(), manual_retry = false, claims = 0,
		    payload = CASE WHEN $2 = 'dead' AND payload_erased_at IS NOT NULL THEN '' ELSE payload END,
		    next_retry_at = coalesce(now() + make_interval(secs => $5), next_retry_at)
		WHERE id = $1`, id, status, attempts, lastError, wait)
	if err != nil {
		return "", fmt.Errorf("schedule retry of %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return "", queue.ErrNotFound
	}
	return status, nil
}

// DeadEvents returns a page of dead events, newest first, with their total.
func (s Seed) DeadEvents(ctx context.Context, limit, offset int) (queue.EventPage, error) {
	return s.Events(ctx, queue.EventFilter{Status: queue.StatusDead, Limit: limit, Offset: offset})
}

// IsProcessed reports whether eventID has a dedup marker, i.e. was
// processed successfully before.
func (s Seed) IsProcessed(ctx context.Context, eventID string) (bool, error) {
	var exists bool
	err := s.DB().QueryRow(ctx, `SELECT (SELECT true FROM processed_webhook_events m WHERE m.event_id = $1) IS NOT NULL`,
		eventID).Scan(&exists)
	if err != nil {
		return false, fmt.Errorf("read dedup marker: %w", err)
	}
	return exists, nil
}
