package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// StatusPending is an EventFilter status that selects both pending
// statuses, failed and retrying, for the dashboard's list of everything
// waiting for a retry. No row has it.
const StatusPending Status = "pending"

// CountEvents returns how many queue rows match f, ignoring its Limit and
// Offset: what a bulk action on f would touch.
func (s *Store) CountEvents(ctx context.Context, f EventFilter) (int64, error) {
	where, args := f.where()
	var n int64
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM webhook_events WHERE `+where, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count events: %w", err)
	}
	return n, nil
}

// EventByEventID returns a queue row of the Stripe event eventID, in any
// status, or ErrNotFound. An event with deliveries to several
// destinations on the queue has a row for each: this is the one to the
// first destination by name, as the event log shows it (DeliveriesOf has
// them all).
func (s *Store) EventByEventID(ctx context.Context, eventID string) (Event, error) {
	return oneRow[Event](ctx, s.db, "find event "+eventID,
		`SELECT `+eventColumns+` FROM webhook_events WHERE source = $1 AND event_id = $2 ORDER BY destination LIMIT 1`,
		SourceStripe, eventID)
}

// RetriedDead is what RetryDeadMatching did: how many events it sent back
// to the queue, and how many it left dead because their payloads were
// erased (Event.PayloadErased).
type RetriedDead struct {
	Queued, Erased int64
}

// RetryDeadMatching does what RetryDead does to every dead event matching f
// (whose Status it ignores, as only dead events can be sent back), and
// says how many it sent back and how many it skipped, erased.
func (s *Store) RetryDeadMatching(ctx context.Context, f EventFilter) (RetriedDead, error) {
	f.Status = StatusDead
	where, args := f.where()
	var r RetriedDead
	// The count of erased rows reads the statement's snapshot, as the
	// update does: no row is counted both ways.
	err := s.db.QueryRow(ctx, `
		WITH sent AS (`+sendBackSQL+where+` AND NOT `+payloadErasedSQL+` RETURNING 1)
		SELECT (SELECT count(*) FROM sent),
		       (SELECT count(*) FROM webhook_events WHERE `+where+` AND `+payloadErasedSQL+`)`, args...).
		Scan(&r.Queued, &r.Erased)
	if err != nil {
		return RetriedDead{}, fmt.Errorf("retry dead events: %w", err)
	}
	return r, nil
}

// Hastening is what RetryNow did to an event.
type Hastening int

const (
	// NotPending: the event was neither failed nor retrying, so nothing
	// was changed.
	NotPending Hastening = iota
	// DueNow: the event is due at once.
	DueNow
	// DueAfterAttempt: an attempt of the event was running, so the event
	// was only marked: it is due the moment that attempt ends, if it fails.
	DueAfterAttempt
)

// RetryNow makes a pending (failed or retrying) event due at once, its next
// attempt recorded as manual, and says which it did. It changes nothing
// when the row is not pending; its attempts are left alone, so the backoff
// schedule carries on from where it was.
//
// An event in flight (its lease is live: an attempt is running) is not
// made due, which would only have every claim skip it until the attempt
// ends; it is marked, and the attempt's failure makes it due at once
// (SettleAndStart), never a claim window later. The answer comes from the
// statement that made the change, so it says what was done even when the
// attempt ends at that very moment.
func (s *Store) RetryNow(ctx context.Context, id uuid.UUID) (Hastening, error) {
	var inFlight bool
	err := s.db.QueryRow(ctx, hastenSQL+`id = $1 AND `+pending+` RETURNING `+leaseLiveSQL, id).Scan(&inFlight)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return NotPending, nil
	case err != nil:
		return NotPending, fmt.Errorf("retry event %s now: %w", id, err)
	case inFlight:
		return DueAfterAttempt, nil
	}
	return DueNow, nil
}

// leaseLiveSQL is true for a row e of webhook_events whose event has a
// live lease: an attempt of it is running now.
var leaseLiveSQL = `EXISTS (SELECT 1 FROM webhook_leases l WHERE l.event_id = e.event_id AND ` + liveLeaseSQL("l") + `)`

// hastenSQL makes the rows its WHERE clause, appended, selects due at once,
// as RetryNow describes. RetryNow reads the lease again to return it; the
// two reads are one statement's, on one snapshot, so they see the same
// lease.
var hastenSQL = `
	UPDATE webhook_events e
	SET manual_retry = true,
	    next_retry_at = CASE WHEN ` + leaseLiveSQL + ` THEN e.next_retry_at ELSE now() END
	WHERE `

// Hastened is what RetryNowMatching did: how many events it made due at
// once, and how many it only marked, because an attempt of theirs was
// running (each is due the moment that attempt ends, if it fails).
type Hastened struct {
	DueNow, DueAfterAttempt int64
}

// Total is how many events were hastened, either way.
func (h Hastened) Total() int64 { return h.DueNow + h.DueAfterAttempt }

// RetryNowMatching does what RetryNow does to every pending event matching
// f (whose Status it ignores, as only pending events can be hastened), and
// says how many it made due now and how many after their running attempt.
func (s *Store) RetryNowMatching(ctx context.Context, f EventFilter) (Hastened, error) {
	f.Status = StatusPending
	where, args := f.where()
	var h Hastened
	err := s.db.QueryRow(ctx, `
		WITH hastened AS (`+hastenSQL+where+` RETURNING `+leaseLiveSQL+` AS in_flight)
		SELECT count(*) FILTER (WHERE NOT in_flight), count(*) FILTER (WHERE in_flight) FROM hastened`, args...).
		Scan(&h.DueNow, &h.DueAfterAttempt)
	if err != nil {
		return Hastened{}, fmt.Errorf("retry pending events now: %w", err)
	}
	return h, nil
}
