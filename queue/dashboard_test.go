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
	s, pool := queuetest.NewStore(t)
	ctx := context.Background()
	match := queuetest.InsertEvent(t, pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5, EventType: "invoice.paid", LastError: "100% TIMEOUT"})
	otherType := queuetest.InsertEvent(t, pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5, EventType: "charge.failed", LastError: "timeout"})
	// "%" in the filter is a literal percent sign, not a wildcard.
	otherErr := queuetest.InsertEvent(t, pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5, EventType: "invoice.paid", LastError: "1000 timeout"})
	pending := queuetest.InsertEvent(t, pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 2, EventType: "invoice.paid", LastError: "100% timeout"})

	f := queue.EventFilter{EventType: "invoice.paid", ErrorContains: "100% time"}
	n, err := s.RetryDeadMatching(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("retried %d events, want 1", n)
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
	s, pool := queuetest.NewStore(t)
	ctx := context.Background()
	pending := queuetest.InsertEvent(t, pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 3, DueIn: time.Hour})
	dead := queuetest.InsertEvent(t, pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5})

	if ok, err := s.RetryNow(ctx, dead.ID); err != nil || ok {
		t.Fatalf("RetryNow(dead) = %v, %v; want false, nil", ok, err)
	}
	if ok, err := s.RetryNow(ctx, pending.ID); err != nil || !ok {
		t.Fatalf("RetryNow(pending) = %v, %v; want true, nil", ok, err)
	}
	claimed, err := s.ClaimDue(ctx, 10, queue.DefaultClaimWindow)
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 1 || claimed[0].ID != pending.ID || !claimed[0].ManualRetry || claimed[0].Attempts != 3 {
		t.Fatalf("claimed %+v, want the pending event, manual, still at 3 attempts", claimed)
	}
}
