package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

func TestRetryDeadMatching_SendsBackOnlyMatchingDeadEvents(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := context.Background()
	match := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5, EventType: "invoice.paid", LastError: "100% TIMEOUT"})
	otherType := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5, EventType: "charge.failed", LastError: "timeout"})
	// "%" in the filter is a literal percent sign, not a wildcard.
	otherErr := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5, EventType: "invoice.paid", LastError: "1000 timeout"})
	pending := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 2, EventType: "invoice.paid", LastError: "100% timeout"})

	f := queue.EventFilter{EventType: "invoice.paid", ErrorContains: "100% time"}
	n, err := s.RetryDeadMatching(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if n != (queue.RetriedDead{Queued: 1}) {
		t.Fatalf("retried %+v, want 1 queued", n)
	}
	for _, tc := range []struct {
		e    queue.Event
		want queue.Status
	}{{match, queue.StatusFailed}, {otherType, queue.StatusDead}, {otherErr, queue.StatusDead}, {pending, queue.StatusRetrying}} {
		got, err := s.Event(ctx, tc.e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != tc.want {
			t.Errorf("%s (%s, %q): status %s, want %s", tc.e.EventID, tc.e.EventType, *tc.e.LastError, got.Status, tc.want)
		}
	}
	got, _ := s.Event(ctx, match.ID)
	if got.Attempts != 0 || !got.ManualRetry {
		t.Errorf("retried event: attempts %d, manual %v; want 0, true", got.Attempts, got.ManualRetry)
	}
}

func TestRetryNow_OnlyPendingEvents(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := context.Background()
	pending := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 3, DueIn: time.Hour})
	dead := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5})

	if h, err := s.RetryNow(ctx, dead.ID); err != nil || h != queue.NotPending {
		t.Fatalf("RetryNow(dead) = %v, %v; want NotPending, nil", h, err)
	}
	if h, err := s.RetryNow(ctx, pending.ID); err != nil || h != queue.DueNow {
		t.Fatalf("RetryNow(pending) = %v, %v; want DueNow, nil", h, err)
	}
	claimed, err := queuetest.NewSeed(s).ClaimDue(ctx, 10, queuetest.DefaultClaimWindow)
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 1 || claimed[0].ID != pending.ID || !claimed[0].ManualRetry || claimed[0].Attempts != 3 {
		t.Fatalf("claimed %+v, want the pending event, manual, still at 3 attempts", claimed)
	}
}

func TestRetryNow_InFlightEventIsDueWhenItsAttemptFails(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := context.Background()
	e := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 1})
	a, err := s.ClaimAttempts(ctx, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Claimed) != 1 {
		t.Fatalf("claimed %d events, want 1", len(a.Claimed))
	}
	claimed, err := s.Event(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}

	if h, err := s.RetryNow(ctx, e.ID); err != nil || h != queue.DueAfterAttempt {
		t.Fatalf("RetryNow(in flight) = %v, %v; want DueAfterAttempt, nil", h, err)
	}
	got, err := s.Event(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.NextRetryAt.Equal(claimed.NextRetryAt) || !got.ManualRetry {
		t.Fatalf("after RetryNow in flight: next retry %v, manual %v; want %v (unchanged), true",
			got.NextRetryAt, got.ManualRetry, claimed.NextRetryAt)
	}

	st, err := s.SettleAttempts(ctx, []queue.Settled{{Claimed: a.Claimed[0], Kind: queue.SettleFailed,
		Attempt: &queue.NewAttempt{Source: e.Source, EventID: e.EventID, Error: "HTTP 500", Path: queue.PathRetry, Number: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if !st[0].Written || !st[0].Hastened {
		t.Fatalf("settled %+v, want written and hastened", st[0])
	}
	if due := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE next_retry_at <= now()`); due != 1 {
		t.Errorf("%d events due after the failed attempt, want 1", due)
	}
}

func TestEventsInFlight_OnlyLiveLeasesAmongTheIDs(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := context.Background()
	for _, id := range []string{"evt_live", "evt_expired", "evt_not_asked"} {
		if _, err := queuetest.NewSeed(s).TryLockEvent(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bundle.pool.Exec(ctx, `UPDATE webhook_leases SET expires_at = now() - interval '1 second' WHERE event_id = 'evt_expired'`); err != nil {
		t.Fatal(err)
	}

	got, err := s.EventsInFlight(ctx, []string{"evt_live", "evt_expired", "evt_free"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["evt_live"].Path != queue.PathInline || !got["evt_live"].ExpiresAt.After(got["evt_live"].TakenAt) {
		t.Errorf("EventsInFlight = %+v, want only evt_live, leased inline", got)
	}
	if got, err := s.EventsInFlight(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("EventsInFlight(nil) = %v, %v; want none", got, err)
	}
}
