package worker

import "fmt"

// inlineSlots bounds the deliveries processed while Stripe waits. A batch
// of deliveries holds a pooled connection for as long as the app takes with
// any of them, since its transaction holds their locks, and a batch slow at
// the app steps aside for the next (batchStepAside); past the bound a slow
// app would take every connection, and the dashboard, the retry loop and
// /readyz with them. A nil inlineSlots has no bound.
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

// deferReason is the last error of an event deferred because every inline
// slot was taken: answering Stripe at once keeps the connection free, and
// the retry loop delivers the event when it can. It is decided in the
// delivery's transaction, under the event's lock, so dedup holds as for any
// delivery.
func (r *Receiver) deferReason() string {
	return fmt.Sprintf("deferred: the app was busy with %d deliveries while Stripe waited, so the retry loop delivers it",
		cap(r.inline))
}
