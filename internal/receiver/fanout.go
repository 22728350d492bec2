package receiver

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/worker"
)

// route names the destinations that take d's event, with the fan-out on.
// A destination whose filter failed on the event does not take it; the
// failure is logged with the event's id.
func (r *Receiver) route(d *delivery) {
	if r.fanout == nil {
		return
	}
	routes, failed := r.fanout.Route(d.work(0))
	d.routes = routes
	for _, name := range routes {
		if key := r.fanout.OrderKey(name, d.payload); key != "" {
			d.orderKeys = append(d.orderKeys, queue.OrderKey{Destination: name, Key: key})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(failed)) {
		err := failed[name]
		r.logger.WarnContext(d.ctx, "a destination's filter failed on an event, so the destination does not take it",
			"event_id", d.ev.ID, "destination", name, "err", err)
		d.misses = append(d.misses, queue.RouteMiss{Destination: name, Error: err.Error()})
	}
}

// work is d as a processor gets it.
func (d *delivery) work(attempt int) worker.Delivery {
	return worker.Delivery{
		EventID: d.key, EventType: d.ev.Type, Payload: d.payload, Attempt: attempt,
		Endpoint: d.ep.Label, Livemode: d.ev.livemode(), Account: d.ev.account,
	}
}

// queueFor puts d's event on the retry queue as fe says: one queue row,
// or, with the fan-out on, one for each destination that takes it.
func (r *Receiver) queueFor(d *delivery, fe queue.FailedEvent) {
	if r.fanout == nil {
		d.outcome.Queue = &fe
		return
	}
	first, more := r.deliveriesOf(d, fe)
	d.outcome.Fanout = &queue.Fanout{Queue: append([]queue.FailedEvent{first}, more...), Turns: d.turns}
}

// deliveriesOf is fe for each destination that takes d's event: fe alone
// without the fan-out.
func (r *Receiver) deliveriesOf(d *delivery, fe queue.FailedEvent) (queue.FailedEvent, []queue.FailedEvent) {
	if r.fanout == nil || len(d.routes) == 0 {
		return fe, nil
	}
	out := make([]queue.FailedEvent, len(d.routes))
	for i, name := range d.routes {
		out[i] = fe
		out[i].Destination = name
		// Queued without a call, a delivery to an ordered destination
		// keeps the place its turn took, or takes one as its row is
		// written.
		out[i].OrderKey = r.fanout.OrderKey(name, d.payload)
		for _, t := range d.turns {
			if t.Destination == name {
				out[i].OrderSeq, out[i].InTurn = t.Seq, !t.Granted
			}
		}
	}
	return out[0], out[1:]
}

// setTraceParent gives each queue row of d's outcome the traceparent its
// attempts link to.
func (d *delivery) setTraceParent(parent string) {
	if d.outcome.Queue != nil {
		d.outcome.Queue.TraceParent = parent
	}
	if f := d.outcome.Fanout; f != nil {
		for i := range f.Queue {
			f.Queue[i].TraceParent = parent
		}
	}
}

// deliverAll calls every destination that takes d's leased new event at
// once, bound to the heartbeat and ending before the lease does, and sets
// the outcome: an attempt for each call, and a queue row for each
// destination that failed or was not called (its cap was full). The
// event is processed when every destination took it.
func (r *Receiver) deliverAll(d *delivery) (Outcome, worker.Result) {
	ctx, unbind := r.heartbeat.Bind(d.ctx)
	defer unbind()
	ctx, cancel := context.WithDeadline(ctx, d.deadline)
	defer cancel()
	f := &queue.Fanout{}
	var failed []string
	var status int
	for _, c := range r.fanout.DeliverTaken(ctx, d.work(0), d.routes, d.turns) {
		if c.Turn != nil {
			f.Turns = append(f.Turns, *c.Turn)
		}
		if c.Waiting != "" {
			f.Queue = append(f.Queue, queuedFor(d, c, c.Waiting))
			continue
		}
		r.metrics.ObserveDelivery(c.Destination, d.path, c.Result.Err == nil, c.Took)
		a := queue.NewAttempt{
			Source: queue.SourceStripe, EventID: d.key, Destination: c.Destination, Duration: c.Took,
			Succeeded: c.Result.Err == nil, HTTPStatus: c.Result.HTTPStatus, Path: d.path,
			AppDown: worker.IsAppDown(c.Result.Err), TraceID: tracing.TraceID(d.ctx),
		}
		if c.Result.Err != nil {
			a.Error = worker.ErrorText(c.Result.Err)
			f.Queue = append(f.Queue, queuedFor(d, c, a.Error))
			failed = append(failed, c.Destination+": "+a.Error)
			status = c.Result.HTTPStatus
			tracing.FailApp(trace.SpanFromContext(d.ctx), c.Result.HTTPStatus, worker.FailureClass(c.Result))
		}
		f.Attempts = append(f.Attempts, a)
	}
	d.outcome.Fanout = f
	switch {
	case len(f.Queue) == 0:
		how := queue.LogInline
		if d.path != queue.PathInline {
			how = queue.LogReconcile
		}
		d.outcome.Log = logged(d, how)
		return Processed, worker.Result{}
	case len(failed) == 0:
		d.outcome.Wait = r.store.RetryDelay(0)
		return Deferred, worker.Result{}
	}
	d.outcome.Wait = r.store.RetryDelay(0)
	return Queued, worker.Result{Err: errors.New(strings.Join(failed, "; ")), HTTPStatus: status}
}

// queuedFor is the queue row of d's delivery to c's destination, which
// failed or waits for why; an ordered one keeps its place in its key's
// order.
func queuedFor(d *delivery, c worker.Called, why string) queue.FailedEvent {
	fe := failedEvent(d, why)
	fe.Destination, fe.OrderKey = c.Destination, c.OrderKey
	if c.Turn != nil {
		fe.OrderSeq, fe.InTurn = c.Turn.Seq, !c.Turn.Granted
	}
	return fe
}
