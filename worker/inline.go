package worker

import (
	"context"
	"fmt"

	"github.com/hookd/hookd/queue"
)

// inlineSlots bounds the deliveries processed while Stripe waits. Each holds
// a pooled connection for as long as the app takes, since its transaction
// holds the event's lock; past the bound a slow app would take every
// connection, and the dashboard, the retry loop and /readyz with them. A nil
// inlineSlots has no bound.
type inlineSlots chan struct{}

func newInlineSlots(n int) inlineSlots {
	if n <= 0 {
		return nil
	}
	return make(inlineSlots, n)
}

// tryAcquire takes a slot without waiting; ok is false when all are taken.
func (s inlineSlots) tryAcquire() (release func(), ok bool) {
	if s == nil {
		return func() {}, true
	}
	select {
	case s <- struct{}{}:
		return func() { <-s }, true
	default:
		return nil, false
	}
}

// deferBusy queues a verified, new event without processing it, due at
// once, because every inline slot is taken: answering Stripe at once keeps
// the connection free, and the retry loop delivers the event when it can.
// It runs in the delivery's transaction, under the event's lock, so dedup
// holds as for any delivery.
func (r *Receiver) deferBusy(ctx context.Context, tx *queue.Tx, ev event, payload []byte, sigHeader string) (Outcome, error) {
	reason := fmt.Sprintf("deferred: the app was busy with %d deliveries while Stripe waited, so the retry loop delivers it",
		cap(r.inline))
	if _, err := tx.Defer(ctx, queue.FailedEvent{
		Source: queue.SourceStripe, EventID: ev.ID, EventType: ev.Type,
		Payload: payload, Signature: sigHeader, Error: reason,
	}); err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	r.logger.InfoContext(ctx, "event deferred to the retry queue: the app is busy", "event_id", ev.ID,
		"event_type", ev.Type, "inline_concurrency", cap(r.inline))
	return Deferred, nil
}
