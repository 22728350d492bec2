package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DeliveryState is where a delivered event stands once BeginEvents has
// tried its lock.
type DeliveryState int

const (
	// DeliveryNew: no dedup marker and no queue row; process it.
	DeliveryNew DeliveryState = iota + 1
	// DeliveryProcessed: the event has a dedup marker; nothing is to run.
	DeliveryProcessed
	// DeliveryQueued: the event has a row on the retry queue (dead
	// included), which owns it.
	DeliveryQueued
	// DeliveryBusy: another delivery holds the event's lock, or the event
	// came twice in one batch; answer that it is being handled.
	DeliveryBusy
)

const (
	// receiverPlansSQL makes the statements of a batch of deliveries run on
	// plans made once per connection, for this transaction only. Each takes
	// its ids as an array, and unnest's row estimate differs between a plan
	// for the array at hand and one for any array, so PostgreSQL would
	// otherwise plan them anew at every batch: that planning was a third of
	// its CPU per delivery under load. With sequential scans off, the plan
	// made once finds events by their unique indexes, as it must however few
	// rows the tables held when it was made: a plan for an empty table would
	// scan it, and stay until the table is next analyzed.
	receiverPlansSQL = `
		SELECT set_config('plan_cache_mode', 'force_generic_plan', true),
		       set_config('enable_seqscan', 'off', true)`
	// eventStatesSQL reads, for each event id $2 of source $1, in order,
	// whether it has a dedup marker and whether it has a queue row. Each is
	// a lookup of one key, written as a scalar subquery rather than EXISTS:
	// PostgreSQL may plan an EXISTS as one hashed read of the whole table,
	// the cheapest way when the plan is made on an empty table, and a plan
	// made once keeps it.
	eventStatesSQL = `
		SELECT (SELECT true FROM processed_webhook_events m WHERE m.event_id = d.id) IS NOT NULL,
		       (SELECT true FROM webhook_events e WHERE e.source = $1 AND e.event_id = d.id) IS NOT NULL
		FROM unnest($2::text[]) WITH ORDINALITY AS d(id, ord)
		ORDER BY d.ord`
	// markProcessedSQL writes the dedup markers of the event ids $1.
	markProcessedSQL = `
		INSERT INTO processed_webhook_events (event_id) SELECT unnest($1::text[])
		ON CONFLICT DO NOTHING`
	// insertEventsSQL puts events on the retry queue as new failed rows, column
	// by column as queuedColumns.args orders them: each due after its wait, in
	// seconds, and with last_attempt_at set when it was attempted. An event
	// already on the queue keeps its one row. It returns the ids inserted.
	insertEventsSQL = `
		INSERT INTO webhook_events (source, event_id, event_type, payload, signature, last_error, last_attempt_at, next_retry_at)
		SELECT e.source, e.event_id, e.event_type, e.payload, NULLIF(e.signature, ''), e.error,
		       CASE WHEN e.attempted THEN now() END, now() + make_interval(secs => e.wait)
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[], $8::bool[])
		     AS e(source, event_id, event_type, payload, signature, error, wait, attempted)
		ON CONFLICT (source, event_id) DO NOTHING
		RETURNING event_id`
)

// BeginEvents starts the transaction that handles a batch of deliveries of
// source's events and returns it with each event's state, in order: BEGIN,
// the events' locks and the read of their states go out in one pipeline, one
// round trip; with Tx.CommitReceived, a batch costs two, however many events
// it holds.
//
// Each lock is TryLockEvent's, with the same rules: it never waits, and an
// event whose lock another delivery holds is DeliveryBusy. An id given twice
// is DeliveryBusy the second time, since one transaction would take its lock
// twice. The states are read by a statement after the locks', so they see
// whatever the previous holders committed, and they cannot change before
// this transaction ends.
//
// Every lock held takes a slot in the server's shared lock table (see
// TryLockEvents), so batches stay small.
func (s *Store) BeginEvents(ctx context.Context, source string, eventIDs []string) (*Tx, []DeliveryState, error) {
	if s.pool == nil {
		return nil, nil, errors.New("queue: BeginEvents needs a Store over a pool, not a transaction")
	}
	states := make([]DeliveryState, len(eventIDs))
	distinct := make([]string, 0, len(eventIDs))
	first := make(map[string]bool, len(eventIDs))
	for i, id := range eventIDs {
		if first[id] {
			states[i] = DeliveryBusy
			continue
		}
		first[id] = true
		distinct = append(distinct, id)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("begin event locks: %w", err)
	}
	t := &pipelinedTx{Conn: conn}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(receiverPlansSQL)
	b.Queue(tryLockEventsSQL, distinct)
	b.Queue(eventStatesSQL, source, distinct)
	br := conn.SendBatch(ctx, b)
	var lockedIDs []string
	var found [][2]bool
	_, err = br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		lockedIDs, err = collect(br, pgx.RowTo[string])
	}
	if err == nil {
		found, err = collect(br, func(row pgx.CollectableRow) ([2]bool, error) {
			var f [2]bool
			return f, row.Scan(&f[0], &f[1])
		})
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = t.Rollback(context.WithoutCancel(ctx))
		return nil, nil, fmt.Errorf("lock events and read their states: %w", err)
	}
	locked := make(map[string]bool, len(lockedIDs))
	for _, id := range lockedIDs {
		locked[id] = true
	}
	stateOf := make(map[string]DeliveryState, len(distinct))
	for i, id := range distinct {
		switch processed, queued := found[i][0], found[i][1]; {
		case !locked[id]:
			stateOf[id] = DeliveryBusy
		case processed:
			stateOf[id] = DeliveryProcessed
		case queued:
			stateOf[id] = DeliveryQueued
		default:
			stateOf[id] = DeliveryNew
		}
	}
	for i, id := range eventIDs {
		if states[i] == 0 {
			states[i] = stateOf[id]
		}
	}
	return &Tx{Store: s.on(t), tx: t}, states, nil
}

// BeginEvent is BeginEvents for one delivery: it returns the transaction
// holding the event's lock with whether the event has a dedup marker and
// whether it has a queue row, or ErrEventLocked when another delivery holds
// the lock.
func (s *Store) BeginEvent(ctx context.Context, source, eventID string) (tx *Tx, processed, queued bool, err error) {
	tx, states, err := s.BeginEvents(ctx, source, []string{eventID})
	if err != nil {
		return nil, false, false, err
	}
	if states[0] == DeliveryBusy {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, false, false, ErrEventLocked
	}
	return tx, states[0] == DeliveryProcessed, states[0] == DeliveryQueued, nil
}

// Received is what a batch of deliveries leaves, as CommitReceived writes it.
type Received struct {
	// Processed are the events processed on their first delivery: the dedup
	// marker is all each leaves. Attempt history is kept for the events that
	// failed at least once (their failed attempt, then every later one), so
	// a marker with no attempts means "processed on its first delivery".
	Processed []string
	// Recorded are events processed on a path whose attempt says how (a
	// recovery by reconciliation): the marker and the successful attempt.
	Recorded []NewAttempt
	// Failed are events whose processing failed: each goes on the retry
	// queue, due after RetryDelay(0), with its failed attempt.
	Failed []FailedAttempt
	// Deferred are events not processed at all: each goes on the retry
	// queue due at once, with no attempt: the receiver defers a delivery so
	// when the app is too busy to take it while Stripe waits.
	Deferred []FailedEvent
}

// FailedAttempt is a delivered event whose processing failed, with the
// attempt that failed.
type FailedAttempt struct {
	Event   FailedEvent
	Attempt NewAttempt
}

// CommitReceived writes the outcomes of a batch of deliveries and commits,
// in one round trip when the Tx came from BeginEvents. Every write is
// idempotent: a marker or a queue row that exists is left as it is.
func (t *Tx) CommitReceived(ctx context.Context, r Received) error {
	b := &pgx.Batch{}
	marked := append([]string(nil), r.Processed...)
	var attempts attemptColumns
	for _, a := range r.Recorded {
		a.Succeeded = true
		marked = append(marked, a.EventID)
		attempts.add(a)
	}
	if len(marked) > 0 {
		b.Queue(markProcessedSQL, marked)
	}
	var queued queuedColumns
	for _, f := range r.Failed {
		queued.add(f.Event, t.RetryDelay(0), true)
		attempts.add(f.Attempt)
	}
	for _, e := range r.Deferred {
		queued.add(e, 0, false)
	}
	if len(queued.eventID) > 0 {
		b.Queue(insertEventsSQL, queued.args()...)
	}
	if len(attempts.eventID) > 0 {
		b.Queue(recordAttemptSQL, attempts.args()...)
	}
	if err := t.tx.commitWith(ctx, b); err != nil {
		return fmt.Errorf("commit received events: %w", err)
	}
	return nil
}

// CommitProcessed writes the dedup marker of an event processed on its
// first delivery and commits: CommitReceived for one such event.
func (t *Tx) CommitProcessed(ctx context.Context, eventID string) error {
	return t.CommitReceived(ctx, Received{Processed: []string{eventID}})
}

// queuedColumns holds events for insertEventsSQL, column by column.
type queuedColumns struct {
	source, eventID, eventType, payload, signature, errors []string
	wait                                                   []float64
	attempted                                              []bool
}

func (c *queuedColumns) add(e FailedEvent, wait time.Duration, attempted bool) {
	c.source = append(c.source, e.Source)
	c.eventID = append(c.eventID, e.EventID)
	c.eventType = append(c.eventType, e.EventType)
	c.payload = append(c.payload, string(e.Payload))
	c.signature = append(c.signature, e.Signature)
	c.errors = append(c.errors, e.Error)
	c.wait = append(c.wait, wait.Seconds())
	c.attempted = append(c.attempted, attempted)
}

func (c *queuedColumns) args() []any {
	return []any{c.source, c.eventID, c.eventType, c.payload, c.signature, c.errors, c.wait, c.attempted}
}
