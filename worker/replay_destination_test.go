package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

// A replay to one destination delivers each of its events to that
// destination alone (Delivery.Destination), records its attempts as that
// destination's, and resolves that destination's delivery of a queued
// event, leaving another destination's delivery of it on the queue: the
// backfill of a destination added after the events arrived.
func TestReplay_ToOneDestination(t *testing.T) {
	t.Parallel()
	b := setup(t)
	queuetest.InsertLogged(t, b.pool, processedEvents(3, "evt_backfill"))
	queuetest.InsertLogged(t, b.pool, []queuetest.LoggedOpts{{EventID: "evt_waiting", Queued: true}})
	// evt_waiting waits for billing and for analytics.
	if _, err := b.pool.Exec(t.Context(), `
		INSERT INTO webhook_events (source, event_id, event_type, payload, status, attempts, last_error, next_retry_at,
		                            created_at, endpoint, destination)
		SELECT source, event_id, event_type, payload, status, attempts, last_error, next_retry_at, created_at, endpoint, 'analytics'
		FROM webhook_events WHERE event_id = 'evt_waiting'`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(t.Context(), `UPDATE webhook_events SET destination = 'billing'
		WHERE event_id = 'evt_waiting' AND destination = 'default'`); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]string{}
	app := worker.ProcessorFunc(func(_ context.Context, d worker.Delivery) worker.Result {
		mu.Lock()
		defer mu.Unlock()
		got[d.EventID] = d.Destination
		return worker.Result{HTTPStatus: 200}
	})
	r := startReplay(t, b.store, "backfill analytics", queue.ReplayFilter{Processed: true, Pending: true, Destination: "analytics"})
	if r.Total != 4 || r.Destination == nil || *r.Destination != "analytics" {
		t.Fatalf("replay of %d events to %v, want 4 to analytics", r.Total, r.Destination)
	}
	runReplayer(t, b.store, worker.ProducerConfig{Processor: app})
	if r = waitReplay(t, b.store, r.ID, time.Minute); r.Delivered != 4 {
		t.Fatalf("replay ended %s with %d delivered, want 4", r.State, r.Delivered)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, dest := range got {
		if dest != "analytics" {
			t.Errorf("%s went to %q, want analytics", id, dest)
		}
	}
	if len(got) != 4 {
		t.Errorf("%d events delivered, want 4", len(got))
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_attempts WHERE path = 'replay' AND destination = 'analytics'`); n != 4 {
		t.Errorf("%d replay attempts to analytics, want 4", n)
	}
	var left []string
	rows, err := b.pool.Query(t.Context(), `SELECT destination FROM webhook_events WHERE event_id = 'evt_waiting'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var d string
		_ = rows.Scan(&d)
		left = append(left, d)
	}
	if len(left) != 1 || left[0] != "billing" {
		t.Errorf("evt_waiting still waits for %v, want billing alone", left)
	}
}
