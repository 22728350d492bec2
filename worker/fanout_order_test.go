package worker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookd/hookd/worker"
)

// A replay's call to an ordered destination takes its key's turn as a new
// event does: while an earlier delivery of the key waits on the queue it
// is not made (worker.ErrTurnWait, which the replay tries again without
// spending an attempt); once the key is free it is, and its turn is given
// back with its outcome. An event without the key is not ordered.
func TestFanout_AReplayWaitsForItsKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	var calls atomic.Int64
	app := worker.ProcessorFunc(func(context.Context, worker.Delivery) worker.Result {
		calls.Add(1)
		return worker.Result{HTTPStatus: 200}
	})
	route := func(worker.Delivery) ([]string, map[string]error) { return []string{"billing"}, nil }
	fan := worker.NewFanout(route, []worker.FanoutDestination{{Name: "billing", Processor: app, Timeout: 10 * time.Second,
		OrderBy: "data.object.customer"}})
	fan.OrderBy(b.store)
	if _, err := b.pool.Exec(ctx, `
		INSERT INTO webhook_events (source, event_id, event_type, payload, destination, order_key, order_seq)
		VALUES ('stripe', 'evt_earlier', 'invoice.paid', '{}', 'billing', 'cus_1', nextval('webhook_order_seq'))`); err != nil {
		t.Fatal(err)
	}
	replay := func(customer string) worker.Result {
		return fan.Process(ctx, worker.Delivery{EventID: "evt_replayed", EventType: "invoice.paid", Destination: "billing",
			Replay: "backfill", Payload: []byte(`{"id":"evt_replayed","data":{"object":{"customer":` + customer + `}}}`)})
	}
	if res := replay(`"cus_1"`); !errors.Is(res.Err, worker.ErrTurnWait) || calls.Load() != 0 {
		t.Fatalf("a replay behind a pending delivery of its key: %v, %d calls; want ErrTurnWait and none", res.Err, calls.Load())
	}
	if res := replay(`null`); res.Err != nil || calls.Load() != 1 {
		t.Fatalf("a replay of an event without the key: %v, %d calls; want one call", res.Err, calls.Load())
	}
	if _, err := b.pool.Exec(ctx, `DELETE FROM webhook_events WHERE event_id = 'evt_earlier'`); err != nil {
		t.Fatal(err)
	}
	if res := replay(`"cus_1"`); res.Err != nil || calls.Load() != 2 {
		t.Fatalf("a replay once its key is free: %v, %d calls; want a call", res.Err, calls.Load())
	}
	if turn, err := b.store.TakeOrderTurn(ctx, "billing", "cus_1", time.Minute); err != nil || !turn.Granted {
		t.Fatalf("the key after the replay's call: %+v, %v; want its turn given back", turn, err)
	}
}
