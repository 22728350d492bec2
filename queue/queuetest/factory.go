package queuetest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/queue"
)

// EventOpts describes a queue row for InsertEvent; zero fields get defaults.
type EventOpts struct {
	EventID   string // default: a fresh evt_... id
	EventType string // default: "invoice.paid"
	Payload   string // default: a minimal Stripe event with EventID and EventType
	Status    queue.Status
	Attempts  int
	LastError string // default: "downstream returned 500"
	// DueIn places next_retry_at relative to the database's now(): negative
	// is overdue. Default: -1 minute, i.e. due.
	DueIn time.Duration
	// Age places created_at this long before now(). Default: 0.
	Age time.Duration
	// Destination is the delivery's destination. Default:
	// queue.DefaultDestination.
	Destination string
	// OrderKey is the delivery's key under its destination's order_by,
	// placed after every delivery of the key inserted before. Default:
	// none, not ordered.
	OrderKey string
}

// InsertEvent puts a row on the retry queue in the state opts describes and
// returns it.
func InsertEvent(t testing.TB, pool *pgxpool.Pool, opts EventOpts) queue.Event {
	t.Helper()
	if opts.EventID == "" {
		opts.EventID = "evt_test_" + randomHex(8)
	}
	if opts.EventType == "" {
		opts.EventType = "invoice.paid"
	}
	if opts.Payload == "" {
		opts.Payload = `{"id":"` + opts.EventID + `","object":"event","type":"` + opts.EventType + `"}`
	}
	if opts.Status == "" {
		opts.Status = queue.StatusFailed
	}
	if opts.LastError == "" {
		opts.LastError = "downstream returned 500"
	}
	if opts.DueIn == 0 {
		opts.DueIn = -time.Minute
	}
	if opts.Destination == "" {
		opts.Destination = queue.DefaultDestination
	}
	var id uuid.UUID
	err := pool.QueryRow(context.Background(), `
		INSERT INTO webhook_events (source, event_id, event_type, payload, status, attempts,
		                            last_error, next_retry_at, created_at, last_attempt_at, destination,
		                            order_key, order_seq)
		VALUES ('stripe', $1, $2, $3, $4, $5, $6,
		        now() + make_interval(secs => $7),
		        now() - make_interval(secs => $8),
		        now() - make_interval(secs => $8), $9,
		        nullif($10, ''), CASE WHEN $10 <> '' THEN nextval('webhook_order_seq') END)
		RETURNING id`,
		opts.EventID, opts.EventType, opts.Payload, opts.Status, opts.Attempts, opts.LastError,
		opts.DueIn.Seconds(), opts.Age.Seconds(), opts.Destination, opts.OrderKey).Scan(&id)
	if err != nil {
		t.Fatalf("queuetest: insert event: %v", err)
	}
	e, err := queue.New(pool).Event(context.Background(), id)
	if err != nil {
		t.Fatalf("queuetest: read inserted event: %v", err)
	}
	return e
}

// InsertAttempt appends a to its event's history, as an attempt recorded
// with its outcome would be.
func InsertAttempt(t testing.TB, pool *pgxpool.Pool, a queue.NewAttempt) {
	t.Helper()
	outcome := "failed"
	if a.Succeeded {
		outcome = "succeeded"
	}
	_, err := pool.Exec(context.Background(), `
		INSERT INTO webhook_attempts (source, event_id, duration_ms, outcome, http_status, error, path, attempt, trace_id,
		                              destination)
		VALUES ($1, $2, $3, $4, NULLIF($5, 0), NULLIF($6, ''), $7, $8, NULLIF($9, ''), coalesce(NULLIF($10, ''), 'default'))`,
		a.Source, a.EventID, float64(a.Duration)/float64(time.Millisecond), outcome, a.HTTPStatus, a.Error, a.Path, a.Number,
		a.TraceID, a.Destination)
	if err != nil {
		t.Fatalf("queuetest: insert attempt: %v", err)
	}
}

// CrashedError is the last_error recorded for a suspect's attempt that
// crashed hookd while it ran alone (queue.CrashedFormat).
func CrashedError(attempt int) string {
	return strings.Replace(queue.CrashedFormat, "%s", strconv.Itoa(attempt), 1)
}

// WaitFor polls cond until it holds, failing t after timeout. Tests use it
// instead of sleeping.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// LoggedOpts describes an event for InsertLogged; zero fields get defaults.
type LoggedOpts struct {
	EventID   string // default: a fresh evt_... id
	EventType string // default: "invoice.paid"
	Payload   string // default: a minimal Stripe event with EventID and EventType
	// Queued puts it on the retry queue (status failed, due in an hour)
	// instead of processing it.
	Queued   bool
	ObjectID string
	Customer string
}

// received is e's outcome under the lease of owner, as the receiver hands
// it over: processed with its event log row, or queued after a failed
// attempt.
func (e LoggedOpts) received(owner uuid.UUID) queue.Received {
	meta := queue.EventMeta{Endpoint: queue.DefaultEndpoint}
	if e.ObjectID != "" {
		meta.ObjectID = &e.ObjectID
	}
	if e.Customer != "" {
		meta.Customer = &e.Customer
	}
	r := queue.Received{EventID: e.EventID, Owner: owner,
		Log: &queue.LoggedEvent{EventType: e.EventType, Payload: []byte(e.Payload), Meta: meta, How: queue.LogInline}}
	if e.Queued {
		r.Log = nil // its queue row is its entry
		r.Wait = time.Hour
		r.Queue = &queue.FailedEvent{Source: queue.SourceStripe, EventID: e.EventID, EventType: e.EventType,
			Payload: []byte(e.Payload), Error: "downstream answered 500", Meta: meta}
		r.Attempt = &queue.NewAttempt{Source: queue.SourceStripe, EventID: e.EventID, Path: queue.PathInline,
			Error: "downstream answered 500", HTTPStatus: 500}
	}
	return r
}

// InsertLogged writes events as the receiver does on their first delivery,
// through its own calls: each one's lease, then its outcome with its event
// log row (and payload), in batches.
func InsertLogged(t testing.TB, pool *pgxpool.Pool, events []LoggedOpts) {
	t.Helper()
	ctx := context.Background()
	s := queue.New(pool)
	const batch = 500
	for start := 0; start < len(events); start += batch {
		part := events[start:min(start+batch, len(events))]
		take := make([]queue.Delivery, len(part))
		for i := range part {
			e := &part[i]
			if e.EventID == "" {
				e.EventID = "evt_test_" + randomHex(8)
			}
			if e.EventType == "" {
				e.EventType = "invoice.paid"
			}
			if e.Payload == "" {
				e.Payload = `{"id":"` + e.EventID + `","object":"event","type":"` + e.EventType + `"}`
			}
			take[i] = queue.Delivery{EventID: e.EventID, Path: queue.PathInline}
		}
		x, err := s.Exchange(ctx, queue.Exchange{Source: queue.SourceStripe, Take: take, ProcessFor: time.Minute})
		d := x.Taken
		if err != nil {
			t.Fatalf("queuetest: lease events: %v", err)
		}
		settle := make([]queue.Received, len(part))
		for i, e := range part {
			if d.States[i] != queue.DeliveryNew {
				t.Fatalf("queuetest: %s is not new: state %d", e.EventID, d.States[i])
			}
			settle[i] = e.received(d.Owner)
		}
		written, err := s.SettleDeliveries(ctx, settle)
		if err != nil {
			t.Fatalf("queuetest: settle events: %v", err)
		}
		for i, w := range written {
			if !w {
				t.Fatalf("queuetest: %s not written", part[i].EventID)
			}
		}
	}
}

// DestinationOpts describes a row of the destinations table for
// InsertDestination; zero fields get defaults.
type DestinationOpts struct {
	Name string // required
	URL  string // default: http://127.0.0.1:1/<name>
	// Source is "file" (the default) or "forward_url".
	Source string
	// Route is the route as configured, JSON; default {"types":["*"]}.
	Route   string
	Retired bool
}

// InsertDestination puts a destination in the destinations table, as the
// replica applying the configuration would.
func InsertDestination(t testing.TB, pool *pgxpool.Pool, opts DestinationOpts) {
	t.Helper()
	if opts.URL == "" {
		opts.URL = "http://127.0.0.1:1/" + opts.Name
	}
	if opts.Source == "" {
		opts.Source = "file"
	}
	if opts.Route == "" {
		opts.Route = `{"types":["*"]}`
	}
	_, err := pool.Exec(context.Background(), `
		INSERT INTO destinations (name, url, route, source, retired_at)
		VALUES ($1, $2, $3::jsonb, $4, CASE WHEN $5::bool THEN now() END)`,
		opts.Name, opts.URL, opts.Route, opts.Source, opts.Retired)
	if err != nil {
		t.Fatalf("queuetest: insert destination: %v", err)
	}
}
