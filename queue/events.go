package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hookd/hookd/internal/store"
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
	// PayloadErasedAt and PayloadErasedBy say when and by whom the
	// customer's payloads were erased (EraseCustomer); nil when they were
	// not. A pending event keeps its payload until it is delivered, a dead
	// one has none left (PayloadErased).
	PayloadErasedAt *time.Time `db:"payload_erased_at"`
	PayloadErasedBy *string    `db:"payload_erased_by"`
	// TraceParent is the W3C traceparent of the delivery that queued the
	// event, when it was traced and sampled: each retry's trace links to
	// it.
	TraceParent *string `db:"trace_parent"`
	// Destination is the destination this row is a delivery to: a queue
	// row is one delivery of an event.
	Destination string `db:"destination"`
	// LeaseKey is the key the delivery's lease goes by (DeliveryKey).
	LeaseKey string `db:"lease_key"`
	// OrderKey is the delivery's key under its destination's order_by
	// (orderkeys.go); nil when it is not ordered.
	OrderKey *string `db:"order_key"`
	EventMeta
}

// PayloadErased says whether the event's payload is gone from its queue
// row: it is dead, and its customer's payloads were erased. Nothing can
// deliver it again; Stripe's copy can (RetryErased).
func (e Event) PayloadErased() bool {
	return e.Status == StatusDead && e.PayloadErasedAt != nil
}

// EventMeta is what the receiver reads from every event besides its id
// and type, kept with its queue row, shown, filtered on and sent to the
// app with each attempt.
type EventMeta struct {
	// Endpoint is the label of the endpoint whose secret the delivery's
	// signature matched.
	Endpoint string `db:"endpoint"`
	// Livemode is nil when the event did not say.
	Livemode *bool `db:"livemode"`
	// Account is a Connect event's connected account (a thin event's
	// context).
	Account       *string `db:"account"`
	APIVersion    *string `db:"api_version"`
	ObjectID      *string `db:"object_id"`
	ObjectType    *string `db:"object_type"`
	Customer      *string `db:"customer"`
	SnapshotEvent *string `db:"snapshot_event"`
}

const eventColumns = `id, source, event_id, event_type, payload, signature, status,
	attempts, last_error, next_retry_at, created_at, last_attempt_at, manual_retry, claims,
	payload_erased_at, payload_erased_by, trace_parent, destination, lease_key, order_key, ` + metaColumns

// metaColumns are EventMeta's columns, in its order.
const metaColumns = `endpoint, livemode, account, api_version, object_id, object_type, customer, snapshot_event`

// FailedEvent is an event whose inline processing failed, as Enqueue takes it.
type FailedEvent struct {
	Source    string
	EventID   string
	EventType string
	// Payload is the exact request body; it is stored byte for byte.
	Payload   []byte
	Signature string
	Error     string
	Meta      EventMeta
	// Created is Stripe's created; nil when the event did not say. The
	// event log's "out of order" compares it.
	Created *time.Time
	// Held puts the event on the queue dead, not announced as a death, so
	// that only a person sends it on (a test-mode event through an endpoint
	// whose test events are queue-only).
	Held bool
	// TraceParent is the W3C traceparent of the delivery that queued the
	// event, which each later attempt's trace links to; "" when it was not
	// traced.
	TraceParent string
	// Destination is the destination the delivery is for; "" is
	// "default".
	Destination string
	// OrderKey is the delivery's key under its destination's order_by,
	// "" when it has none; OrderSeq its place in the key's order
	// (OrderTurn.Seq), 0 to take one as the row is written.
	OrderKey string
	OrderSeq int64
	// InTurn: the delivery waits for its key's earlier deliveries, not
	// for a backoff: it is due at once, and claimed as soon as it is its
	// key's head.
	InTurn bool
}

// Event returns the queue row with the given id, or ErrNotFound.
func (s *Store) Event(ctx context.Context, id uuid.UUID) (Event, error) {
	return oneRow[Event](ctx, s.db, fmt.Sprintf("read event %s", id), `SELECT `+eventColumns+` FROM webhook_events WHERE id = $1`, id)
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
	// Endpoint, when set, keeps only events of the endpoint so labelled.
	Endpoint string
	// Destination, when set, keeps only the deliveries to this
	// destination.
	Destination string
	// Livemode, when set, keeps only live events (true) or test ones.
	Livemode *bool
	// Account, when set, keeps only events of this connected account.
	Account string
	// StuckAfter, when set, keeps only stuck events (see Event.Stuck), with
	// it as the time after which a due event no loop claimed is overdue,
	// and Wait as what explains that due events wait: while anything does,
	// only the reclaimed ones.
	StuckAfter time.Duration
	Wait       DueWait
	Limit      int
	Offset     int
	// After, when set, starts the page after the event with this sort
	// key in the list's order (Key), in place of Offset: a page by cursor
	// neither repeats nor skips an event that arrives meanwhile.
	After *EventKey
}

// EventKey is where an event stands in its list's order: its creation time
// in the dead list, its due time in the pending ones, then its id.
type EventKey struct {
	At time.Time
	ID uuid.UUID
}

// Key is e's place in the list of f's status.
func (f EventFilter) Key(e Event) EventKey {
	if f.Status == StatusDead {
		return EventKey{At: e.CreatedAt, ID: e.ID}
	}
	return EventKey{At: e.NextRetryAt, ID: e.ID}
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
		conds, args = []string{pending}, nil
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
	if f.Endpoint != "" {
		args = append(args, f.Endpoint)
		conds = append(conds, fmt.Sprintf("endpoint = $%d", len(args)))
	}
	if f.Destination != "" {
		args = append(args, f.Destination)
		conds = append(conds, fmt.Sprintf("destination = $%d", len(args)))
	}
	if f.Livemode != nil {
		args = append(args, *f.Livemode)
		conds = append(conds, fmt.Sprintf("livemode = $%d", len(args)))
	}
	if f.Account != "" {
		args = append(args, f.Account)
		conds = append(conds, fmt.Sprintf("account = $%d", len(args)))
	}
	switch {
	case f.StuckAfter > 0 && f.Wait != WaitUnexplained:
		conds = append(conds, pending+" AND "+reclaimedSQL)
	case f.StuckAfter > 0:
		args = append(args, f.StuckAfter.Seconds())
		conds = append(conds, fmt.Sprintf(
			pending+" AND ("+reclaimedSQL+" OR next_retry_at < now() - make_interval(secs => $%d))",
			len(args)))
	}
	if f.After != nil {
		args = append(args, f.After.At, f.After.ID)
		cond := "(next_retry_at, id) > ($%[1]d, $%[2]d)"
		if f.Status == StatusDead {
			cond = "(created_at < $%[1]d OR (created_at = $%[1]d AND id > $%[2]d))"
		}
		conds = append(conds, fmt.Sprintf(cond, len(args)-1, len(args)))
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
	events, err := store.QueryAll[Event](ctx, s.db, fmt.Sprintf(
		`SELECT %s FROM webhook_events WHERE %s ORDER BY %s LIMIT $%d OFFSET $%d`,
		eventColumns, where, order, len(args)-1, len(args)), args...)
	if err != nil {
		return EventPage{}, fmt.Errorf("list events: %w", err)
	}
	page := EventPage{Events: events, Total: int64(len(events))}
	if len(events) == limit || f.Offset > 0 || f.After != nil {
		all := f
		all.After = nil
		where, args := all.where()
		if err := s.db.QueryRow(ctx, `SELECT count(*) FROM webhook_events WHERE `+where,
			args...).Scan(&page.Total); err != nil {
			return EventPage{}, fmt.Errorf("count events: %w", err)
		}
	}
	return page, nil
}

// RetryDead sends a dead event back to the queue, due now and with its
// attempts starting over (a row left at MaxAttempts would never be claimed).
// It reports false, changing nothing, when the row is not dead, and
// ErrPayloadErased when its payload was erased: there is nothing left to
// deliver.
func (s *Store) RetryDead(ctx context.Context, id uuid.UUID) (bool, error) {
	var sent, erased bool
	err := s.db.QueryRow(ctx, `
		WITH sent AS (`+sendBackSQL+`id = $1 AND status = 'dead' AND NOT `+payloadErasedSQL+` RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM sent),
		       EXISTS (SELECT 1 FROM webhook_events WHERE id = $1 AND `+payloadErasedSQL+`)`, id).Scan(&sent, &erased)
	switch {
	case err != nil:
		return false, fmt.Errorf("retry dead event %s: %w", id, err)
	case erased:
		return false, ErrPayloadErased
	}
	return sent, nil
}

// ErrPayloadErased is the answer to a retry of a dead event whose payload
// was erased (Event.PayloadErased).
var ErrPayloadErased = errors.New("its payload was erased, so hookd has nothing left to deliver")

// payloadErasedWhen is the one SQL rule of Event.PayloadErased, for the row
// whose columns are named with prefix ("" or "e."), when dead is the
// boolean expression that says the row is dead: a dead row whose
// customer's payloads were erased. The statements that make a row dead
// keep its payload gone with it: EraseCustomer empties the payloads of
// dead rows, and an erased pending row that dies loses its payload with
// its last attempt (erasedPayloadSQL).
func payloadErasedWhen(prefix, dead string) string {
	return `((` + dead + `) AND ` + prefix + `payload_erased_at IS NOT NULL)`
}

// payloadErasedSQL is Event.PayloadErased of a row of webhook_events, its
// columns unqualified.
var payloadErasedSQL = payloadErasedWhen("", `status = '`+string(StatusDead)+`'`)

// erasedPayloadSQL is the payload of row e once its status is the
// boolean expression dead: gone when it is dead and its customer's
// payloads were erased, since only a person can send it on, and they
// cannot with an erased event (RetryDead). The column is NOT NULL: an
// erased payload is the empty string, and payloadErasedSQL, not the
// payload, says that it is erased.
func erasedPayloadSQL(e, dead string) string {
	return `CASE WHEN ` + payloadErasedWhen(e+".", dead) + ` THEN '' ELSE ` + e + `.payload END`
}

// sendBackSQL sends the rows its WHERE clause, appended, selects back to the
// queue as RetryDead describes. The clause must leave out erased rows.
const sendBackSQL = `
	UPDATE webhook_events
	SET ` + sendBackSet + `
	WHERE `

// sendBackSet is what sending a dead row back to the queue sets.
const sendBackSet = `status = 'failed', attempts = 0, next_retry_at = now(), manual_retry = true`

// RetryErased puts payload, the event as Stripe's Events API holds it, on
// the queue row of eventID, dead with its payload erased, and sends it
// back to the queue as RetryDead does. The row stays marked erased: its
// marker is written without the payload once it is delivered, and it
// loses the payload again should it die. It reports false, changing
// nothing, when eventID has no such row.
func (s *Store) RetryErased(ctx context.Context, eventID string, payload []byte) (bool, error) {
	tag, err := s.db.Exec(ctx, `
		UPDATE webhook_events
		SET payload = $3, `+sendBackSet+`
		WHERE source = $1 AND event_id = $2 AND `+payloadErasedSQL,
		SourceStripe, eventID, string(payload))
	if err != nil {
		return false, fmt.Errorf("retry erased event %s: %w", eventID, err)
	}
	return tag.RowsAffected() > 0, nil
}

// Stats is the state of the queue at one moment.
type Stats struct {
	Failed   int64
	Retrying int64
	Dead     int64
	// Deferred counts the failed events no attempt has been made for yet
	// (deferred while delivery was held or no inline slot was free):
	// counted in Failed, as their status is, but nothing failed.
	Deferred int64
	// DueNow counts pending events whose next retry time has passed.
	DueNow int64
	// OldestPending is when the oldest failed or retrying event was
	// received; nil when none is pending.
	OldestPending *time.Time
	// Suspects counts the events a crash cut short that have not yet run
	// alone to an outcome (suspects.go); dead ones included.
	Suspects int64
	// Markers is the number of dedup markers; when MarkersEstimated it is
	// the planner's estimate ("about N"), exact otherwise.
	Markers          int64
	MarkersEstimated bool
}

// Stats returns the queue depth by status, the number of events due now, the
// oldest pending event's arrival and the number of dedup markers.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	// One subquery per number, each answered by a partial index (pending,
	// dead, due, pending by age) rather than one pass over every row: with
	// 110,000 rows of about 1 KB that pass took 70 ms, the subqueries 18 ms.
	// The deferred have a partial index of their own
	// (webhook_events_deferred_idx).
	err := s.db.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM webhook_events WHERE status = 'failed'),
		       (SELECT count(*) FROM webhook_events WHERE status = 'failed' AND last_attempt_at IS NULL),
		       (SELECT count(*) FROM webhook_events WHERE status = 'retrying'),
		       (SELECT count(*) FROM webhook_events WHERE status = 'dead'),
		       (SELECT count(*) FROM webhook_events
		        WHERE `+pending+` AND attempts < $1 AND next_retry_at <= now()),
		       (SELECT min(created_at) FROM webhook_events WHERE `+pending+`),
		       (SELECT count(*) FROM webhook_suspects WHERE cleared_at IS NULL)`,
		MaxAttempts).
		Scan(&st.Failed, &st.Deferred, &st.Retrying, &st.Dead, &st.DueNow, &st.OldestPending, &st.Suspects)
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

// DeadEvent is an event that went dead, as an alert names it.
type DeadEvent struct {
	EventID     string    `db:"event_id"`
	EventType   string    `db:"event_type"`
	Destination string    `db:"destination"`
	DiedAt      time.Time `db:"died_at"`
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
func (tx *Tx) TakeNewlyDead(ctx context.Context) ([]DeadEvent, error) {
	dead, err := store.QueryAll[DeadEvent](ctx, tx.db, `
		WITH taken AS (
			UPDATE webhook_events SET dead_alerted_at = clock_timestamp()
			WHERE id = ANY (ARRAY(
				SELECT id FROM webhook_events
				WHERE status = '`+string(StatusDead)+`' AND (dead_alerted_at IS NULL OR dead_alerted_at < last_attempt_at)
				FOR UPDATE SKIP LOCKED))
			RETURNING event_id, event_type, destination, coalesce(last_attempt_at, created_at) AS died_at
		)
		SELECT event_id, event_type, destination, died_at FROM taken ORDER BY died_at, event_id, destination`)
	if err != nil {
		return nil, fmt.Errorf("take newly dead events: %w", err)
	}
	return dead, nil
}
