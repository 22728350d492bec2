package receiver

import (
	"context"
	"fmt"
	"time"

	"github.com/hookd/hookd/worker"
)

// DefaultInlineConcurrency bounds the deliveries waiting for the app while
// Stripe waits, when HOOKD_INLINE_CONCURRENCY is not set. A delivery waiting
// for the app holds no database connection and no transaction, only memory:
// its body (a Stripe event is a few KB; HOOKD_MAX_BODY bounds the rare large
// one), a goroutine and a connection to the app, about 50 KB in all. 1,024
// of them are some 50 MB, which a small machine affords, and more than
// Stripe sends one endpoint at once; past it the app is the bottleneck, and
// deferring to the queue at once is the better answer.
const DefaultInlineConcurrency = 1024

// inlineSlots bounds the deliveries processed while Stripe waits: the
// memory they hold, and the connections to a slow app. A nil inlineSlots
// has no bound.
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
// the retry loop delivers the event when it can. It is decided under the
// event's lease, so dedup holds as for any delivery.
func (r *Receiver) deferReason() string {
	return fmt.Sprintf("deferred: the app was busy with %d deliveries while Stripe waited, so the retry loop delivers it",
		cap(r.inline))
}

// paceWait is the longest a delivery waits for its turn under
// HOOKD_FORWARD_RATE while Stripe waits: past it, the event is deferred to
// the queue and answered at once, and the retry loop delivers it at the
// rate. Stripe's request is not held for the app's pace.
const paceWait = 100 * time.Millisecond

// holdReason is why a leased new event is queued unprocessed rather than
// delivered now, "" when it is delivered: delivery is paused by a person
// or by the circuit breaker, or the app's rate is reached. A delivery
// that is not held has taken its token.
func (r *Receiver) holdReason(ctx context.Context) string {
	if st := r.control.State(); st.Held() {
		return worker.HeldReason(st)
	}
	if !r.pace.TryWait(ctx, paceWait) {
		return fmt.Sprintf("deferred: the delivery rate (HOOKD_FORWARD_RATE, %g a second) was reached, "+
			"so the retry loop delivers it at that rate", r.pace.PerSecond())
	}
	return ""
}
