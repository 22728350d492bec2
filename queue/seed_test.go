package queue_test

// The twelve contract tests of the seed's db::webhook_events module, ported
// with the same intent, and the atomicity of a success's outcome that hookd
// adds to the seed's resolve, each held against what production calls in
// the seed's place: the receiver's take and settle (Exchange,
// SettleDeliveries), the retry loop's claim and settle (ClaimAttempts,
// SettleAttempts), and the seed's functions production kept as its own
// (PruneProcessed, RetryDead), read back with the seed's IsProcessed.
// queuetest/seed.go's header maps each contract to its function; the
// seed's single-row API there (queuetest.Seed), kept for the tests that
// put rows in place with it, is tested in queuetest/seed_test.go.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// claimBatch is the retry loop's batch for the claims of these tests.
const claimBatch = 10

func isProcessed(t *testing.T, s *queue.Store, eventID string) bool {
	t.Helper()
	ok, err := queuetest.NewSeed(s).IsProcessed(t.Context(), eventID)
	if err != nil {
		t.Fatalf("is processed: %v", err)
	}
	return ok
}

// settleProcessed writes the outcome of a delivery whose app accepted it, as
// the receiver does: the marker, with the lease's release.
func settleProcessed(t *testing.T, s *queue.Store, eventID string, owner uuid.UUID) {
	t.Helper()
	written, err := s.SettleDeliveries(t.Context(), []queue.Received{{EventID: eventID, Owner: owner}})
	if err != nil || !written[0] {
		t.Fatalf("settle %s processed: written %v, %v", eventID, written, err)
	}
}

// processInline delivers eventID for the first time and settles it
// processed.
func processInline(t *testing.T, s *queue.Store, eventID string) {
	t.Helper()
	d := take(t, s, eventID)
	if d.States[0] != queue.DeliveryNew {
		t.Fatalf("first delivery of %s: %v, want new", eventID, d.States[0])
	}
	settleProcessed(t, s, eventID, d.Owner)
}

// failInline delivers eventID for the first time and settles it failed, as
// the receiver does when the app refuses it: the event goes on the retry
// queue, due after RetryDelay(0), with its inline attempt. It returns the
// queue row's id.
func failInline(t *testing.T, s *queue.Store, pool *pgxpool.Pool, eventID string) uuid.UUID {
	t.Helper()
	d := take(t, s, eventID)
	if d.States[0] != queue.DeliveryNew {
		t.Fatalf("first delivery of %s: %v, want new", eventID, d.States[0])
	}
	const refusal = "downstream answered 500"
	written, err := s.SettleDeliveries(t.Context(), []queue.Received{{
		EventID: eventID, Owner: d.Owner,
		Queue: &queue.FailedEvent{Source: queue.SourceStripe, EventID: eventID, EventType: "invoice.paid",
			Payload: []byte(`{"id":"` + eventID + `","object":"event","type":"invoice.paid"}`), Error: refusal},
		Wait:    s.RetryDelay(0),
		Attempt: &queue.NewAttempt{Source: queue.SourceStripe, EventID: eventID, Path: queue.PathInline, Error: refusal},
	}})
	if err != nil || !written[0] {
		t.Fatalf("settle %s failed: written %v, %v", eventID, written, err)
	}
	var id uuid.UUID
	if err := pool.QueryRow(t.Context(), `SELECT id FROM webhook_events WHERE event_id = $1`, eventID).Scan(&id); err != nil {
		t.Fatalf("the queue row of %s: %v", eventID, err)
	}
	return id
}

// makeDue backdates the next retry of the queue rows ids, so a claim finds
// them due now instead of after their backoff.
func makeDue(t *testing.T, pool *pgxpool.Pool, ids ...uuid.UUID) {
	t.Helper()
	tag, err := pool.Exec(t.Context(), `UPDATE webhook_events SET next_retry_at = now() - interval '1 minute' WHERE id = ANY ($1)`, ids)
	if err != nil || tag.RowsAffected() != int64(len(ids)) {
		t.Fatalf("backdate %d rows: %d updated, %v", len(ids), tag.RowsAffected(), err)
	}
}

// claimAttempts claims due events as the retry loop does.
func claimAttempts(t *testing.T, s *queue.Store) queue.Attempts {
	t.Helper()
	a, err := s.ClaimAttempts(t.Context(), claimBatch, time.Minute)
	if err != nil {
		t.Fatalf("claim attempts: %v", err)
	}
	return a
}

// claimOne claims due events and requires that they be exactly the one
// with queue row id.
func claimOne(t *testing.T, s *queue.Store, id uuid.UUID) queue.Claimed {
	t.Helper()
	a := claimAttempts(t, s)
	if len(a.Claimed) != 1 || a.Claimed[0].Event.ID != id {
		t.Fatalf("claimed %d events %+v, want only %s", len(a.Claimed), a.Claimed, id)
	}
	return a.Claimed[0]
}

// settleAttempt writes the outcome of kind of the claimed event's attempt,
// as the retry loop does, and requires that it be written.
func settleAttempt(t *testing.T, s *queue.Store, c queue.Claimed, kind queue.SettleKind, errText string) queue.SettledState {
	t.Helper()
	states, err := s.SettleAttempts(t.Context(), []queue.Settled{{Claimed: c, Kind: kind, Attempt: &queue.NewAttempt{
		Source: c.Event.Source, EventID: c.Event.EventID, Succeeded: kind == queue.SettleDone,
		Error: errText, Path: c.Path, Number: c.Event.Attempts}}})
	if err != nil || !states[0].Written {
		t.Fatalf("settle attempt %d of %s %s: %+v, %v", c.Event.Attempts, c.Event.EventID, kind, states, err)
	}
	return states[0]
}

// failUntilDead runs the queue row id through the retry loop's every
// attempt, each failed, and returns the last one's settled state. No other
// row may be due meanwhile.
func failUntilDead(t *testing.T, s *queue.Store, pool *pgxpool.Pool, id uuid.UUID) queue.SettledState {
	t.Helper()
	var last queue.SettledState
	for attempt := 1; attempt <= queue.MaxAttempts; attempt++ {
		makeDue(t, pool, id)
		c := claimOne(t, s, id)
		if c.Event.Attempts != attempt {
			t.Fatalf("claim %d counts attempt %d", attempt, c.Event.Attempts)
		}
		last = settleAttempt(t, s, c, queue.SettleFailed, "still failing")
	}
	return last
}

func leaseCount(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	return queuetest.Count(t, pool, `SELECT count(*) FROM webhook_leases`)
}

// ── dedup marker (processed_webhook_events) ──────────────────────────────────

// The marker is written with the outcome, never before: an event taken but
// not yet settled is not processed, and once settled its next delivery is
// found processed in the same take that would lease it, which gives the
// lease back at once.
func TestContract_ProcessedEventIsFoundProcessed(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	const id = "evt_dedup_basic"

	if isProcessed(t, s, id) {
		t.Fatal("an unseen event must not read as processed")
	}
	d := take(t, s, id)
	if d.States[0] != queue.DeliveryNew {
		t.Fatalf("first delivery: %v, want new", d.States[0])
	}
	if isProcessed(t, s, id) {
		t.Fatal("an event whose processor has not ended must not read as processed")
	}
	settleProcessed(t, s, id, d.Owner)
	if !isProcessed(t, s, id) {
		t.Fatal("a settled event must read as processed")
	}
	if again := take(t, s, id); again.States[0] != queue.DeliveryProcessed {
		t.Fatalf("redelivery: %v, want processed", again.States[0])
	}
	if n := leaseCount(t, bundle.pool); n != 0 {
		t.Fatalf("%d leases held after the redelivery of a processed event, want 0", n)
	}
}

// Redeliveries of a processed event, one in the very round trip that
// settles it (the receiver under load), each find the marker and none adds
// a row.
func TestContract_RedeliveriesLeaveOneMarker(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	const id = "evt_dedup_idem"

	d := take(t, s, id)
	if d.States[0] != queue.DeliveryNew {
		t.Fatalf("first delivery: %v, want new", d.States[0])
	}
	x, err := s.Exchange(t.Context(), queue.Exchange{Source: queue.SourceStripe,
		Settle: []queue.Received{{EventID: id, Owner: d.Owner}},
		Take:   []queue.Delivery{{EventID: id, Path: queue.PathInline}}, ProcessFor: time.Minute})
	if err != nil || !x.Written[0] {
		t.Fatalf("settle with a redelivery: written %v, %v", x.Written, err)
	}
	if next := x.Taken; next.States[0] != queue.DeliveryProcessed {
		t.Fatalf("a redelivery in the settling round trip: %v, want processed: the outcome is written first", next.States[0])
	}
	for i := range 3 {
		if again := take(t, s, id); again.States[0] != queue.DeliveryProcessed {
			t.Fatalf("redelivery %d: %v, want processed", i+1, again.States[0])
		}
	}
	if got := queuetest.Markers(t, bundle.pool); got != 1 {
		t.Fatalf("markers after redeliveries = %d, want 1", got)
	}
	if n := leaseCount(t, bundle.pool); n != 0 {
		t.Fatalf("%d leases held after the redeliveries, want 0", n)
	}
}

// The core concurrency invariant: Stripe delivers at least once, so
// deliveries of one event race. Exactly one takes the event as new and
// writes its marker; every other is turned away busy while it runs, or
// finds the marker after: one processor run and one row per event, never a
// duplicate-key error.
func TestContract_ConcurrentDuplicatesLeaveOneMarker(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	const racers, events = 24, 8
	ids := make([]string, events)
	for i := range ids {
		ids[i] = "evt_dedup_race_" + string(rune('a'+i))
	}

	var mu sync.Mutex
	states := make(map[string]map[queue.DeliveryState]int, events)
	for _, id := range ids {
		states[id] = map[queue.DeliveryState]int{}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for r := range racers {
		wg.Go(func() {
			<-start
			// Each racer goes through the events in its own order, so every
			// event has takers and settlers at once.
			for k := range events {
				id := ids[(r+k)%events]
				d, err := s.TakeDeliveries(context.Background(), queue.SourceStripe,
					[]queue.Delivery{{EventID: id, Path: queue.PathInline}}, time.Minute)
				if err != nil {
					t.Errorf("take %s: %v", id, err)
					return
				}
				mu.Lock()
				states[id][d.States[0]]++
				mu.Unlock()
				if d.States[0] != queue.DeliveryNew {
					continue
				}
				written, err := s.SettleDeliveries(context.Background(), []queue.Received{{EventID: id, Owner: d.Owner}})
				if err != nil || !written[0] {
					t.Errorf("settle %s: written %v, %v", id, written, err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}

	for _, id := range ids {
		got := states[id]
		if got[queue.DeliveryNew] != 1 {
			t.Errorf("%s taken as new %d times by %d racers, want exactly once", id, got[queue.DeliveryNew], racers)
		}
		if rest := got[queue.DeliveryBusy] + got[queue.DeliveryProcessed]; rest != racers-1 {
			t.Errorf("%s: %d deliveries busy or processed, want the other %d (states %v)", id, rest, racers-1, got)
		}
	}
	if got := queuetest.Markers(t, bundle.pool); got != events {
		t.Fatalf("markers after %d racers delivered %d events = %d, want exactly %d", racers, events, got, events)
	}
	if n := leaseCount(t, bundle.pool); n != 0 {
		t.Fatalf("%d leases left after every outcome, want 0", n)
	}
}

// ── per-event lock (webhook_leases) ──────────────────────────────────────────

// While one delivery holds an event's lease, a second delivery of the same
// event is answered busy at once instead of parking a connection (no
// transaction stays open while the lease is held), a different event is
// taken freely, and once the holder's outcome gives the lease back the next
// delivery is not busy but finds the marker.
func TestContract_LeaseTurnsASecondDeliveryAwayAtOnce(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()

	held := take(t, s, "evt_lock_A")
	if held.States[0] != queue.DeliveryNew {
		t.Fatalf("first delivery: %v, want new", held.States[0])
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND state LIKE 'idle in transaction%'`); n != 0 {
		t.Fatalf("%d sessions idle in transaction while a lease is held, want 0", n)
	}

	// The timeout only turns a regression to a blocking lock into a failure
	// instead of a hang; the assertion is on the state.
	blockCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	second, err := s.TakeDeliveries(blockCtx, queue.SourceStripe,
		[]queue.Delivery{{EventID: "evt_lock_A", Path: queue.PathInline}}, time.Minute)
	if err != nil || second.States[0] != queue.DeliveryBusy {
		t.Fatalf("same-event delivery while held: %v, %v; want busy", second.States, err)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_leases WHERE event_id = 'evt_lock_A' AND owner = $1::uuid`,
		held.Owner.String()); n != 1 {
		t.Fatal("the busy delivery took the lease from its holder")
	}

	other := take(t, s, "evt_lock_B")
	if other.States[0] != queue.DeliveryNew {
		t.Fatalf("a distinct event while evt_lock_A is held: %v, want new", other.States[0])
	}

	written, err := s.SettleDeliveries(ctx, []queue.Received{
		{EventID: "evt_lock_A", Owner: held.Owner}, {EventID: "evt_lock_B", Owner: other.Owner}})
	if err != nil || !written[0] || !written[1] {
		t.Fatalf("the holders' outcomes: written %v, %v", written, err)
	}
	after := take(t, s, "evt_lock_A", "evt_lock_B")
	if after.States[0] != queue.DeliveryProcessed || after.States[1] != queue.DeliveryProcessed {
		t.Fatalf("deliveries after the outcomes: %v, want both processed", after.States)
	}
	if n := leaseCount(t, bundle.pool); n != 0 {
		t.Fatalf("%d leases left, want 0", n)
	}
}

// ── marker retention ─────────────────────────────────────────────────────────

func TestContract_PruneRespectsTheRetentionBoundary(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()

	for _, id := range []string{"evt_old", "evt_fresh"} {
		processInline(t, s, id)
	}
	// Age the old marker past a 30-day retention; the fresh one stays at now().
	if _, err := bundle.pool.Exec(ctx, `UPDATE processed_webhook_events
		SET processed_at = now() - interval '40 days' WHERE event_id = 'evt_old'`); err != nil {
		t.Fatal(err)
	}

	deleted, err := s.PruneProcessed(ctx, 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if deleted != 1 {
		t.Fatalf("pruned %d markers, want exactly the aged one", deleted)
	}
	if isProcessed(t, s, "evt_old") {
		t.Fatal("the aged marker must be gone")
	}
	if !isProcessed(t, s, "evt_fresh") {
		t.Fatal("a within-retention marker must survive the prune")
	}
	d := take(t, s, "evt_fresh", "evt_old")
	if d.States[0] != queue.DeliveryProcessed || d.States[1] != queue.DeliveryNew {
		t.Fatalf("redeliveries after the prune: %v, want [fresh processed, old new]", d.States)
	}
}

// ── retry queue (webhook_events) claim-and-defer ─────────────────────────────

// A due event is claimed once, its attempt counted and its next_retry_at
// pushed to when the claim's lease expires, so an immediate second claim
// (an overlapping tick, another replica) finds nothing due.
func TestContract_ClaimDefersRowsToTheLeaseExpiry(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	a := failInline(t, s, bundle.pool, "evt_claim_a")
	b := failInline(t, s, bundle.pool, "evt_claim_b")
	makeDue(t, bundle.pool, a, b)

	first := claimAttempts(t, s)
	if len(first.Claimed) != 2 {
		t.Fatalf("first claim took %d events, want both due events", len(first.Claimed))
	}
	for _, c := range first.Claimed {
		if c.Event.Attempts != 1 || c.Path != queue.PathRetry || c.Dead || c.Processed {
			t.Errorf("%s claimed as %+v, want its first retry", c.Event.EventID, c)
		}
	}
	if n := queuetest.Count(t, bundle.pool, `
		SELECT count(*) FROM webhook_events e JOIN webhook_leases l USING (event_id)
		WHERE l.owner = $1::uuid AND e.next_retry_at = l.expires_at AND e.next_retry_at > now()`,
		first.Claimed[0].Owner.String()); n != 2 {
		t.Fatalf("%d claimed rows deferred to their lease's expiry, want 2", n)
	}
	if second := claimAttempts(t, s); len(second.Claimed) != 0 {
		t.Fatalf("an immediate second claim took %d events, want none: claimed events are deferred", len(second.Claimed))
	}
}

// Overlapping claims racing for the same due events partition them, never
// hand one event to two (that would run its processor twice), and between
// them claim every one.
func TestContract_ConcurrentClaimsNeverClaimARowTwice(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	const rows, claimers, batch = 60, 12, 4
	ids := make([]uuid.UUID, rows)
	for i := range ids {
		ids[i] = failInline(t, s, bundle.pool, "evt_race_claim_"+uuid.NewString()[:8])
	}
	makeDue(t, bundle.pool, ids...)

	start := make(chan struct{})
	claimed := make([][]queue.Claimed, claimers)
	var wg sync.WaitGroup
	for i := range claimers {
		wg.Go(func() {
			<-start
			// Claim until nothing is due: an empty claim means every due
			// row was claimed or being claimed by another.
			for {
				a, err := s.ClaimAttempts(context.Background(), batch, time.Minute)
				if err != nil {
					t.Errorf("claimer %d: %v", i, err)
					return
				}
				if len(a.Claimed) == 0 {
					return
				}
				claimed[i] = append(claimed[i], a.Claimed...)
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}

	seen := map[uuid.UUID]int{}
	total := 0
	for _, cs := range claimed {
		for _, c := range cs {
			seen[c.Event.ID]++
			total++
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("event %s claimed %d times by concurrent claims, want once", id, n)
		}
	}
	if total != rows || len(seen) != rows {
		t.Fatalf("%d claims of %d distinct events, want each of the %d exactly once", total, len(seen), rows)
	}
	// The claim is counted; each attempt counts when its run starts.
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE attempts = 0 AND claims = 1`); n != rows {
		t.Fatalf("%d rows with one claim and no attempt counted yet, want %d", n, rows)
	}
	if n := leaseCount(t, bundle.pool); n != rows {
		t.Fatalf("%d leases held, want one per claimed row (%d)", n, rows)
	}
}

// A claim takes only what is due: not an event whose backoff has not
// passed, not a dead one, and not one out of attempts with none in flight
// (the seed's guard against a retry storm when the dead-letter write
// failed).
func TestContract_ClaimsExcludeFutureDeadAndExhaustedRows(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()

	dead := failInline(t, s, bundle.pool, "evt_elig_dead")
	if st := failUntilDead(t, s, bundle.pool, dead); st.Status != queue.StatusDead {
		t.Fatalf("after %d failed attempts: %s, want dead", queue.MaxAttempts, st.Status)
	}
	due := failInline(t, s, bundle.pool, "evt_elig_due")
	// Just queued: due after RetryDelay(0), not now.
	future := failInline(t, s, bundle.pool, "evt_elig_future")
	exhausted := failInline(t, s, bundle.pool, "evt_elig_exhausted")
	if _, err := bundle.pool.Exec(ctx, `UPDATE webhook_events SET attempts = $2, status = 'retrying' WHERE id = $1`,
		exhausted, queue.MaxAttempts); err != nil {
		t.Fatal(err)
	}
	makeDue(t, bundle.pool, due, dead, exhausted)

	got := claimAttempts(t, s)
	if len(got.Claimed) != 1 || got.Claimed[0].Event.ID != due {
		var eventIDs []string
		for _, c := range got.Claimed {
			eventIDs = append(eventIDs, c.Event.EventID)
		}
		t.Fatalf("claimed %v, want only [evt_elig_due]", eventIDs)
	}
	for id, want := range map[uuid.UUID]struct {
		status   queue.Status
		attempts int
	}{dead: {queue.StatusDead, queue.MaxAttempts}, future: {queue.StatusFailed, 0}, exhausted: {queue.StatusRetrying, queue.MaxAttempts}} {
		e, err := s.Event(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status != want.status || e.Attempts != want.attempts || e.Claims != 0 {
			t.Errorf("%s after the claim: %s, %d attempts, %d claims; want it untouched", e.EventID, e.Status, e.Attempts, e.Claims)
		}
	}
}

// ── backoff and dead-lettering ───────────────────────────────────────────────

// Each failed retry leaves the event retrying, its attempts counted, due
// after the policy's backoff for that attempt (RetryDelay), so a claim
// right after skips it.
func TestContract_FailedAttemptRetriesAfterTheBackoff(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	id := failInline(t, s, bundle.pool, "evt_backoff")

	for attempt := 1; attempt < queue.MaxAttempts; attempt++ {
		makeDue(t, bundle.pool, id)
		c := claimOne(t, s, id)
		st := settleAttempt(t, s, c, queue.SettleFailed, "still failing")
		if st.Status != queue.StatusRetrying {
			t.Fatalf("attempt %d failed: status %q, want retrying", attempt, st.Status)
		}
		var status string
		var attempts int
		var wait float64
		if err := bundle.pool.QueryRow(ctx, `
			SELECT status, attempts, extract(epoch FROM next_retry_at - last_attempt_at) FROM webhook_events WHERE id = $1`, id).
			Scan(&status, &attempts, &wait); err != nil {
			t.Fatal(err)
		}
		if want := queue.RetryDelay(attempt).Seconds(); status != "retrying" || attempts != attempt || wait != want {
			t.Fatalf("after failed attempt %d: (%s, %d attempts, next in %v s), want (retrying, %d, %v s)",
				attempt, status, attempts, wait, attempt, want)
		}
		// Just rescheduled, it is not due, so a claim skips it.
		if got := claimAttempts(t, s); len(got.Claimed) != 0 {
			t.Fatalf("claimed %d events after attempt %d, want none: a just-rescheduled event is not due", len(got.Claimed), attempt)
		}
	}
}

// The fifth failed retry makes the event dead: it is never claimed again,
// however overdue, and it is on the dead list support staff work from.
func TestContract_FifthFailureMakesTheEventDead(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	id := failInline(t, s, bundle.pool, "evt_dead")

	if st := failUntilDead(t, s, bundle.pool, id); st.Status != queue.StatusDead {
		t.Fatalf("attempt %d failed: status %q, want dead", queue.MaxAttempts, st.Status)
	}
	e, err := s.Event(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != queue.StatusDead || e.Attempts != queue.MaxAttempts {
		t.Fatalf("stored row: %s, %d attempts; want dead, %d", e.Status, e.Attempts, queue.MaxAttempts)
	}

	makeDue(t, bundle.pool, id)
	if got := claimAttempts(t, s); len(got.Claimed) != 0 {
		t.Fatalf("claimed %d events, want none: a dead event is never claimed again", len(got.Claimed))
	}
	dead, err := s.Events(ctx, queue.EventFilter{Status: queue.StatusDead, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	if dead.Total != 1 || len(dead.Events) != 1 || dead.Events[0].ID != id {
		t.Fatalf("dead list = %d %v, want the dead event", dead.Total, dead.Events)
	}
	history, err := s.Attempts(ctx, queue.SourceStripe, "evt_dead")
	if err != nil {
		t.Fatal(err)
	}
	if len(history) != 1+queue.MaxAttempts {
		t.Fatalf("%d attempts in the history, want the inline one and %d retries", len(history), queue.MaxAttempts)
	}
}

// A person's retry of a dead event sends it back to the queue with its
// attempts started over, so the next claim takes it, as a person's
// attempt; a row that is not dead is left as it is.
func TestContract_RetryDeadResurrectsOnlyDeadRows(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()

	dead := failInline(t, s, bundle.pool, "evt_resurrect_dead")
	failUntilDead(t, s, bundle.pool, dead)

	live := failInline(t, s, bundle.pool, "evt_resurrect_live")
	makeDue(t, bundle.pool, live)
	if ok, err := s.RetryDead(ctx, live); err != nil || ok {
		t.Fatalf("RetryDead(live) = %v, %v; want false: it acts only on dead rows", ok, err)
	}
	if e, err := s.Event(ctx, live); err != nil || e.Status != queue.StatusFailed || e.ManualRetry {
		t.Fatalf("the live row after RetryDead: %+v, %v; want it untouched", e, err)
	}

	if ok, err := s.RetryDead(ctx, dead); err != nil || !ok {
		t.Fatalf("RetryDead(dead) = %v, %v; want true", ok, err)
	}
	e, err := s.Event(ctx, dead)
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != queue.StatusFailed || e.Attempts != 0 {
		t.Fatalf("resurrected row: %s, %d attempts; want failed, 0: it returns to the queue", e.Status, e.Attempts)
	}
	// The seed stopped at the status, leaving attempts at 5 where the claim
	// can never reach it; hookd starts the attempts over, so it is claimed.
	claimed := claimAttempts(t, s)
	byID := map[uuid.UUID]queue.Claimed{}
	for _, c := range claimed.Claimed {
		byID[c.Event.ID] = c
	}
	if len(byID) != 2 {
		t.Fatalf("claimed %d events, want the resurrected one and the due live one", len(byID))
	}
	if c, ok := byID[dead]; !ok || c.Path != queue.PathManual || c.Event.Attempts != 1 {
		t.Fatalf("the resurrected event's claim: %+v (claimed %v); want its first attempt over, manual", c, ok)
	}
}

// ── resolve ──────────────────────────────────────────────────────────────────

// A retry that succeeds removes the queue row and writes the marker with
// the lease's release: the event is found processed and not queued.
func TestContract_DoneAttemptRemovesTheRowAndWritesTheMarker(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	id := failInline(t, s, bundle.pool, "evt_done")
	makeDue(t, bundle.pool, id)

	settleAttempt(t, s, claimOne(t, s, id), queue.SettleDone, "")
	if remaining := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE id = $1`, id); remaining != 0 {
		t.Fatalf("%d rows remain, want 0: a processed event is deleted from the queue", remaining)
	}
	if !isProcessed(t, s, "evt_done") {
		t.Fatal("a resolved event must have its dedup marker")
	}
	if n := leaseCount(t, bundle.pool); n != 0 {
		t.Fatalf("%d leases left, want 0", n)
	}
	if d := take(t, s, "evt_done"); d.States[0] != queue.DeliveryProcessed {
		t.Fatalf("redelivery of the resolved event: %v, want processed", d.States[0])
	}
}

// The row's removal and the marker are one statement: when the marker
// cannot be written the row stays, and so does the lease, for the outcome
// to be written again; there is never an event with neither (it would be
// lost).
func TestContract_DoneAttemptIsAtomic(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	id := failInline(t, s, bundle.pool, "evt_atomic")
	makeDue(t, bundle.pool, id)
	c := claimOne(t, s, id)

	if _, err := bundle.pool.Exec(ctx, `
		CREATE FUNCTION refuse_marker() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN RAISE EXCEPTION 'marker refused'; END $$;
		CREATE TRIGGER refuse_marker BEFORE INSERT ON processed_webhook_events
		FOR EACH ROW EXECUTE FUNCTION refuse_marker();`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SettleAttempts(ctx, []queue.Settled{{Claimed: c, Kind: queue.SettleDone}}); err == nil {
		t.Fatal("the done outcome was settled although the marker could not be written")
	}
	if _, err := s.Event(ctx, id); err != nil {
		t.Fatalf("the queue row must survive a failed settle: %v", err)
	}
	if isProcessed(t, s, "evt_atomic") {
		t.Fatal("no marker may exist after a failed settle")
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_leases WHERE event_id = 'evt_atomic' AND owner = $1::uuid`,
		c.Owner.String()); n != 1 {
		t.Fatal("the failed settle gave the lease back without the outcome")
	}
}
