package receiver

import (
	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/worker"
)

// turn is what a delivery's next turn at the database does.
type turn int

const (
	// turnTake takes the event's lease and reads its state.
	turnTake turn = iota
	// turnMark writes the marker of an event that runs no processor,
	// without a lease (markable).
	turnMark
	// turnSettle writes the outcome of a leased run with the lease's
	// release.
	turnSettle
)

// markable says whether d's outcome is known before any lease, with no
// processor run for a lease to keep to one at a time, and which it is: a
// test-mode event its endpoint discards, or an inline delivery of an event
// the processor skips (worker.Skipper: the discard processor skips them
// all) while delivery is neither held nor paced. Such a
// delivery writes its marker in one statement and one commit, as the
// seed's handler does (queue.Exchange.Mark). A thin event's pair and a
// recovery's attempt are written the leased way.
func (r *Receiver) markable(d *delivery) (Outcome, queue.LogHow, bool) {
	if d.path != queue.PathInline || d.ev.snapshot != "" {
		return 0, "", false
	}
	switch d.testEvents() {
	case endpoint.DiscardTestEvents:
		return TestDiscarded, queue.LogTestDiscarded, true
	case endpoint.QueueTestEvents:
		return 0, "", false
	}
	if r.fanout != nil && len(d.routes) == 0 {
		// No destination takes it: that is its outcome, with nothing to
		// run, and the event log says so.
		return Processed, queue.LogUnrouted, true
	}
	if worker.Skips(r.proc, d.ev.Type) && r.pace == nil && !r.control.Held() {
		return Processed, queue.LogInline, true
	}
	return 0, "", false
}

// mark writes the marker of a markable delivery, as outcome, with the
// deliveries that reach the database at the same moment. done is false
// when a lease, live or expired, is on the event: the delivery then takes
// it the leased way, which answers it busy, or takes an expired one over
// and counts the run that never reported.
func (r *Receiver) mark(d *delivery, outcome Outcome, how queue.LogHow) (_ Outcome, done bool, _ error) {
	d.turn = turnMark
	d.outcome = queue.Received{EventID: d.key, Seen: r.seen.note(d.ep.Label, &d.ev), Log: logged(d, how),
		RouteMisses: d.misses}
	_, d.span = r.tracer.Start(d.ctx, tracing.SpanOutcome)
	r.outcomes.Do(d)
	d.span.End()
	if d.err != nil {
		return 0, true, d.err
	}
	switch d.state {
	case queue.DeliveryMarked:
		if outcome == Processed {
			r.metrics.ObserveProcess(d.path, true, 0)
		}
		return outcome, true, nil
	case queue.DeliveryProcessed:
		return Duplicate, true, nil
	case queue.DeliveryQueued:
		return AlreadyQueued, true, nil
	}
	d.turn, d.state, d.outcome = turnTake, 0, queue.Received{}
	return 0, false, nil
}
