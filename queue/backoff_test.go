package queue_test

import (
	"testing"
	"time"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// The demo's backoff is the policy's schedule with hours read as seconds, on
// every path that schedules a retry: a new row, a failed retry batch and the
// seed's one-event ScheduleRetry.
func TestWithDemoBackoff_HoursBecomeSeconds(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t, withStoreOptions(queue.WithDemoBackoff()))
	if !s.DemoBackoff() || queue.New(bundle.pool).DemoBackoff() {
		t.Fatal("DemoBackoff reports the option wrongly")
	}
	for n, want := range map[int]time.Duration{0: time.Second / 60, 3: 2 * time.Second, 4: 24 * time.Second} {
		if got := s.RetryDelay(n); got != want {
			t.Errorf("RetryDelay(%d) = %s, want %s", n, got, want)
		}
		if got := queue.New(bundle.pool).RetryDelay(n); got != queue.RetryDelay(n) {
			t.Errorf("without the option RetryDelay(%d) = %s, want the policy's %s", n, got, queue.RetryDelay(n))
		}
	}

	// Claimed at 3 attempts, the batch's attempt is the fourth.
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_batched", Attempts: 3, Status: queue.StatusRetrying})
	claim, err := s.ClaimAttempts(t.Context(), 10, time.Second)
	if err != nil || len(claim.Claimed) != 1 || claim.Claimed[0].Event.EventID != "evt_batched" {
		t.Fatalf("claim: %+v, %v", claim.Claimed, err)
	}
	c := claim.Claimed[0]
	if _, err := s.SettleAttempts(t.Context(), []queue.Settled{{Claimed: c, Kind: queue.SettleFailed, Attempt: &queue.NewAttempt{
		Source: c.Event.Source, EventID: c.Event.EventID, Path: queue.PathRetry, Number: c.Event.Attempts, Error: "timeout"}}}); err != nil {
		t.Fatal(err)
	}

	leased, err := s.TakeDeliveries(t.Context(), queue.SourceStripe, []queue.Delivery{{EventID: "evt_new", Path: queue.PathInline}}, time.Second)
	if err != nil || leased.States[0] != queue.DeliveryNew {
		t.Fatalf("lease evt_new: %v, %v", leased.States, err)
	}
	if _, err := s.SettleDeliveries(t.Context(), []queue.Received{{EventID: "evt_new", Owner: leased.Owner,
		Queue: &queue.FailedEvent{Source: queue.SourceStripe, EventID: "evt_new", EventType: "invoice.paid",
			Payload: []byte(`{}`), Error: "downstream answered 500"},
		Wait: s.RetryDelay(0), Attempt: &queue.NewAttempt{Source: queue.SourceStripe, EventID: "evt_new", Path: queue.PathInline}}}); err != nil {
		t.Fatal(err)
	}

	single := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_single", Attempts: 1, Status: queue.StatusRetrying})
	if _, err := queuetest.NewSeed(s).ScheduleRetry(t.Context(), single.ID, 2, "downstream answered 500"); err != nil {
		t.Fatal(err)
	}

	for id, want := range map[string]float64{"evt_new": 1.0 / 60, "evt_single": 0.5, "evt_batched": 24} {
		var delay float64
		if err := bundle.pool.QueryRow(t.Context(), `
			SELECT extract(epoch FROM next_retry_at - last_attempt_at) FROM webhook_events WHERE event_id = $1`,
			id).Scan(&delay); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if diff := delay - want; diff > 0.001 || diff < -0.001 {
			t.Errorf("%s waits %v s for its next retry, want %v s", id, delay, want)
		}
	}
}
