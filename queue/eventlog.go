package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/klauspost/compress/s2"

	"github.com/hookd/hookd/internal/store"
)

// LogHow is how an event of the event log was processed, or, while it
// waits on the queue, how it got there.
type LogHow string

const (
	LogInline        LogHow = "inline"         // processed while Stripe waited
	LogRetry         LogHow = "retry"          // processed by the retry loop, on attempt LogEntry.Attempt
	LogManual        LogHow = "manual"         // processed by a retry a person asked for
	LogReconcile     LogHow = "reconcile"      // recovered by reconciliation
	LogDeferred      LogHow = "deferred"       // queued unprocessed: no inline slot, delivery held, or the rate reached
	LogTestDiscarded LogHow = "test-discarded" // a test-mode event its endpoint discards
	LogHeld          LogHow = "held"           // a test-mode event its endpoint holds for a person
	LogQueued        LogHow = "queued"         // an attempt failed
	LogReplay        LogHow = "replay"         // queued, then delivered by a replay
	LogUnrouted      LogHow = "unrouted"       // taken by no destination: delivered nowhere, by design
)

// LoggedEvent is what the event log keeps of an event the receiver
// processed, written with its marker (Received.Log).
type LoggedEvent struct {
	EventType string
	// Payload is the exact request body, kept for HOOKD_PAYLOAD_RETENTION.
	Payload []byte
	Meta    EventMeta
	// Created is Stripe's created; nil when the event did not say.
	Created *time.Time
	How     LogHow
}

// compressPayload is payload as the event log stores it: in S2's block
// format, fast enough to cost the receiver about a microsecond an event
// and about halving the bytes it sends and PostgreSQL writes.
func compressPayload(payload []byte) []byte { return s2.Encode(nil, payload) }

// payloadBuffers hold the compressed payloads of one settle until it is
// sent: on the receiver's path a fresh buffer for each payload was most of
// what the event log added to the garbage collector's work.
var payloadBuffers = sync.Pool{New: func() any { return new([]byte) }}

// LoggedPayload returns the exact payload hookd keeps of eventID: its
// marker's, or its queue row's while it waits there. ErrNotFound when the
// event log has no entry for it, ErrPayloadGone when the payload was pruned
// or erased.
func (s *Store) LoggedPayload(ctx context.Context, eventID string) ([]byte, error) {
	var logged []byte
	var queued *string
	err := s.db.QueryRow(ctx, `
		SELECT l.payload, CASE WHEN NOT `+queuedPayloadErasedSQL("q")+` THEN q.payload END
		FROM event_log l
		LEFT JOIN webhook_events q ON q.source = '`+SourceStripe+`' AND q.event_id = l.event_id AND l.processed_at IS NULL
		WHERE l.event_id = $1`, eventID).Scan(&logged, &queued)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("read the logged payload of %s: %w", eventID, err)
	case queued != nil:
		return []byte(*queued), nil
	}
	return decodeLoggedPayload(eventID, logged)
}

// queuedPayloadErasedSQL is payloadErasedSQL of the row q of
// webhook_events, false when there is none (a LEFT JOIN's nulls).
func queuedPayloadErasedSQL(q string) string {
	return `coalesce(` + payloadErasedWhen(q+".", q+`.status = '`+string(StatusDead)+`'`) + `, false)`
}

// decodeLoggedPayload is the payload a marker stores as stored (the event
// log view's payload column), or ErrPayloadGone for none.
func decodeLoggedPayload(eventID string, stored []byte) ([]byte, error) {
	if stored == nil {
		return nil, ErrPayloadGone
	}
	payload, err := s2.Decode(nil, stored)
	if err != nil {
		return nil, fmt.Errorf("decompress the logged payload of %s: %w", eventID, err)
	}
	return payload, nil
}

// processed says whether an event logged so has been processed, and so
// is logged by its marker: the others wait on the queue, whose row is
// their entry.
func (h LogHow) processed() bool {
	switch h {
	case LogInline, LogRetry, LogManual, LogReconcile, LogTestDiscarded, LogReplay, LogUnrouted:
		return true
	}
	return false
}

// ErrPayloadGone is LoggedPayload's answer for an event whose payload was
// pruned after HOOKD_PAYLOAD_RETENTION or erased.
var ErrPayloadGone = errors.New("the event log no longer keeps this payload")

// logColumns holds the event log's columns of markers, one entry for each
// outcome of a settle in the settle's order, so that they unnest beside its
// event ids and owners. An outcome without a LoggedEvent (the seed's
// calls, an outcome that is not a marker) has empty columns: its marker,
// if any, is no entry of the log.
type logColumns struct {
	eventType, endpoint, account, apiVersion, objectID, objectType, customer, how []string
	livemode                                                                      []*bool
	created                                                                       []*time.Time
	payload                                                                       [][]byte
	// buf holds the compressed payloads, from payloadBuffers.
	buf *[]byte
}

// grow makes room for n more entries.
func (c *logColumns) grow(n int) {
	c.eventType, c.endpoint, c.account = slices.Grow(c.eventType, n), slices.Grow(c.endpoint, n), slices.Grow(c.account, n)
	c.apiVersion = slices.Grow(c.apiVersion, n)
	c.objectID, c.objectType, c.customer = slices.Grow(c.objectID, n), slices.Grow(c.objectType, n), slices.Grow(c.customer, n)
	c.how, c.livemode, c.created = slices.Grow(c.how, n), slices.Grow(c.livemode, n), slices.Grow(c.created, n)
	c.payload = slices.Grow(c.payload, n)
}

func (c *logColumns) add(l *LoggedEvent) {
	if l == nil || !l.How.processed() {
		c.eventType = append(c.eventType, "")
		c.endpoint = append(c.endpoint, "")
		c.livemode = append(c.livemode, nil)
		c.account = append(c.account, "")
		c.apiVersion = append(c.apiVersion, "")
		c.objectID = append(c.objectID, "")
		c.objectType = append(c.objectType, "")
		c.customer = append(c.customer, "")
		c.created = append(c.created, nil)
		c.how = append(c.how, "")
		c.payload = append(c.payload, nil)
		return
	}
	endpoint := l.Meta.Endpoint
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	c.eventType = append(c.eventType, l.EventType)
	c.endpoint = append(c.endpoint, endpoint)
	c.livemode = append(c.livemode, l.Meta.Livemode)
	c.account = append(c.account, deref(l.Meta.Account))
	c.apiVersion = append(c.apiVersion, deref(l.Meta.APIVersion))
	c.objectID = append(c.objectID, deref(l.Meta.ObjectID))
	c.objectType = append(c.objectType, deref(l.Meta.ObjectType))
	c.customer = append(c.customer, deref(l.Meta.Customer))
	c.created = append(c.created, l.Created)
	c.how = append(c.how, string(l.How))
	c.payload = append(c.payload, c.compress(l.Payload))
}

// compress is compressPayload into c's buffer.
func (c *logColumns) compress(payload []byte) []byte {
	if c.buf == nil {
		c.buf = payloadBuffers.Get().(*[]byte)
	}
	b := *c.buf
	need := s2.MaxEncodedLen(len(payload))
	if cap(b)-len(b) < need {
		// The payloads already in the old buffer keep it alive until the
		// settle is sent.
		b = make([]byte, 0, max(2*cap(b), need, 16<<10))
	}
	out := s2.Encode(b[len(b):len(b)+need], payload)
	*c.buf = b[:len(b)+len(out)]
	return out[:len(out):len(out)]
}

// release gives c's buffer back once the settle has been sent.
func (c *logColumns) release() {
	if c.buf != nil {
		*c.buf = (*c.buf)[:0]
		payloadBuffers.Put(c.buf)
		c.buf = nil
	}
}

func (c *logColumns) args() []any {
	return []any{nonNil(c.eventType), nonNil(c.endpoint), nonNil(c.livemode), nonNil(c.account), nonNil(c.apiVersion),
		nonNil(c.objectID), nonNil(c.objectType), nonNil(c.customer), nonNil(c.created), nonNil(c.how), nonNil(c.payload)}
}

// logUnnestSQL is the unnest arguments of logColumns' eleven arrays, the
// parameters from $first on, and logNamesSQL their names in the unnest's
// alias.
func logUnnestSQL(first int) string { return typedParams(first, logTypes[:]) }

// logTypes are logColumns' arrays' element types, logArgs their number.
var logTypes = [...]string{"text", "text", "bool", "text", "text", "text", "text", "text", "timestamptz", "text", "bytea"}

const logArgs = len(logTypes)

const logNamesSQL = `event_type, endpoint, livemode, account, api_version, object_id, object_type, customer, created, how, payload`

// insertMarkersSQL writes the markers, with their event log columns, of the
// rows l (an unnest with logNamesSQL's columns and event_id) that the rest
// of the statement, given from FROM on, chooses. A marker already there
// (an event processed again by a path that does not look first) is kept.
func insertMarkersSQL(from string) string {
	return `
		INSERT INTO processed_webhook_events (event_id, event_type, endpoint, livemode, account, api_version, object_id,
		                                      object_type, customer, stripe_created, received_at, processed_how, payload)
		SELECT l.event_id, NULLIF(l.event_type, ''), NULLIF(l.endpoint, ''), l.livemode, NULLIF(l.account, ''),
		       NULLIF(l.api_version, ''), NULLIF(l.object_id, ''), NULLIF(l.object_type, ''), NULLIF(l.customer, ''), l.created,
		       CASE WHEN l.how <> '' THEN now() END, NULLIF(l.how, ''), l.payload
		` + from + `
		ON CONFLICT DO NOTHING`
}

// insertResolvedMarkersSQL writes the markers, with their event log
// columns, of the queue rows a statement's CTE resolved deleted and
// returned (event_id, event_type, endpoint, livemode, account, api_version,
// object_id, object_type, customer, stripe_created, created_at, attempts,
// payload, how, payload_erased_at, payload_erased_by):
// received when the queue row was written, processed by attempt number
// attempts, without the payload when it was erased while queued. resolved
// also returns each row's id. An event is processed once every delivery
// is: one whose other deliveries still wait on the queue gets no marker
// yet, and the last one's resolution writes it. (lockDeliveriesSQL keeps
// two resolutions of one event's deliveries from each seeing the other's
// row.)
const insertResolvedMarkersSQL = `
		INSERT INTO processed_webhook_events (event_id, event_type, endpoint, livemode, account, api_version, object_id,
		                                      object_type, customer, stripe_created, received_at, processed_how,
		                                      processed_attempt, payload, payload_erased_at, payload_erased_by)
		SELECT event_id, event_type, endpoint, livemode, account, api_version, object_id, object_type, customer,
		       stripe_created, created_at, how, attempts, CASE WHEN payload_erased_at IS NULL THEN payload END,
		       payload_erased_at, payload_erased_by
		FROM resolved r
		WHERE NOT EXISTS (SELECT 1 FROM webhook_events o
		                  WHERE o.source = '` + SourceStripe + `' AND o.event_id = r.event_id
		                    AND o.id NOT IN (SELECT id FROM resolved))
		ON CONFLICT DO NOTHING`

// PrunePayloads sets to null the payloads the event log keeps of events
// received longer than olderThan ago (HOOKD_PAYLOAD_RETENTION), in batches
// as PruneProcessed deletes, and returns how many it cleared. The marker,
// with the metadata, stays until PruneProcessed.
func (s *Store) PrunePayloads(ctx context.Context, olderThan time.Duration) (int64, error) {
	return store.DeleteInBatches(ctx, s.db, "event log payloads", `
		UPDATE processed_webhook_events SET payload = NULL
		WHERE event_id = ANY (ARRAY(
			SELECT event_id FROM processed_webhook_events
			WHERE payload IS NOT NULL AND received_at < now() - make_interval(secs => $1)
			ORDER BY received_at
			LIMIT $2))`,
		olderThan.Seconds())
}

// Erased is what EraseCustomer did.
type Erased struct {
	// Payloads is how many payloads it erased: of processed events, and
	// of dead events on the queue.
	Payloads int64
	// Dead is how many of Payloads were dead events'. Their queue rows stay,
	// with their metadata and history, and can no longer be retried.
	Dead int64
	// Pending is how many events about the customer are still pending on
	// the queue, which keeps their payloads since hookd still has to
	// deliver them: their markers are written without, and one that dies
	// loses its payload then.
	Pending int64
}

// Summary is one line saying what the erasure of customer's payloads did.
func (e Erased) Summary(customer string) string {
	s := fmt.Sprintf("erased the payloads of %d events about %s", e.Payloads, customer)
	if e.Dead > 0 {
		s += fmt.Sprintf(" (%d of them dead on the retry queue, which can no longer be retried)", e.Dead)
	}
	if e.Pending > 0 {
		s += fmt.Sprintf("; %d more about it are still on the retry queue, which keeps their payloads "+
			"until they are delivered and erases them then (or at once, should they die)", e.Pending)
	}
	return s
}

// CheckCustomerID says why id cannot be a Stripe customer's id, or nil.
func CheckCustomerID(id string) error {
	rest, ok := strings.CutPrefix(id, "cus_")
	if !ok || rest == "" || len(id) > 255 || strings.Trim(rest, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != "" {
		return fmt.Errorf("%q is not a Stripe customer id: they look like cus_NffrFeUfNV2Hib", id)
	}
	return nil
}

// EraseCustomer erases the payloads of every event of the event log about
// customer (its customer, or the customer object itself), in the name of
// by, keeping their metadata with when and by whom. Run it in the
// transaction that audits it. Dead events on the queue lose their queue
// row's payload too, which only a person's retry would have sent. Pending
// events keep theirs, which their delivery needs, and are marked erased:
// their markers are written without it. Erased.Pending counts them.
func (s *Store) EraseCustomer(ctx context.Context, customer, by string) (Erased, error) {
	var e Erased
	err := s.db.QueryRow(ctx, `
		WITH erased AS (
			UPDATE processed_webhook_events SET payload = NULL, payload_erased_at = now(), payload_erased_by = $2
			WHERE (customer = $1 OR object_id = $1) AND processed_how IS NOT NULL AND payload_erased_at IS NULL
			RETURNING 1
		), dead AS (
			UPDATE webhook_events SET payload = '', payload_erased_at = coalesce(payload_erased_at, now()),
			       payload_erased_by = coalesce(payload_erased_by, $2)
			WHERE source = '`+SourceStripe+`' AND (customer = $1 OR object_id = $1) AND status = 'dead' AND payload <> ''
			RETURNING 1
		), marked AS (
			UPDATE webhook_events SET payload_erased_at = coalesce(payload_erased_at, now()),
			       payload_erased_by = coalesce(payload_erased_by, $2)
			WHERE source = '`+SourceStripe+`' AND (customer = $1 OR object_id = $1) AND `+pending+`
			RETURNING 1
		)
		SELECT (SELECT count(*) FROM erased) + (SELECT count(*) FROM dead), (SELECT count(*) FROM dead),
		       (SELECT count(*) FROM marked)`,
		customer, by).Scan(&e.Payloads, &e.Dead, &e.Pending)
	if err != nil {
		return Erased{}, fmt.Errorf("erase payloads of %s: %w", customer, err)
	}
	return e, nil
}

// LogEntry is one row of the event log, with where its event stands.
type LogEntry struct {
	EventID   string `db:"event_id"`
	EventType string `db:"event_type"`
	// EventMeta is what the receiver read of the event, as a queue row
	// holds it; the event log keeps no SnapshotEvent (PairOf finds the
	// pair), so that one is nil.
	EventMeta
	Created         *time.Time `db:"stripe_created"`
	ReceivedAt      time.Time  `db:"received_at"`
	ProcessedAt     *time.Time `db:"processed_at"`
	How             LogHow     `db:"processed_how"`
	Attempt         *int       `db:"processed_attempt"`
	HasPayload      bool       `db:"has_payload"`
	PayloadErasedAt *time.Time `db:"payload_erased_at"`
	PayloadErasedBy *string    `db:"payload_erased_by"`
	// QueueStatus is the status of its queue row; nil when it has none.
	QueueStatus *Status `db:"queue_status"`
	// OutOfOrder: it arrived after an event about the same object that
	// Stripe created later had been delivered, so the app saw the two in
	// the wrong order.
	OutOfOrder bool `db:"out_of_order"`
}

// logEntrySQL selects LogEntry's columns of the event log rows l.
var logEntrySQL = `
	SELECT l.event_id, l.event_type, l.endpoint, l.livemode, l.account, l.api_version, l.object_id, l.object_type,
	       l.customer, NULL::text AS snapshot_event, l.stripe_created, l.received_at, l.processed_at, l.processed_how, l.processed_attempt,
	       l.payload IS NOT NULL OR (l.processed_at IS NULL AND NOT EXISTS (
	           SELECT 1 FROM webhook_events e WHERE e.source = '` + SourceStripe + `' AND e.event_id = l.event_id
	             AND ` + payloadErasedSQL + `)) AS has_payload,
	       l.payload_erased_at, l.payload_erased_by,
	       (SELECT e.status FROM webhook_events e WHERE e.source = '` + SourceStripe + `' AND e.event_id = l.event_id) AS queue_status,
	       l.object_id IS NOT NULL AND l.stripe_created IS NOT NULL AND EXISTS (
	           SELECT 1 FROM processed_webhook_events o
	           WHERE o.object_id = l.object_id AND o.event_id <> l.event_id
	             AND o.stripe_created > l.stripe_created
	             AND o.processed_at < l.received_at) AS out_of_order
	FROM event_log l`

// LogEntry returns the event log's row of eventID, or ErrNotFound.
func (s *Store) LogEntry(ctx context.Context, eventID string) (LogEntry, error) {
	return oneRow[LogEntry](ctx, s.db, "read event log of "+eventID, logEntrySQL+` WHERE l.event_id = $1`, eventID)
}

// MaxHistory bounds the events History returns.
const MaxHistory = 200

// historySQL is the events of object or customer $1, newest first, at most
// $2: of the markers, a union of two index scans, one per partial index,
// each read newest first and stopped at the limit; of the queue, which is
// small unless the app is down, a scan.
var historySQL = `
	WITH ids AS (
		(SELECT event_id, received_at FROM processed_webhook_events
		 WHERE object_id = $1 AND processed_how IS NOT NULL ORDER BY received_at DESC LIMIT $2)
		UNION
		(SELECT event_id, received_at FROM processed_webhook_events
		 WHERE customer = $1 AND processed_how IS NOT NULL ORDER BY received_at DESC LIMIT $2)
		UNION
		(SELECT event_id, created_at FROM webhook_events
		 WHERE source = '` + SourceStripe + `' AND (object_id = $1 OR customer = $1) ORDER BY created_at DESC LIMIT $2)
	)` + logEntrySQL + `
	WHERE l.event_id = ANY (ARRAY(SELECT event_id FROM ids ORDER BY received_at DESC LIMIT $2))
	ORDER BY l.received_at DESC, l.event_id`

// History returns every event of the event log about the object or
// customer id, newest first, at most MaxHistory.
func (s *Store) History(ctx context.Context, id string) ([]LogEntry, error) {
	out, err := store.QueryAll[LogEntry](ctx, s.db, historySQL, id, MaxHistory)
	if err != nil {
		return nil, fmt.Errorf("read history of %s: %w", id, err)
	}
	return out, nil
}
