package queue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// The destinations page reads each destination with its own deliveries
// and its own calls of the last hour: another destination's are never
// counted in.
func TestDestinationsStats_CountsEachDestinationsOwn(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	for _, name := range []string{"billing", "crm"} {
		queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: name})
	}
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "analytics", Retired: true})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_a", Destination: "billing", Age: time.Hour})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_b", Destination: "billing", Status: queue.StatusRetrying})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_a", Destination: "crm", Status: queue.StatusDead})
	for i, ms := range []int{10, 20, 30, 40} {
		queuetest.InsertAttempt(t, b.pool, queue.NewAttempt{Source: "stripe", EventID: "evt_a", Destination: "billing",
			Duration: time.Duration(ms) * time.Millisecond, Succeeded: i > 0, Path: queue.PathRetry})
	}
	queuetest.InsertAttempt(t, b.pool, queue.NewAttempt{Source: "stripe", EventID: "evt_a", Destination: "crm",
		Duration: time.Second, Path: queue.PathRetry})

	stats, err := s.DestinationsStats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 3 || stats[0].Name != "billing" || stats[1].Name != "crm" || stats[2].Name != "analytics" {
		t.Fatalf("destinations %+v, want billing, crm, then the retired analytics", stats)
	}
	billing, crm, analytics := stats[0], stats[1], stats[2]
	if billing.Pending != 2 || billing.Dead != 0 || billing.OldestPending == nil || billing.Now.Sub(*billing.OldestPending) < 59*time.Minute {
		t.Errorf("billing: pending %d, dead %d, oldest %v; want 2, 0, an hour ago", billing.Pending, billing.Dead, billing.OldestPending)
	}
	if rate, ok := billing.SuccessRate(); !ok || rate != 0.75 || billing.Calls != 4 {
		t.Errorf("billing: %d calls, rate %v %v; want 4 calls, 0.75", billing.Calls, rate, ok)
	}
	if billing.P50MS == nil || *billing.P50MS != 25 || billing.P95MS == nil || *billing.P95MS < 38 || *billing.P95MS > 40 {
		t.Errorf("billing: p50 %v, p95 %v; want 25 and about 38.5", billing.P50MS, billing.P95MS)
	}
	if crm.Pending != 0 || crm.Dead != 1 || crm.OldestPending != nil || crm.Calls != 1 || crm.Succeeded != 0 {
		t.Errorf("crm: %+v, want 1 dead, 1 failed call", crm)
	}
	if !analytics.Retired() || analytics.Calls != 0 || analytics.P50MS != nil {
		t.Errorf("analytics: %+v, want retired without calls", analytics)
	}
	names, err := s.DestinationNames(t.Context())
	if err != nil || len(names) != 3 || names[2] != "analytics" {
		t.Errorf("names %v, %v", names, err)
	}

	// Every delivery of an event, in the order of the destinations, and
	// one of them, always the same, for the pages that name one.
	deliveries, err := s.DeliveriesOf(t.Context(), "evt_a")
	if err != nil || len(deliveries) != 2 || deliveries[0].Destination != "billing" || deliveries[1].Destination != "crm" {
		t.Fatalf("deliveries of evt_a: %+v, %v", deliveries, err)
	}
	e, err := s.EventByEventID(t.Context(), "evt_a")
	if err != nil || e.Destination != "billing" {
		t.Errorf("EventByEventID: %s, %v; want billing's", e.Destination, err)
	}
	page, err := s.Events(t.Context(), queue.EventFilter{Status: queue.StatusPending, Destination: "billing"})
	if err != nil || page.Total != 2 {
		t.Errorf("pending to billing: %d, %v; want 2", page.Total, err)
	}
}

// A pause is one person's; a resume ends it and closes the breaker, and
// neither touches another destination.
func TestPauseDestination_OneDestinationOnly(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "billing"})
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "crm"})
	ctx := t.Context()
	if err := s.PauseDestination(ctx, "billing", "ops@example.com", "app upgrade"); err != nil {
		t.Fatal(err)
	}
	if err := s.PauseDestination(ctx, "billing", "other@example.com", "again"); !errors.Is(err, queue.ErrDestinationPaused) {
		t.Errorf("second pause: %v, want ErrDestinationPaused", err)
	}
	if err := s.PauseDestination(ctx, "nope", "ops@example.com", "x"); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("pause of a missing destination: %v, want ErrNotFound", err)
	}
	d, err := s.Destination(ctx, "billing")
	if err != nil || !d.Paused() || *d.PausedBy != "ops@example.com" || *d.PausedReason != "app upgrade" {
		t.Fatalf("billing after the pause: %+v, %v", d, err)
	}
	if crm, _ := s.Destination(ctx, "crm"); crm.Paused() {
		t.Error("crm paused too")
	}
	if err := s.ResumeDestination(ctx, "crm"); !errors.Is(err, queue.ErrDestinationNotPaused) {
		t.Errorf("resume of crm: %v, want ErrDestinationNotPaused", err)
	}
	if _, err := b.pool.Exec(ctx, `UPDATE destinations SET breaker_opened_at = now(), breaker_failures = 5,
		breaker_error = 'connection refused', probe_due_at = now() WHERE name = 'crm'`); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"billing", "crm"} {
		if err := s.ResumeDestination(ctx, name); err != nil {
			t.Fatalf("resume %s: %v", name, err)
		}
		d, _ := s.Destination(ctx, name)
		if d.Paused() || d.BreakerOpen() || d.BreakerFailures != 0 {
			t.Errorf("%s after the resume: %+v", name, d)
		}
	}
}

// A retired destination's deliveries move to another, one already
// delivering the same event keeping its own; or they are dropped, the
// event then done. A configured destination's deliveries stay.
func TestMoveAndDropDeliveries(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := t.Context()
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "billing"})
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "old", Retired: true})
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "gone", Retired: true})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_1", Destination: "old", Status: queue.StatusDead})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_2", Destination: "old"})
	kept := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_2", Destination: "billing", Attempts: 3})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_3", Destination: "gone", Status: queue.StatusDead})

	if _, err := s.MoveDeliveries(ctx, "billing", "old"); !errors.Is(err, queue.ErrNotRetired) {
		t.Errorf("move from a configured destination: %v, want ErrNotRetired", err)
	}
	if _, err := s.MoveDeliveries(ctx, "old", "nope"); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("move to a missing destination: %v, want ErrNotFound", err)
	}
	m, err := s.MoveDeliveries(ctx, "old", "billing")
	if err != nil || m != (queue.Moved{Moved: 1, Merged: 1}) {
		t.Fatalf("move: %+v, %v; want 1 moved, 1 merged", m, err)
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_events WHERE destination = 'old'`); n != 0 {
		t.Errorf("%d deliveries left to old", n)
	}
	e1, err := s.EventByEventID(ctx, "evt_1")
	if err != nil || e1.Destination != "billing" || e1.Status != queue.StatusDead {
		t.Errorf("evt_1: %s %s, %v; want dead, to billing", e1.Destination, e1.Status, err)
	}
	if e2, err := s.Event(ctx, kept.ID); err != nil || e2.Attempts != 3 {
		t.Errorf("billing's own delivery of evt_2: %+v, %v; want it kept with its 3 attempts", e2, err)
	}

	if _, err := s.DropDeliveries(ctx, "billing"); !errors.Is(err, queue.ErrNotRetired) {
		t.Errorf("drop of a configured destination: %v, want ErrNotRetired", err)
	}
	n, err := s.DropDeliveries(ctx, "gone")
	if err != nil || n != 1 {
		t.Fatalf("drop: %d, %v; want 1", n, err)
	}
	if got := queuetest.Count(t, b.pool, `SELECT count(*) FROM processed_webhook_events
		WHERE event_id = 'evt_3' AND processed_how IS NOT NULL`); got != 1 {
		t.Errorf("evt_3 has %d markers after its last delivery was dropped, want 1", got)
	}
}
