package queue_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

func ptr[T any](v T) *T { return &v }

// logged is an event log row as the receiver hands it over.
func logged(how queue.LogHow, object, customer string, created time.Time) *queue.LoggedEvent {
	return &queue.LoggedEvent{EventType: "invoice.paid", Payload: []byte(`{"id":"x","exact":  "bytes"}`),
		Meta: queue.EventMeta{Endpoint: "default", Livemode: ptr(true), ObjectID: ptr(object),
			ObjectType: ptr("invoice"), Customer: ptr(customer)},
		Created: &created, How: how}
}

// An event's entry in the event log is its marker, written with the log's
// columns, or its queue row; neither is written when the outcome's lease
// was lost.
func TestEventLog_WrittenWithTheMarkerAndTheQueueRowNotWhenTheLeaseWasLost(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	created := time.Unix(1764547200, 0)

	// Processed on its first delivery: the cheap statement.
	d := take(t, s, "evt_inline")
	written, err := s.SettleDeliveries(ctx, []queue.Received{{EventID: "evt_inline", Owner: d.Owner,
		Log: logged(queue.LogInline, "in_1", "cus_1", created)}})
	if err != nil || !written[0] {
		t.Fatalf("settle inline: %v, %v", written, err)
	}
	// Failed: the queue row, which is its entry, and its attempt.
	d = take(t, s, "evt_failed")
	fe := queue.FailedEvent{Source: queue.SourceStripe, EventID: "evt_failed", EventType: "invoice.paid",
		Payload: []byte(`{}`), Error: "downstream answered 500", Created: &created,
		Meta: queue.EventMeta{Endpoint: "default", ObjectID: ptr("in_1"), Customer: ptr("cus_1")}}
	written, err = s.SettleDeliveries(ctx, []queue.Received{{EventID: "evt_failed", Owner: d.Owner, Queue: &fe,
		Attempt: &queue.NewAttempt{Source: queue.SourceStripe, EventID: "evt_failed", Path: queue.PathInline, Error: "downstream answered 500"},
		Log:     logged(queue.LogQueued, "in_1", "cus_1", created)}})
	if err != nil || !written[0] {
		t.Fatalf("settle failed: %v, %v", written, err)
	}
	// Lost: its lease was taken over before its outcome came back.
	d = take(t, s, "evt_lost")
	expireLeases(t, bundle.pool)
	take(t, s, "evt_lost")
	written, err = s.SettleDeliveries(ctx, []queue.Received{{EventID: "evt_lost", Owner: d.Owner,
		Log: logged(queue.LogInline, "in_1", "cus_1", created)}})
	if err != nil || written[0] {
		t.Fatalf("settle lost: %v, %v; want not written", written, err)
	}

	type row struct {
		EventID    string
		How        string
		Processed  bool
		HasPayload bool
		Created    time.Time
		Customer   string
	}
	rows := map[string]row{}
	r, err := bundle.pool.Query(ctx, `SELECT event_id, processed_how, processed_at IS NOT NULL, payload IS NOT NULL, stripe_created, customer
		FROM event_log`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var x row
		if err := r.Scan(&x.EventID, &x.How, &x.Processed, &x.HasPayload, &x.Created, &x.Customer); err != nil {
			t.Fatal(err)
		}
		rows[x.EventID] = x
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("event log holds %v, want evt_inline and evt_failed only", rows)
	}
	if x := rows["evt_inline"]; x.How != "inline" || !x.Processed || !x.HasPayload ||
		!x.Created.Equal(created) || x.Customer != "cus_1" {
		t.Errorf("evt_inline's row: %+v", x)
	}
	if p, err := s.LoggedPayload(ctx, "evt_inline"); err != nil || string(p) != `{"id":"x","exact":  "bytes"}` {
		t.Errorf("evt_inline's logged payload: %q, %v; want the exact bytes", p, err)
	}
	if _, err := s.LoggedPayload(ctx, "evt_lost"); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("evt_lost's logged payload: %v, want ErrNotFound", err)
	}
	if x := rows["evt_failed"]; x.How != "queued" || x.Processed {
		t.Errorf("evt_failed's row: %+v, want queued, not processed", x)
	}
	if n := queuetest.Markers(t, bundle.pool); n != 1 {
		t.Errorf("%d markers, want 1", n)
	}
}

// A retry that succeeds writes the event's marker with the log's columns
// from its queue row, processed by that attempt, whether the receiver or
// the seed's Enqueue queued it.
func TestEventLog_RetrySuccessRecordsHowAndAttempt(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	d := take(t, s, "evt_logged")
	fe := queue.FailedEvent{Source: queue.SourceStripe, EventID: "evt_logged", EventType: "invoice.paid", Payload: []byte(`{"a":1}`),
		Meta: queue.EventMeta{ObjectID: ptr("in_2"), Customer: ptr("cus_2")}}
	if _, err := s.SettleDeliveries(ctx, []queue.Received{{EventID: "evt_logged", Owner: d.Owner, Queue: &fe,
		Log: logged(queue.LogDeferred, "in_2", "cus_2", time.Now())}}); err != nil {
		t.Fatal(err)
	}
	if _, err := queuetest.NewSeed(s).Enqueue(ctx, queue.FailedEvent{Source: queue.SourceStripe, EventID: "evt_unlogged",
		EventType: "charge.succeeded", Payload: []byte(`{"b":2}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := bundle.pool.Exec(ctx, `UPDATE webhook_events SET next_retry_at = now()`); err != nil {
		t.Fatal(err)
	}
	claim, err := s.ClaimAttempts(ctx, 10, time.Minute)
	if err != nil || len(claim.Claimed) != 2 {
		t.Fatalf("claim: %d, %v", len(claim.Claimed), err)
	}
	var settled []queue.Settled
	for _, c := range claim.Claimed {
		settled = append(settled, queue.Settled{Claimed: c, Kind: queue.SettleDone,
			Attempt: &queue.NewAttempt{Source: queue.SourceStripe, EventID: c.Event.EventID, Succeeded: true, Path: c.Path, Number: c.Event.Attempts}})
	}
	if _, err := s.SettleAttempts(ctx, settled); err != nil {
		t.Fatal(err)
	}
	got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM event_log
		WHERE processed_how = 'retry' AND processed_attempt = 1 AND processed_at IS NOT NULL AND payload IS NOT NULL`)
	if got != 2 {
		t.Errorf("%d event log rows processed by retry 1, want 2", got)
	}
	if p, err := s.LoggedPayload(ctx, "evt_unlogged"); err != nil || string(p) != `{"b":2}` {
		t.Errorf("evt_unlogged's logged payload: %q, %v; want its queue row's", p, err)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM event_log WHERE event_id = 'evt_logged' AND customer = 'cus_2'`); n != 1 {
		t.Errorf("evt_logged's row lost its metadata")
	}
}

// Payloads go after the payload retention; the metadata stays with the
// marker, and goes with it.
func TestEventLog_PrunedPayloadsThenRows(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	if _, err := bundle.pool.Exec(ctx, `
		INSERT INTO processed_webhook_events (event_id, event_type, endpoint, received_at, processed_at, processed_how, payload)
		SELECT 'evt_' || i, 'invoice.paid', 'default', now() - make_interval(days => i), now() - make_interval(days => i),
		       'inline', '{}'
		FROM generate_series(0, 39) i`); err != nil {
		t.Fatal(err)
	}

	cleared, err := s.PrunePayloads(ctx, 7*24*time.Hour+time.Hour)
	if err != nil || cleared != 32 {
		t.Fatalf("cleared %d payloads (%v), want 32: days 8 to 39", cleared, err)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM event_log WHERE payload IS NOT NULL`); n != 8 {
		t.Errorf("%d payloads left, want 8", n)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM event_log WHERE event_type = 'invoice.paid'`); n != 40 {
		t.Errorf("%d entries with their metadata, want all 40", n)
	}
	deleted, err := s.PruneProcessed(ctx, 30*24*time.Hour+time.Hour)
	if err != nil || deleted != 9 {
		t.Fatalf("deleted %d markers (%v), want 9: days 31 to 39", deleted, err)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM event_log`); n != 31 {
		t.Errorf("%d entries left, want 31", n)
	}
}

// Erasure clears the payloads of every event about the customer, and
// nothing else: other customers' payloads, the metadata, the markers and
// the queue rows' payloads stay; it is audited in its transaction.
func TestEraseCustomer_RemovesThePayloadsAndNothingElse(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	if _, err := bundle.pool.Exec(ctx, `
		INSERT INTO processed_webhook_events (event_id, event_type, endpoint, object_id, customer, received_at, processed_how, payload)
		SELECT 'evt_' || i, 'invoice.paid', 'default', CASE WHEN i = 0 THEN 'cus_gone' ELSE 'in_' || i END,
		       CASE WHEN i = 0 THEN NULL WHEN i % 3 = 0 THEN 'cus_gone' ELSE 'cus_other' END, now(), 'inline', convert_to('{"n":' || i || '}', 'UTF8')
		FROM generate_series(0, 29) i`); err != nil {
		t.Fatal(err)
	}
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_queued_about_them"})
	if _, err := bundle.pool.Exec(ctx, `UPDATE webhook_events SET customer = 'cus_gone'`); err != nil {
		t.Fatal(err)
	}
	count := func(sql string) int64 { return queuetest.Count(t, bundle.pool, sql) }
	before := [3]int64{count(`SELECT count(*) FROM event_log`), count(`SELECT count(*) FROM event_log WHERE payload IS NOT NULL`),
		count(`SELECT count(*) FROM webhook_events WHERE payload IS NOT NULL`)}

	var erased queue.Erased
	err := s.InTx(ctx, func(tx *queue.Tx) error {
		var err error
		if erased, err = tx.EraseCustomer(ctx, "cus_gone", "dpo@example.com"); err != nil {
			return err
		}
		return audit.Record(ctx, tx.PgxTx(), "dpo@example.com", audit.Erase, "cus_gone", erased.Payloads)
	})
	if err != nil {
		t.Fatal(err)
	}
	// evt_0 is the customer itself; 3, 6, ..., 27 are about it.
	if erased != (queue.Erased{Payloads: 10, Pending: 1}) {
		t.Errorf("erased %+v, want 10 payloads and 1 pending", erased)
	}
	after := [3]int64{count(`SELECT count(*) FROM event_log`), count(`SELECT count(*) FROM event_log WHERE payload IS NOT NULL`),
		count(`SELECT count(*) FROM webhook_events WHERE payload IS NOT NULL`)}
	if want := [3]int64{before[0], before[1] - 10, before[2]}; after != want {
		t.Errorf("rows, payloads, queue payloads: %v before, %v after, want %v", before, after, want)
	}
	if n := count(`SELECT count(*) FROM event_log WHERE payload_erased_by = 'dpo@example.com' AND payload_erased_at IS NOT NULL
		AND payload IS NULL AND event_type = 'invoice.paid' AND (customer = 'cus_gone' OR object_id = 'cus_gone')`); n != 11 {
		t.Errorf("%d entries say who erased them, with their metadata, want 11: 10 processed, 1 queued", n)
	}
	if n := count(`SELECT count(*) FROM event_log WHERE customer = 'cus_other' AND payload IS NULL`); n != 0 {
		t.Errorf("%d payloads of another customer erased", n)
	}
	if n := count(`SELECT count(*) FROM audit_log WHERE action = 'erase' AND target = 'cus_gone' AND count = 10`); n != 1 {
		t.Errorf("%d audit entries, want 1", n)
	}
	// Again: nothing more to erase, and the erasure keeps its first date.
	again, err := s.EraseCustomer(ctx, "cus_gone", "someone@example.com")
	if err != nil || again.Payloads != 0 {
		t.Errorf("second erasure: %+v, %v", again, err)
	}

	// The queued event is delivered: its marker is written without the
	// payload, saying who erased it.
	if _, err := bundle.pool.Exec(ctx, `UPDATE webhook_events SET next_retry_at = now()`); err != nil {
		t.Fatal(err)
	}
	claim, err := s.ClaimAttempts(ctx, 10, time.Minute)
	if err != nil || len(claim.Claimed) != 1 {
		t.Fatalf("claim: %d, %v", len(claim.Claimed), err)
	}
	c := claim.Claimed[0]
	if _, err := s.SettleAttempts(ctx, []queue.Settled{{Claimed: c, Kind: queue.SettleDone,
		Attempt: &queue.NewAttempt{Source: queue.SourceStripe, EventID: c.Event.EventID, Succeeded: true, Path: c.Path, Number: c.Event.Attempts}}}); err != nil {
		t.Fatal(err)
	}
	if n := count(`SELECT count(*) FROM processed_webhook_events WHERE event_id = 'evt_queued_about_them'
		AND processed_how = 'retry' AND payload IS NULL AND payload_erased_by = 'dpo@example.com'`); n != 1 {
		t.Errorf("the queued event's marker: %d rows erased by dpo@example.com, want 1", n)
	}
	if _, err := s.LoggedPayload(ctx, "evt_queued_about_them"); !errors.Is(err, queue.ErrPayloadGone) {
		t.Errorf("the queued event's payload after delivery: %v, want ErrPayloadGone", err)
	}
}

// The history of an object is its events, newest first; an event that
// arrived after a later-created one about the same object had been
// delivered is out of order.
func TestHistory_NewestFirstWithOutOfOrder(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	// in_1's events: created at 100, 200, 300; the one created at 200
	// arrives last, after 300's was processed.
	if _, err := bundle.pool.Exec(ctx, `
		INSERT INTO processed_webhook_events (event_id, event_type, endpoint, object_id, customer, stripe_created, received_at, processed_at, processed_how)
		VALUES ('evt_a', 'invoice.created', 'default', 'in_1', 'cus_1', to_timestamp(100), now() - interval '3 minutes', now() - interval '3 minutes', 'inline'),
		       ('evt_c', 'invoice.paid', 'default', 'in_1', 'cus_1', to_timestamp(300), now() - interval '2 minutes', now() - interval '2 minutes', 'inline'),
		       ('evt_other', 'invoice.paid', 'default', 'in_2', 'cus_2', to_timestamp(400), now(), now(), 'inline'),
		       ('evt_cus', 'customer.updated', 'default', 'cus_1', 'cus_1', to_timestamp(50), now() - interval '4 minutes', now(), 'inline')`); err != nil {
		t.Fatal(err)
	}
	// evt_b waits on the queue, dead: its queue row is its entry.
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_b", Status: queue.StatusDead})
	if _, err := bundle.pool.Exec(ctx, `UPDATE webhook_events SET event_type = 'invoice.finalized', object_id = 'in_1', customer = 'cus_1',
		stripe_created = to_timestamp(200), created_at = now() - interval '1 minute' WHERE event_id = 'evt_b'`); err != nil {
		t.Fatal(err)
	}

	h, err := s.History(ctx, "in_1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range h {
		s := e.EventID
		if e.OutOfOrder {
			s += "(out of order)"
		}
		if e.QueueStatus != nil {
			s += "(" + string(*e.QueueStatus) + ")"
		}
		got = append(got, s)
	}
	if want := "evt_b(out of order)(dead) evt_c evt_a"; strings.Join(got, " ") != want {
		t.Errorf("in_1's history: %v, want %s", got, want)
	}
	h, err = s.History(ctx, "cus_1")
	if err != nil || len(h) != 4 || h[3].EventID != "evt_cus" {
		t.Errorf("cus_1's history: %d events, %v; want its 4, the customer's own last", len(h), err)
	}
	e, err := s.LogEntry(ctx, "evt_b")
	if err != nil || !e.OutOfOrder {
		t.Errorf("evt_b's entry: %+v, %v; want out of order", e, err)
	}
	if e, err := s.LogEntry(ctx, "evt_c"); err != nil || e.OutOfOrder {
		t.Errorf("evt_c's entry: %+v, %v; want in order", e, err)
	}
}

// At a million events the history reads the object's and the customer's
// indexes, never the table; the time it takes is logged for the record,
// not asserted.
func TestHistory_UsesItsIndexesAtAMillionEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts a million rows")
	}
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	// 1M events about 100,000 invoices of 20,000 customers.
	if _, err := bundle.pool.Exec(ctx, `
		INSERT INTO processed_webhook_events (event_id, event_type, endpoint, object_id, object_type, customer, stripe_created,
		                                      received_at, processed_at, processed_how, payload)
		SELECT 'evt_' || i, 'invoice.paid', 'default', 'in_' || (i % 100000), 'invoice', 'cus_' || (i % 20000),
		       to_timestamp(1700000000 + i), now() - make_interval(secs => 1000000 - i), now(), 'inline', convert_to('{"id":"evt_' || i || '"}', 'UTF8')
		FROM generate_series(1, 1000000) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := bundle.pool.Exec(ctx, `ANALYZE processed_webhook_events`); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"in_4242", "cus_4242"} {
		rows, err := bundle.pool.Query(ctx, `EXPLAIN (FORMAT JSON) `+queue.HistorySQL, id, queue.MaxHistory)
		if err != nil {
			t.Fatal(err)
		}
		var raw []byte
		for rows.Next() {
			if err := rows.Scan(&raw); err != nil {
				t.Fatal(err)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		plan := queuetest.ParsePlan(t, raw)
		if !plan.Uses("processed_webhook_events_object") || !plan.Uses("processed_webhook_events_customer") {
			t.Errorf("history of %s does not read both indexes:\n%s", id, plan)
		}
		var seq bool
		plan.Walk(func(n queuetest.PlanNode) {
			seq = seq || (n.NodeType == "Seq Scan" && n.Relation == "processed_webhook_events")
		})
		if seq {
			t.Errorf("history of %s scans the whole event log:\n%s", id, plan)
		}
		start := time.Now()
		h, err := s.History(ctx, id)
		took := time.Since(start)
		if err != nil || len(h) == 0 {
			t.Fatalf("history of %s: %d, %v", id, len(h), err)
		}
		t.Logf("history of %s at 1M events: %d events in %v", id, len(h), took)
	}
}

// Erasure empties the payloads of the customer's dead events on the queue,
// which only a person's retry would send, keeping the rows with their
// metadata and who erased them; a retry of one, alone or in bulk, is
// refused, and no replay sends it. Pending events keep their payloads for
// their delivery: the marker is written without, and one that dies loses
// its payload then. Stripe's copy can take an erased payload's place.
func TestEraseCustomer_EmptiesDeadQueueRowsAndFlagsPendingOnes(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	queuetest.InsertLogged(t, bundle.pool, []queuetest.LoggedOpts{
		{EventID: "evt_processed", Customer: "cus_gone"},
		{EventID: "evt_processed_other", Customer: "cus_other"},
	})
	dead := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_dead", Status: queue.StatusDead, Attempts: 5})
	pending := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_pending", Status: queue.StatusRetrying, Attempts: 2})
	lastTry := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_last_try", Status: queue.StatusRetrying,
		Attempts: queue.MaxAttempts - 1, DueIn: time.Hour})
	otherDead := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_dead_other", Status: queue.StatusDead, Attempts: 5})
	if _, err := bundle.pool.Exec(ctx, `UPDATE webhook_events
		SET customer = CASE WHEN event_id = 'evt_dead_other' THEN 'cus_other' ELSE 'cus_gone' END`); err != nil {
		t.Fatal(err)
	}
	count := func(sql string) int64 { return queuetest.Count(t, bundle.pool, sql) }

	erased, err := s.EraseCustomer(ctx, "cus_gone", "dpo@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if want := (queue.Erased{Payloads: 2, Dead: 1, Pending: 2}); erased != want {
		t.Errorf("erased %+v, want %+v", erased, want)
	}
	if got := erased.Summary("cus_gone"); !strings.Contains(got, "(1 of them dead on the retry queue, which can no longer be retried)") ||
		!strings.Contains(got, "2 more about it are still on the retry queue") {
		t.Errorf("summary %q", got)
	}
	d, err := s.Event(ctx, dead.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Payload != "" || !d.PayloadErased() || d.Status != queue.StatusDead || d.PayloadErasedBy == nil ||
		*d.PayloadErasedBy != "dpo@example.com" || d.PayloadErasedAt == nil || d.EventType != "invoice.paid" || d.LastError == nil {
		t.Errorf("the dead row after erasure: payload %q, erased %v, status %s, by %v, at %v, type %s, error %v",
			d.Payload, d.PayloadErased(), d.Status, d.PayloadErasedBy, d.PayloadErasedAt, d.EventType, d.LastError)
	}
	if _, err := s.LoggedPayload(ctx, "evt_dead"); !errors.Is(err, queue.ErrPayloadGone) {
		t.Errorf("the dead event's logged payload: %v, want ErrPayloadGone", err)
	}
	if p, err := s.Event(ctx, pending.ID); err != nil || p.Payload != pending.Payload || p.PayloadErasedAt == nil || p.PayloadErased() {
		t.Errorf("the pending row: payload kept %v, flagged %v, erased %v (%v)", p.Payload == pending.Payload,
			p.PayloadErasedAt != nil, p.PayloadErased(), err)
	}
	if n := count(`SELECT count(*) FROM processed_webhook_events WHERE event_id = 'evt_processed'
		AND payload IS NULL AND payload_erased_by = 'dpo@example.com'`); n != 1 {
		t.Errorf("the processed event's marker: %d erased, want 1", n)
	}
	if n := count(`SELECT count(*) FROM processed_webhook_events WHERE event_id = 'evt_processed_other' AND payload IS NOT NULL
		AND payload_erased_at IS NULL`); n != 1 {
		t.Errorf("the other customer's marker lost its payload")
	}
	if o, err := s.Event(ctx, otherDead.ID); err != nil || o.Payload != otherDead.Payload || o.PayloadErasedAt != nil {
		t.Errorf("the other customer's dead row: payload kept %v, erased at %v (%v)", o.Payload == otherDead.Payload, o.PayloadErasedAt, err)
	}
	h, err := s.History(ctx, "cus_gone")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range h {
		if want := e.EventID == "evt_pending" || e.EventID == "evt_last_try"; e.HasPayload != want {
			t.Errorf("%s in the history: has a payload %v, want %v", e.EventID, e.HasPayload, want)
		}
	}

	// No retry sends the erased dead event, and no replay.
	if ok, err := s.RetryDead(ctx, dead.ID); ok || !errors.Is(err, queue.ErrPayloadErased) {
		t.Errorf("RetryDead(erased) = %v, %v; want false, ErrPayloadErased", ok, err)
	}
	if r, err := s.RetryDeadMatching(ctx, queue.EventFilter{}); err != nil || r != (queue.RetriedDead{Queued: 1, Erased: 1}) {
		t.Errorf("RetryDeadMatching = %+v, %v; want the other customer's queued and 1 erased skipped", r, err)
	}
	if d, err := s.Event(ctx, dead.ID); err != nil || d.Status != queue.StatusDead || d.ManualRetry {
		t.Errorf("the erased row after the retries: %s, manual %v (%v); want dead, untouched", d.Status, d.ManualRetry, err)
	}
	preview, err := s.PreviewReplay(ctx, queue.ReplayFilter{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour),
		Dead: true, Object: "cus_gone"})
	if err != nil || preview.Matching != 1 || preview.Unreplayable != 1 {
		t.Errorf("a replay of the dead events: %+v, %v; want 1 matching, unreplayable", preview, err)
	}

	// The pending event is delivered: its marker has no payload. The one on
	// its last attempt dies: its payload goes with it.
	if _, err := bundle.pool.Exec(ctx, `UPDATE webhook_events
		SET next_retry_at = CASE WHEN customer = 'cus_gone' THEN now() ELSE now() + interval '1 hour' END`); err != nil {
		t.Fatal(err)
	}
	claim, err := s.ClaimAttempts(ctx, 10, time.Minute)
	if err != nil || len(claim.Claimed) != 2 {
		t.Fatalf("claim: %d, %v; want the 2 pending events", len(claim.Claimed), err)
	}
	var settled []queue.Settled
	for _, c := range claim.Claimed {
		st := queue.Settled{Claimed: c, Kind: queue.SettleDone, Attempt: &queue.NewAttempt{Source: queue.SourceStripe,
			EventID: c.Event.EventID, Succeeded: true, Path: c.Path, Number: c.Event.Attempts}}
		if c.Event.EventID == "evt_last_try" {
			st.Kind = queue.SettleFailed
			st.Attempt.Succeeded, st.Attempt.Error = false, "downstream answered 500"
		}
		settled = append(settled, st)
	}
	if _, err := s.SettleAttempts(ctx, settled); err != nil {
		t.Fatal(err)
	}
	if n := count(`SELECT count(*) FROM processed_webhook_events WHERE event_id = 'evt_pending'
		AND payload IS NULL AND payload_erased_by = 'dpo@example.com'`); n != 1 {
		t.Errorf("the pending event's marker: %d written without its payload, want 1", n)
	}
	died, err := s.Event(ctx, lastTry.ID)
	if err != nil || died.Status != queue.StatusDead || died.Payload != "" || !died.PayloadErased() {
		t.Errorf("the event that died: %s, payload %q, erased %v (%v); want dead without its payload",
			died.Status, died.Payload, died.PayloadErased(), err)
	}

	// Stripe's copy takes the erased payload's place, once; the row stays
	// marked erased.
	if ok, err := s.RetryErased(ctx, "evt_dead", []byte(`{"id":"evt_dead","from":"stripe"}`)); !ok || err != nil {
		t.Fatalf("RetryErased = %v, %v", ok, err)
	}
	if ok, err := s.RetryErased(ctx, "evt_dead", []byte(`{}`)); ok || err != nil {
		t.Errorf("RetryErased again = %v, %v; want false: it is pending, not erased", ok, err)
	}
	if d, err := s.Event(ctx, dead.ID); err != nil || d.Status != queue.StatusFailed || d.Payload != `{"id":"evt_dead","from":"stripe"}` ||
		!d.ManualRetry || d.Attempts != 0 || d.PayloadErasedAt == nil {
		t.Errorf("after RetryErased: %s, %q, manual %v, attempts %d, erased at %v (%v)",
			d.Status, d.Payload, d.ManualRetry, d.Attempts, d.PayloadErasedAt, err)
	}
}

// A processed event's entry keeps the api_version the receiver read, from
// every writer of its marker: the receiver's settle of an event processed
// on its first delivery, and of one reconciliation recovered (the settle
// statement that can also queue), and the retry loop and a replay, which
// copy it from the queue row, where the queued event's entry showed it.
func TestEventLog_ProcessedEventsKeepTheirAPIVersion(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	const version = "2025-03-31.basil"
	withVersion := func(how queue.LogHow) *queue.LoggedEvent {
		l := logged(how, "in_v", "cus_v", time.Now())
		l.Meta.APIVersion = ptr(version)
		return l
	}
	queued := func(id string) *queue.FailedEvent {
		return &queue.FailedEvent{Source: queue.SourceStripe, EventID: id, EventType: "invoice.paid", Payload: []byte(`{}`),
			Error: "downstream answered 500", Meta: queue.EventMeta{Endpoint: "default", APIVersion: ptr(version), ObjectID: ptr("in_v")}}
	}

	d := take(t, s, "evt_inline")
	if w, err := s.SettleDeliveries(ctx, []queue.Received{{EventID: "evt_inline", Owner: d.Owner,
		Log: withVersion(queue.LogInline)}}); err != nil || !w[0] {
		t.Fatalf("settle evt_inline: %v, %v", w, err)
	}
	d = take(t, s, "evt_reconciled", "evt_retried", "evt_replayed")
	w, err := s.SettleDeliveries(ctx, []queue.Received{
		{EventID: "evt_reconciled", Owner: d.Owner, Log: withVersion(queue.LogReconcile),
			Attempt: &queue.NewAttempt{Source: queue.SourceStripe, EventID: "evt_reconciled", Succeeded: true, Path: queue.PathReconcile}},
		{EventID: "evt_retried", Owner: d.Owner, Queue: queued("evt_retried"), Log: withVersion(queue.LogQueued),
			Attempt: &queue.NewAttempt{Source: queue.SourceStripe, EventID: "evt_retried", Path: queue.PathInline, Error: "downstream answered 500"}},
		{EventID: "evt_replayed", Owner: d.Owner, Queue: queued("evt_replayed"), Wait: time.Hour, Log: withVersion(queue.LogDeferred)},
	})
	if err != nil || !w[0] || !w[1] || !w[2] {
		t.Fatalf("settle the others: %v, %v", w, err)
	}
	if e, err := s.LogEntry(ctx, "evt_replayed"); err != nil || e.APIVersion == nil || *e.APIVersion != version {
		t.Errorf("the queued evt_replayed's entry: %+v, %v; want api_version %s", e, err, version)
	}

	claim, err := s.ClaimAttempts(ctx, 10, time.Minute)
	if err != nil || len(claim.Claimed) != 1 || claim.Claimed[0].Event.EventID != "evt_retried" {
		t.Fatalf("claim: %+v, %v; want evt_retried", claim.Claimed, err)
	}
	c := claim.Claimed[0]
	if _, err := s.SettleAttempts(ctx, []queue.Settled{{Claimed: c, Kind: queue.SettleDone,
		Attempt: &queue.NewAttempt{Source: queue.SourceStripe, EventID: c.Event.EventID, Succeeded: true, Path: c.Path, Number: c.Event.Attempts}}}); err != nil {
		t.Fatal(err)
	}

	r, err := s.StartReplay(ctx, "api version", queue.ReplayFilter{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour),
		Pending: true}, "ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if ids := settleMembers(t, s, r.ID, 10, func(string) (queue.ReplaySettleKind, int, string) {
		return queue.ReplaySettleDelivered, 200, ""
	}); len(ids) != 1 || ids[0] != "evt_replayed" {
		t.Fatalf("the replay delivered %v, want evt_replayed", ids)
	}

	got := map[string]string{}
	rows, err := bundle.pool.Query(ctx, `SELECT event_id, processed_how || ' ' || coalesce(api_version, 'none')
		FROM event_log WHERE processed_at IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, v string
		if err := rows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		got[id] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"evt_inline": "inline " + version, "evt_reconciled": "reconcile " + version,
		"evt_retried": "retry " + version, "evt_replayed": "replay " + version}
	if len(got) != len(want) {
		t.Errorf("processed entries %v, want %v", got, want)
	}
	for id, v := range want {
		if got[id] != v {
			t.Errorf("%s's entry: %q, want %q", id, got[id], v)
		}
	}
	if e, err := s.LogEntry(ctx, "evt_retried"); err != nil || e.APIVersion == nil || *e.APIVersion != version ||
		e.EventMeta.APIVersion == nil || *e.EventMeta.APIVersion != version {
		t.Errorf("evt_retried's LogEntry: %+v, %v; want api_version %s", e, err, version)
	}
}
