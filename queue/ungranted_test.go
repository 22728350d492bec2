package queue_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

func ungrantedEvent(id string) queue.FailedEvent {
	return queue.FailedEvent{Source: queue.SourceStripe, EventID: id, EventType: "invoice.paid",
		Payload: []byte(`{"id":"` + id + `"}`), Error: "deferred"}
}

// An event queued without a lease is queued once, and its redelivery, a
// processed event or a leased one is left as it is.
func TestQueueUngranted_States(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	if st, err := s.QueueUngranted(ctx, ungrantedEvent("evt_new")); err != nil || st != queue.DeliveryQueuedUngranted {
		t.Fatalf("a new event: got %v, %v; want DeliveryQueuedUngranted", st, err)
	}
	if st, err := s.QueueUngranted(ctx, ungrantedEvent("evt_new")); err != nil || st != queue.DeliveryQueued {
		t.Fatalf("its redelivery: got %v, %v; want DeliveryQueued", st, err)
	}
	if d := take(t, s, "evt_leased"); d.States[0] != queue.DeliveryNew {
		t.Fatalf("take evt_leased: %v", d.States[0])
	}
	if st, err := s.QueueUngranted(ctx, ungrantedEvent("evt_leased")); err != nil || st != queue.DeliveryBusy {
		t.Fatalf("a leased event: got %v, %v; want DeliveryBusy", st, err)
	}
	if _, err := bundle.pool.Exec(ctx, `INSERT INTO processed_webhook_events (event_id) VALUES ('evt_done')`); err != nil {
		t.Fatal(err)
	}
	if st, err := s.QueueUngranted(ctx, ungrantedEvent("evt_done")); err != nil || st != queue.DeliveryProcessed {
		t.Fatalf("a processed event: got %v, %v; want DeliveryProcessed", st, err)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE next_retry_at <= now() AND status = 'failed'`); n != 1 {
		t.Errorf("queue rows due: got %d, want 1", n)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_leases`); n != 1 {
		t.Errorf("leases left: got %d, want 1 (evt_leased's; no placeholder)", n)
	}
}

// Queuing an event without a lease while another path takes its lease:
// for each event exactly one of them gets it, never both (a queue row and
// a run under a lease at once).
func TestQueueUngranted_RacesATake(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	const events = 60
	var queued, leased, both, neither int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range events {
		id := fmt.Sprintf("evt_race_%03d", i)
		var q queue.DeliveryState
		var l queue.DeliveryState
		var qerr, lerr error
		var inner sync.WaitGroup
		inner.Add(2)
		go func() {
			defer inner.Done()
			q, qerr = s.QueueUngranted(t.Context(), ungrantedEvent(id))
		}()
		go func() {
			defer inner.Done()
			var d queue.Deliveries
			d, lerr = s.TakeDeliveries(t.Context(), queue.SourceStripe,
				[]queue.Delivery{{EventID: id, Path: queue.PathInline, Runs: true}}, time.Minute)
			if lerr == nil {
				l = d.States[0]
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			inner.Wait()
			if qerr != nil || lerr != nil {
				t.Errorf("%s: queue %v, take %v", id, qerr, lerr)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			a, b := q == queue.DeliveryQueuedUngranted, l == queue.DeliveryNew
			switch {
			case a && b:
				both++
			case a:
				queued++
			case b:
				leased++
			default:
				neither++
			}
		}()
	}
	wg.Wait()
	if both != 0 || neither != 0 || queued+leased != events {
		t.Fatalf("of %d events: %d queued, %d leased, %d both, %d neither; want each exactly one", events, queued, leased, both, neither)
	}
}
