package queuetest_test

// Tests of the seed's API kept for compatibility: the single-row functions
// of seed.go (Seed's TryLockEvent with queue.Lease.Release, MarkProcessed,
// Enqueue, ClaimDue, Resolve, ScheduleRetry, DeadEvents). hookd calls none
// of them; tests of many packages use them to put rows and leases in
// place, so each keeps the meaning tested here. The seed's contract itself
// is tested against what production calls, in queue/seed_test.go.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// seedDueEvent enqueues a failed event and backdates next_retry_at so it is
// due now (a new row is due in 60 s).
func seedDueEvent(t *testing.T, s *queue.Store, pool *pgxpool.Pool, eventType string) uuid.UUID {
	t.Helper()
	eventID := "evt_" + eventType
	if _, err := queuetest.NewSeed(s).Enqueue(t.Context(), queue.FailedEvent{
		Source: queue.SourceStripe, EventID: eventID, EventType: eventType,
		Payload: []byte("{}"), Error: "boom",
	}); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	var id uuid.UUID
	if err := pool.QueryRow(t.Context(), `
		UPDATE webhook_events SET next_retry_at = now() - interval '1 minute'
		WHERE event_type = $1 RETURNING id`, eventType).Scan(&id); err != nil {
		t.Fatalf("backdate next_retry_at: %v", err)
	}
	return id
}

func claim(t *testing.T, s *queue.Store) []queue.Event {
	t.Helper()
	events, err := queuetest.NewSeed(s).ClaimDue(t.Context(), queuetest.DefaultClaimBatch, queuetest.DefaultClaimWindow)
	if err != nil {
		t.Fatalf("claim due: %v", err)
	}
	return events
}

func TestMarkProcessed_IsIdempotent(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)

	// Serial re-marks (redelivery) must not error and must not duplicate the row.
	for range 3 {
		if err := queuetest.NewSeed(s).MarkProcessed(t.Context(), "evt_dedup_idem"); err != nil {
			t.Fatal(err)
		}
	}
	if got := queuetest.Markers(t, bundle.pool); got != 1 {
		t.Fatalf("markers after re-marking = %d, want 1: re-marking must be a no-op", got)
	}
}

// The core concurrency invariant: Stripe delivers at least once, so deliveries
// of the same event race the post-processing mark. ON CONFLICT DO NOTHING must
// collapse them to exactly one row, never a duplicate-key error.
func TestMarkProcessed_ConcurrentDuplicatesLeaveOneRow(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)

	const racers = 24
	start := make(chan struct{})
	errs := make(chan error, racers)
	var wg sync.WaitGroup
	for range racers {
		wg.Go(func() {
			<-start
			errs <- queuetest.NewSeed(s).MarkProcessed(context.Background(), "evt_dedup_race")
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("mark must not error under contention: %v", err)
		}
	}
	if got := queuetest.Markers(t, bundle.pool); got != 1 {
		t.Fatalf("markers after %d concurrent marks = %d, want exactly 1", racers, got)
	}
}

// While one delivery holds an event's lock, a second delivery of the same
// event gets ErrEventLocked at once instead of parking a connection, a
// different event locks freely, and the event is lockable again once the
// holder releases it.
func TestTryLockEvent_IsNonBlockingAndPerEvent(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := t.Context()

	held, err := queuetest.NewSeed(s).TryLockEvent(ctx, "evt_lock_A")
	if err != nil {
		t.Fatalf("first delivery must acquire the lock: %v", err)
	}

	// The timeout only turns a regression to a blocking lock into a failure
	// instead of a hang; the assertion is on the error.
	blockCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if tx, err := queuetest.NewSeed(s).TryLockEvent(blockCtx, "evt_lock_A"); !errors.Is(err, queue.ErrEventLocked) {
		if tx != nil {
			_ = tx.Release(ctx)
		}
		t.Fatalf("same-event lock while held: err = %v, want ErrEventLocked", err)
	}

	other, err := queuetest.NewSeed(s).TryLockEvent(ctx, "evt_lock_B")
	if err != nil {
		t.Fatalf("a distinct event must acquire its own lock: %v", err)
	}
	defer other.Release(ctx)

	// Released explicitly: the lease is free again once Release returns.
	if err := held.Release(ctx); err != nil {
		t.Fatalf("releasing the held lock: %v", err)
	}
	again, err := queuetest.NewSeed(s).TryLockEvent(ctx, "evt_lock_A")
	if err != nil {
		t.Fatalf("the lock must be re-acquirable once released: %v", err)
	}
	_ = again.Release(ctx)
}

// The seed's lock is a lease: a second TryLockEvent of a held event is
// refused at once, and a released or expired one is taken again.
func TestTryLockEvent_ExpiredLeaseIsTakenOver(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	held, err := queuetest.NewSeed(s).TryLockEvent(t.Context(), "evt_seed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := queuetest.NewSeed(s).TryLockEvent(t.Context(), "evt_seed"); !errors.Is(err, queue.ErrEventLocked) {
		t.Fatalf("while held: %v, want ErrEventLocked", err)
	}
	expireLeases(t, bundle.pool)
	again, err := queuetest.NewSeed(s).TryLockEvent(t.Context(), "evt_seed")
	if err != nil {
		t.Fatalf("after expiry: %v, want the lease", err)
	}
	if err := held.Release(t.Context()); !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("the old holder's release: %v, want ErrLeaseLost", err)
	}
	if err := again.Release(t.Context()); err != nil {
		t.Errorf("the new holder's release: %v", err)
	}
}

func TestEnqueue_SecondDeliveryOfAnEventKeepsOneRow(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	payload := []byte("{\"id\": \"evt_twice\",\n  \"type\": \"invoice.paid\"}")
	ev := queue.FailedEvent{Source: queue.SourceStripe, EventID: "evt_twice", EventType: "invoice.paid",
		Payload: payload, Signature: "t=1,v1=abc", Error: "downstream answered 500"}

	inserted, err := queuetest.NewSeed(s).Enqueue(ctx, ev)
	if err != nil || !inserted {
		t.Fatalf("first Enqueue = %v, %v; want inserted", inserted, err)
	}
	ev.Error = "second error"
	inserted, err = queuetest.NewSeed(s).Enqueue(ctx, ev)
	if err != nil || inserted {
		t.Fatalf("second Enqueue = %v, %v; want not inserted", inserted, err)
	}

	page, err := s.Events(ctx, queue.EventFilter{Status: queue.StatusFailed})
	if err != nil {
		t.Fatal(err)
	}
	if page.Total != 1 {
		t.Fatalf("queue rows = %d, want 1", page.Total)
	}
	got := page.Events[0]
	if got.Payload != string(payload) {
		t.Errorf("payload = %q, want the exact bytes %q", got.Payload, payload)
	}
	if got.LastError == nil || *got.LastError != "downstream answered 500" {
		t.Errorf("last_error = %v, want the first delivery's error", got.LastError)
	}
	if got.Status != queue.StatusFailed || got.Attempts != 0 {
		t.Errorf("new row = (%s, %d attempts), want (failed, 0)", got.Status, got.Attempts)
	}
	var dueIn float64
	if err := bundle.pool.QueryRow(ctx, `SELECT extract(epoch FROM next_retry_at - created_at)
		FROM webhook_events WHERE id = $1`, got.ID).Scan(&dueIn); err != nil {
		t.Fatal(err)
	}
	if dueIn != 60 {
		t.Errorf("a new row is due %v s after it was created, want 60", dueIn)
	}
}

func TestEnqueue_ConcurrentDeliveriesInsertOnce(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)

	const racers = 16
	start := make(chan struct{})
	var inserted sync.Map
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			<-start
			ok, err := queuetest.NewSeed(s).Enqueue(context.Background(), queue.FailedEvent{Source: queue.SourceStripe,
				EventID: "evt_race_enqueue", EventType: "invoice.paid", Payload: []byte("{}"), Error: "e"})
			if err != nil {
				t.Errorf("enqueue: %v", err)
			}
			inserted.Store(i, ok)
		})
	}
	close(start)
	wg.Wait()
	n := 0
	inserted.Range(func(_, v any) bool {
		if v.(bool) {
			n++
		}
		return true
	})
	if n != 1 {
		t.Fatalf("%d of %d concurrent Enqueue calls reported an insert, want exactly 1", n, racers)
	}
}

// A due event is claimed once, and an immediate second tick can't re-claim it:
// ClaimDue pushes next_retry_at out by the claim window as it selects.
func TestClaimDue_ClaimsAndDefers(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	seedDueEvent(t, s, bundle.pool, "claim.a")
	seedDueEvent(t, s, bundle.pool, "claim.b")

	if first := claim(t, s); len(first) != 2 {
		t.Fatalf("first tick claimed %d events, want both due events", len(first))
	}
	if second := claim(t, s); len(second) != 0 {
		t.Fatalf("immediate re-tick claimed %d events, want none: claimed events are deferred", len(second))
	}
}

// Two overlapping ticks racing for the same due events must partition them,
// never hand one event to both (that would run the processor twice).
func TestClaimDue_ConcurrentTicksDoNotDoubleClaim(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	for i := range 6 {
		seedDueEvent(t, s, bundle.pool, fmt.Sprintf("race.claim.%d", i))
	}

	start := make(chan struct{})
	var a, b []queue.Event
	var errA, errB error
	var wg sync.WaitGroup
	wg.Go(func() {
		<-start
		a, errA = queuetest.NewSeed(s).ClaimDue(context.Background(), queuetest.DefaultClaimBatch, queuetest.DefaultClaimWindow)
	})
	wg.Go(func() {
		<-start
		b, errB = queuetest.NewSeed(s).ClaimDue(context.Background(), queuetest.DefaultClaimBatch, queuetest.DefaultClaimWindow)
	})
	close(start)
	wg.Wait()
	if errA != nil || errB != nil {
		t.Fatalf("claims failed: %v, %v", errA, errB)
	}

	seen := map[uuid.UUID]int{}
	for _, e := range append(a, b...) {
		seen[e.ID]++
		if seen[e.ID] > 1 {
			t.Fatalf("event %s was claimed by both concurrent ticks", e.ID)
		}
	}
	if len(seen) != 6 {
		t.Fatalf("claimed %d distinct events (%d + %d), want every one of the 6 exactly once", len(seen), len(a), len(b))
	}
}

func TestClaimDue_ExcludesFutureAndExhausted(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()

	// Due now: eligible.
	seedDueEvent(t, s, bundle.pool, "elig.due")
	// Scheduled in the future (a new row is due in 60 s): not yet eligible.
	if _, err := queuetest.NewSeed(s).Enqueue(ctx, queue.FailedEvent{Source: queue.SourceStripe,
		EventID: "evt_elig.future", EventType: "elig.future", Payload: []byte("{}"), Error: "e"}); err != nil {
		t.Fatal(err)
	}
	// Due but out of attempts: must be skipped so it cannot storm.
	exhausted := seedDueEvent(t, s, bundle.pool, "elig.exhausted")
	if _, err := bundle.pool.Exec(ctx, `UPDATE webhook_events SET attempts = 5 WHERE id = $1`, exhausted); err != nil {
		t.Fatal(err)
	}

	due := claim(t, s)
	if len(due) != 1 || due[0].EventType != "elig.due" {
		var types []string
		for _, e := range due {
			types = append(types, e.EventType)
		}
		t.Fatalf("claimed %v, want only [elig.due]", types)
	}
}

func TestClaimDue_LargerBatchTakesAllDueInOrder(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	for i := range 25 {
		queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{
			EventID: fmt.Sprintf("evt_batch_%02d", i),
			DueIn:   -time.Duration(100-i) * time.Second,
		})
	}
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{DueIn: time.Hour})

	claimed, err := queuetest.NewSeed(s).ClaimDue(t.Context(), 100, queuetest.DefaultClaimWindow)
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 25 {
		t.Fatalf("claimed %d events with a batch of 100, want the 25 due ones", len(claimed))
	}
	few, err := queuetest.NewSeed(queue.New(bundle.pool)).ClaimDue(t.Context(), 100, queuetest.DefaultClaimWindow)
	if err != nil || len(few) != 0 {
		t.Fatalf("second claim = %d events, %v; want none", len(few), err)
	}

	// A batch smaller than what is due takes the longest-overdue first.
	s2, bundle2 := setup(t)
	for i := range 5 {
		queuetest.InsertEvent(t, bundle2.pool, queuetest.EventOpts{
			EventID: fmt.Sprintf("evt_order_%d", i),
			DueIn:   -time.Duration(10-i) * time.Minute,
		})
	}
	first, err := queuetest.NewSeed(s2).ClaimDue(t.Context(), 2, queuetest.DefaultClaimWindow)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, e := range first {
		got[e.EventID] = true
	}
	if len(first) != 2 || !got["evt_order_0"] || !got["evt_order_1"] {
		t.Fatalf("claimed %v, want the two longest-overdue events", got)
	}
}

func TestScheduleRetry_SetsRetryingAndBacksOff(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	id := seedDueEvent(t, s, bundle.pool, "backoff.evt")

	// First failed retry: attempt count 1, status retrying, deferred.
	status, err := queuetest.NewSeed(s).ScheduleRetry(t.Context(), id, 1, "still failing")
	if err != nil {
		t.Fatal(err)
	}
	if status != queue.StatusRetrying {
		t.Fatalf("ScheduleRetry returned %q, want retrying", status)
	}
	var gotStatus string
	var attempts int
	var deferred bool
	if err := bundle.pool.QueryRow(t.Context(), `
		SELECT status, attempts, next_retry_at > now() FROM webhook_events WHERE id = $1`, id).
		Scan(&gotStatus, &attempts, &deferred); err != nil {
		t.Fatal(err)
	}
	if gotStatus != "retrying" || attempts != 1 || !deferred {
		t.Fatalf("row = (%s, %d attempts, deferred %v), want (retrying, 1, true)", gotStatus, attempts, deferred)
	}

	// Just rescheduled, it is not due, so a tick skips it.
	if got := claim(t, s); len(got) != 0 {
		t.Fatalf("claimed %d events, want none: a just-rescheduled event is not due", len(got))
	}
}

func TestScheduleRetry_DeadLettersAtMaxAttempts(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	id := seedDueEvent(t, s, bundle.pool, "dead.evt")

	status, err := queuetest.NewSeed(s).ScheduleRetry(t.Context(), id, queue.MaxAttempts, "exhausted")
	if err != nil {
		t.Fatal(err)
	}
	if status != queue.StatusDead {
		t.Fatalf("status = %q, want dead", status)
	}
	var stored string
	if err := bundle.pool.QueryRow(t.Context(), `SELECT status FROM webhook_events WHERE id = $1`, id).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != "dead" {
		t.Fatalf("stored status = %q, want dead", stored)
	}

	if got := claim(t, s); len(got) != 0 {
		t.Fatalf("claimed %d events, want none: a dead event is never re-claimed", len(got))
	}
	dead, err := queuetest.NewSeed(s).DeadEvents(t.Context(), 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead.Events) != 1 || dead.Events[0].ID != id {
		t.Fatalf("dead list = %v, want the dead event on the operator list", dead.Events)
	}
}

func TestScheduleRetry_FollowsTheBackoffTable(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	ev := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{})

	want := map[int]float64{1: 300, 2: 1800, 3: 7200, 4: 86400}
	for attempts := 1; attempts <= 4; attempts++ {
		if _, err := queuetest.NewSeed(s).ScheduleRetry(ctx, ev.ID, attempts, "still failing"); err != nil {
			t.Fatal(err)
		}
		var delay float64
		if err := bundle.pool.QueryRow(ctx, `SELECT extract(epoch FROM next_retry_at - last_attempt_at)
			FROM webhook_events WHERE id = $1`, ev.ID).Scan(&delay); err != nil {
			t.Fatal(err)
		}
		if delay != want[attempts] {
			t.Errorf("after %d failed retries the next is %v s later, want %v", attempts, delay, want[attempts])
		}
	}
	if _, err := queuetest.NewSeed(s).ScheduleRetry(ctx, uuid.New(), 1, "x"); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("ScheduleRetry(unknown) = %v, want ErrNotFound", err)
	}
}

func TestResolve_WritesMarkerWithDelete(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ev := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_resolve"})

	if err := queuetest.NewSeed(s).Resolve(t.Context(), ev.ID); err != nil {
		t.Fatal(err)
	}
	if !isProcessed(t, s, "evt_resolve") {
		t.Fatal("a resolved event must have its dedup marker")
	}
	if err := queuetest.NewSeed(s).Resolve(t.Context(), ev.ID); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("second Resolve = %v, want ErrNotFound", err)
	}
}

// If the marker cannot be written, the queue row must stay: an event with
// neither would be lost.
func TestResolve_IsAtomic(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	ev := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_atomic"})

	if _, err := bundle.pool.Exec(ctx, `
		CREATE FUNCTION refuse_marker() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN RAISE EXCEPTION 'marker refused'; END $$;
		CREATE TRIGGER refuse_marker BEFORE INSERT ON processed_webhook_events
		FOR EACH ROW EXECUTE FUNCTION refuse_marker();`); err != nil {
		t.Fatal(err)
	}
	if err := queuetest.NewSeed(s).Resolve(ctx, ev.ID); err == nil {
		t.Fatal("Resolve succeeded although the marker could not be written")
	}
	if _, err := s.Event(ctx, ev.ID); err != nil {
		t.Fatalf("the queue row must survive a failed Resolve: %v", err)
	}
	if isProcessed(t, s, "evt_atomic") {
		t.Fatal("no marker may exist after a failed Resolve")
	}
}

func TestResolve_RemovesEventFromQueue(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	id := seedDueEvent(t, s, bundle.pool, "done.evt")

	if err := queuetest.NewSeed(s).Resolve(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	var remaining int
	if err := bundle.pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_events WHERE id = $1`, id).Scan(&remaining); err != nil {
		t.Fatal(err)
	}
	if remaining != 0 {
		t.Fatalf("%d rows remain, want 0: a processed event is deleted from the queue", remaining)
	}
}

// testBundle is the pool of a test's own database, for the assertions it
// makes in SQL and the rows it puts in place.
type testBundle struct {
	pool *pgxpool.Pool
}

// setup returns a Store on a fresh, migrated database of t's own, and the
// bundle holding its pool.
func setup(t testing.TB) (*queue.Store, *testBundle) {
	t.Helper()
	s, pool := queuetest.NewStore(t)
	return s, &testBundle{pool: pool}
}

// expireLeases makes every lease expired, as if its holder's deadline and
// margin had passed.
func expireLeases(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), `UPDATE webhook_leases SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
}

func isProcessed(t *testing.T, s *queue.Store, eventID string) bool {
	t.Helper()
	ok, err := queuetest.NewSeed(s).IsProcessed(t.Context(), eventID)
	if err != nil {
		t.Fatalf("is processed: %v", err)
	}
	return ok
}
