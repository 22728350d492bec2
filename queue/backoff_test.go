package queue_test

import (
	"testing"
	"time"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// The demo's backoff is the policy's schedule with hours read as seconds, on
// every path that schedules a retry: a new row, a failed retry batch and the
// seed's one-event ScheduleRetry, including inside a locking transaction.
func TestWithDemoBackoff_HoursBecomeSeconds(t *testing.T) {
	t.Parallel()
	pool := queuetest.NewPool(t)
	s := queue.New(pool, queue.WithDemoBackoff())
	if !s.DemoBackoff() || queue.New(pool).DemoBackoff() {
		t.Fatal("DemoBackoff reports the option wrongly")
	}
	for n, want := range map[int]time.Duration{0: time.Second / 60, 3: 2 * time.Second, 4: 24 * time.Second} {
		if got := s.RetryDelay(n); got != want {
			t.Errorf("RetryDelay(%d) = %s, want %s", n, got, want)
		}
		if got := queue.New(pool).RetryDelay(n); got != queue.RetryDelay(n) {
			t.Errorf("without the option RetryDelay(%d) = %s, want the policy's %s", n, got, queue.RetryDelay(n))
		}
	}

	tx, err := s.TryLockEvent(t.Context(), "evt_new")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Enqueue(t.Context(), queue.FailedEvent{Source: queue.SourceStripe, EventID: "evt_new",
		EventType: "invoice.paid", Payload: []byte(`{}`), Error: "downstream answered 500"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}

	single := queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_single", Attempts: 1, Status: queue.StatusRetrying})
	if _, err := s.ScheduleRetry(t.Context(), single.ID, 2, "downstream answered 500"); err != nil {
		t.Fatal(err)
	}

	batched := queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_batched", Attempts: 3, Status: queue.StatusRetrying})
	btx, locked, err := s.TryLockEvents(t.Context(), []string{batched.EventID})
	if err != nil || len(locked) != 1 {
		t.Fatalf("lock: %v, %v", locked, err)
	}
	if _, err := btx.RescheduleBatch(t.Context(), []queue.Settled{{Event: batched, Attempt: &queue.NewAttempt{
		Source: batched.Source, EventID: batched.EventID, Path: queue.PathRetry, Number: 4, Error: "timeout"}}}); err != nil {
		t.Fatal(err)
	}
	if err := btx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}

	for id, want := range map[string]float64{"evt_new": 1.0 / 60, "evt_single": 0.5, "evt_batched": 24} {
		var delay float64
		if err := pool.QueryRow(t.Context(), `
			SELECT extract(epoch FROM next_retry_at - last_attempt_at) FROM webhook_events WHERE event_id = $1`,
			id).Scan(&delay); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if diff := delay - want; diff > 0.001 || diff < -0.001 {
			t.Errorf("%s waits %v s for its next retry, want %v s", id, delay, want)
		}
	}
}
