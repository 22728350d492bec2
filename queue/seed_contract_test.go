package queue_test

// The twelve contract tests of the seed's db::webhook_events module, ported
// with the same intent and assertions. Tests of what hookd adds beyond the
// seed are in store_test.go.

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
)

// seedDueEvent enqueues a failed event and backdates next_retry_at so it is
// due now (a new row is due in 60 s).
func seedDueEvent(t *testing.T, s *queue.Store, pool *pgxpool.Pool, eventType string) uuid.UUID {
	t.Helper()
	eventID := "evt_" + eventType
	if _, err := s.Enqueue(t.Context(), queue.FailedEvent{
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
	events, err := s.ClaimDue(t.Context(), queue.DefaultClaimBatch, queue.DefaultClaimWindow)
	if err != nil {
		t.Fatalf("claim due: %v", err)
	}
	return events
}

func isProcessed(t *testing.T, s *queue.Store, eventID string) bool {
	t.Helper()
	ok, err := s.IsProcessed(t.Context(), eventID)
	if err != nil {
		t.Fatalf("is processed: %v", err)
	}
	return ok
}

// ── dedup marker (processed_webhook_events) ──────────────────────────────────

func TestIsProcessed_FalseBeforeMarkTrueAfter(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	const id = "evt_dedup_basic"

	if isProcessed(t, s, id) {
		t.Fatal("an unseen event must not read as processed")
	}
	if err := s.MarkProcessed(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if !isProcessed(t, s, id) {
		t.Fatal("a marked event must read as processed")
	}
}

func TestMarkProcessed_IsIdempotent(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)

	// Serial re-marks (redelivery) must not error and must not duplicate the row.
	for range 3 {
		if err := s.MarkProcessed(t.Context(), "evt_dedup_idem"); err != nil {
			t.Fatal(err)
		}
	}
	if got := bundle.markers(t); got != 1 {
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
			errs <- s.MarkProcessed(context.Background(), "evt_dedup_race")
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
	if got := bundle.markers(t); got != 1 {
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

	held, err := s.TryLockEvent(ctx, "evt_lock_A")
	if err != nil {
		t.Fatalf("first delivery must acquire the lock: %v", err)
	}

	// The timeout only turns a regression to a blocking lock into a failure
	// instead of a hang; the assertion is on the error.
	blockCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if tx, err := s.TryLockEvent(blockCtx, "evt_lock_A"); !errors.Is(err, queue.ErrEventLocked) {
		if tx != nil {
			_ = tx.Release(ctx)
		}
		t.Fatalf("same-event lock while held: err = %v, want ErrEventLocked", err)
	}

	other, err := s.TryLockEvent(ctx, "evt_lock_B")
	if err != nil {
		t.Fatalf("a distinct event must acquire its own lock: %v", err)
	}
	defer other.Release(ctx)

	// Released explicitly: the lease is free again once Release returns.
	if err := held.Release(ctx); err != nil {
		t.Fatalf("releasing the held lock: %v", err)
	}
	again, err := s.TryLockEvent(ctx, "evt_lock_A")
	if err != nil {
		t.Fatalf("the lock must be re-acquirable once released: %v", err)
	}
	_ = again.Release(ctx)
}

func TestPruneProcessed_RespectsRetentionBoundary(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()

	for _, id := range []string{"evt_old", "evt_fresh"} {
		if err := s.MarkProcessed(ctx, id); err != nil {
			t.Fatal(err)
		}
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
}

// ── retry queue (webhook_events) claim-and-defer ─────────────────────────────

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
		a, errA = s.ClaimDue(context.Background(), queue.DefaultClaimBatch, queue.DefaultClaimWindow)
	})
	wg.Go(func() {
		<-start
		b, errB = s.ClaimDue(context.Background(), queue.DefaultClaimBatch, queue.DefaultClaimWindow)
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
	if _, err := s.Enqueue(ctx, queue.FailedEvent{Source: queue.SourceStripe,
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

// ── backoff and dead-lettering ───────────────────────────────────────────────

func TestScheduleRetry_SetsRetryingAndBacksOff(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	id := seedDueEvent(t, s, bundle.pool, "backoff.evt")

	// First failed retry: attempt count 1, status retrying, deferred.
	status, err := s.ScheduleRetry(t.Context(), id, 1, "still failing")
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

	status, err := s.ScheduleRetry(t.Context(), id, queue.MaxAttempts, "exhausted")
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
	dead, err := s.DeadEvents(t.Context(), 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead.Events) != 1 || dead.Events[0].ID != id {
		t.Fatalf("dead list = %v, want the dead event on the operator list", dead.Events)
	}
}

func TestRetryDead_ResurrectsOnlyDeadRows(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()

	// A live (failed) event is not dead, so retrying it changes nothing.
	live := seedDueEvent(t, s, bundle.pool, "resurrect.live")
	if ok, err := s.RetryDead(ctx, live); err != nil || ok {
		t.Fatalf("RetryDead(live) = %v, %v; want false: it acts only on dead rows", ok, err)
	}

	// A dead event goes back to failed and is claimable again.
	dead := seedDueEvent(t, s, bundle.pool, "resurrect.dead")
	if _, err := s.ScheduleRetry(ctx, dead, queue.MaxAttempts, "exhausted"); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.RetryDead(ctx, dead); err != nil || !ok {
		t.Fatalf("RetryDead(dead) = %v, %v; want true", ok, err)
	}
	var status string
	if err := bundle.pool.QueryRow(ctx, `SELECT status FROM webhook_events WHERE id = $1`, dead).Scan(&status); err != nil {
		t.Fatal(err)
	}
	if status != "failed" {
		t.Fatalf("status = %q, want failed: a resurrected event returns to the queue", status)
	}
	// The seed stopped at the status, leaving attempts at 5 where the claim
	// can never reach it; hookd starts the attempts over, so it is claimed.
	claimed := claim(t, s)
	ids := map[uuid.UUID]bool{}
	for _, e := range claimed {
		ids[e.ID] = true
	}
	if !ids[dead] {
		t.Fatalf("the resurrected event was not claimed (claimed %d events)", len(claimed))
	}
}

func TestResolve_RemovesEventFromQueue(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	id := seedDueEvent(t, s, bundle.pool, "done.evt")

	if err := s.Resolve(t.Context(), id); err != nil {
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
