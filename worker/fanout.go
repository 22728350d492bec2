package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Route names the destinations that take an event, in their configured
// order, and, for each destination whose filter failed on the event (a
// missing field, a wrong type), why: such a destination does not take it.
type Route func(d Delivery) (names []string, failed map[string]error)

// FanoutDestination is one destination a Fanout delivers to.
type FanoutDestination struct {
	// Name is the destination's name: its deliveries' queue rows, leases
	// and attempts go by it.
	Name string
	// Processor delivers to it (a Forwarder of its URL).
	Processor Processor
	// Timeout bounds one call; 0 is the default processor timeout.
	Timeout time.Duration
	// Concurrency caps its calls in flight on this replica, over the
	// receiver, its retry loop and replays; 0 is no cap of its own.
	Concurrency int
	// Rate is the calls a second it takes, over every replica; 0 is no
	// bound.
	Rate float64
}

// Fanout delivers events to several destinations: it routes each event,
// calls the destinations that take it at once, in parallel, each under
// its own timeout and cap, and is the Processor of each destination's
// retries (Delivery.Destination says which). A destination's cap full is
// a wait for that destination alone: the receiver queues its delivery
// rather than wait, so a slow destination holds no call to another.
type Fanout struct {
	// held says why a destination's deliveries wait ("" when they do
	// not); nil holds none.
	held func(destination string) string
	// wrap, when set, is put around each destination's Processor.
	wrap func(Processor) Processor
	// paces, when set, makes each destination's Pace of its Rate.
	paces func(destination string, perSecond float64) *Pace
	// set is the destinations as last configured: Replace swaps it whole,
	// so a delivery routes and calls on one configuration.
	set atomic.Pointer[fanoutSet]
}

// fanoutSet is one configuration of a Fanout's destinations.
type fanoutSet struct {
	route Route
	order []string
	dests map[string]*fanoutDestination
}

type fanoutDestination struct {
	FanoutDestination
	// slots holds a token per call in flight; nil for no cap.
	slots chan struct{}
	// pace holds its Rate; nil for none.
	pace *Pace
}

// NewFanout returns a Fanout over dests, routed by route.
func NewFanout(route Route, dests []FanoutDestination) *Fanout {
	f := &Fanout{}
	f.Replace(route, dests)
	return f
}

// Replace makes route and dests the Fanout's configuration from the next
// delivery on (a configuration applied again: SIGHUP). Calls in flight end
// on the configuration they started with.
func (f *Fanout) Replace(route Route, dests []FanoutDestination) {
	set := &fanoutSet{route: route, dests: make(map[string]*fanoutDestination, len(dests))}
	for _, d := range dests {
		fd := &fanoutDestination{FanoutDestination: d}
		fd.Timeout = cmp.Or(fd.Timeout, DefaultProcessTimeout)
		if f.wrap != nil {
			fd.Processor = f.wrap(fd.Processor)
		}
		if f.paces != nil {
			fd.pace = f.paces(d.Name, d.Rate)
		}
		if d.Concurrency > 0 {
			fd.slots = make(chan struct{}, d.Concurrency)
		}
		set.order = append(set.order, d.Name)
		set.dests[d.Name] = fd
	}
	f.set.Store(set)
}

// Wrap puts wrap around each destination's Processor, now and in every
// configuration Replace makes: a layer every call goes through whatever
// its destination (hookd keeping Stripe's notices about itself). Call it
// before the first delivery.
func (f *Fanout) Wrap(wrap func(Processor) Processor) {
	f.wrap = wrap
	for _, d := range f.set.Load().dests {
		d.Processor = wrap(d.Processor)
	}
}

// PaceBy makes each destination's Pace of its Rate with paces, now and
// in every configuration Replace makes (worker.NewSharedPace, so that the
// rate holds across the replicas). Call it before the first delivery.
func (f *Fanout) PaceBy(paces func(destination string, perSecond float64) *Pace) {
	f.paces = paces
	for _, d := range f.set.Load().dests {
		d.pace = paces(d.Name, d.Rate)
	}
}

// Pace is destination's Pace, nil for none: its retry loop waits on it.
func (f *Fanout) Pace(destination string) *Pace {
	if d, ok := f.set.Load().dests[destination]; ok {
		return d.pace
	}
	return nil
}

// HoldBy makes Deliver skip each destination held says is held (a
// person paused it): its delivery waits on the queue, spending no
// attempt. Call it before the first delivery.
func (f *Fanout) HoldBy(held func(destination string) string) { f.held = held }

// Names is every destination's name, in the configured order.
func (f *Fanout) Names() []string { return f.set.Load().order }

// Destination returns the destination named name, and whether there is
// one.
func (f *Fanout) Destination(name string) (FanoutDestination, bool) {
	d, ok := f.set.Load().dests[name]
	if !ok {
		return FanoutDestination{}, false
	}
	return d.FanoutDestination, true
}

// Route names the destinations that take d (see Route).
func (f *Fanout) Route(d Delivery) (names []string, failed map[string]error) {
	return f.set.Load().route(d)
}

// Called is the outcome of one destination's call in a fan-out.
type Called struct {
	Destination string
	Result      Result
	Took        time.Duration
	// Waiting, when set, is why the destination was not called: it is
	// held, or its cap was full. The delivery waits on the queue and
	// spends no attempt.
	Waiting string
	// Cut: the call ended because ctx did, not by itself: a stop or the
	// fence, which says nothing of the destination.
	Cut bool
}

// Deliver calls each destination of names with d at once, each under its
// own timeout, and returns their outcomes in the order of names. A
// destination held, or whose cap is full, is not called or waited for
// (Called.Waiting).
func (f *Fanout) Deliver(ctx context.Context, d Delivery, names []string) []Called {
	return f.deliver(ctx, d, names, InlineRateWait)
}

// InlineRateWait is the longest a call waits for its turn under its
// destination's rate while Stripe waits: past it, the delivery is queued,
// and the destination's retry loop makes it at the rate.
const InlineRateWait = 100 * time.Millisecond

// deliver is Deliver with calls waiting up to rateWait for their turn
// under their destinations' rates.
func (f *Fanout) deliver(ctx context.Context, d Delivery, names []string, rateWait time.Duration) []Called {
	out := make([]Called, len(names))
	dests := f.set.Load().dests
	var wg sync.WaitGroup
	for i, name := range names {
		out[i].Destination = name
		dest, ok := dests[name]
		if !ok {
			out[i].Result = Result{Err: fmt.Errorf("destination %q is not configured", name)}
			continue
		}
		if f.held != nil {
			if why := f.held(name); why != "" {
				out[i].Waiting = why
				continue
			}
		}
		if !dest.pace.TryWait(ctx, rateWait) {
			out[i].Waiting = fmt.Sprintf("deferred: destination %q's rate (%g a second, over every replica) was reached, "+
				"so its retry loop delivers it at that rate", name, dest.Rate)
			continue
		}
		if !dest.tryTake() {
			out[i].Waiting = fmt.Sprintf("deferred: destination %q had %d calls in flight, its concurrency", name, dest.Concurrency)
			continue
		}
		call := func() {
			defer dest.free()
			one := d
			one.Destination = name
			out[i].Result, out[i].Took = Process(ctx, dest.Processor, dest.Timeout, one)
			out[i].Cut = out[i].Result.Err != nil && ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded)
		}
		if i == len(names)-1 {
			// The last call runs here, while the others run beside it:
			// one goroutine and one wake-up fewer per event.
			call()
			continue
		}
		wg.Go(call)
	}
	wg.Wait()
	return out
}

// Process is a retry's, a replay's or a suspect's call: to the destination
// d names, waiting for a place under its cap; with no destination named
// (a replay), to every destination that takes d, failing unless all of
// them took it.
func (f *Fanout) Process(ctx context.Context, d Delivery) Result {
	if d.Destination == "" {
		return f.processAll(ctx, d)
	}
	dest, ok := f.set.Load().dests[d.Destination]
	if !ok {
		return Result{Err: fmt.Errorf("destination %q is not configured: its deliveries wait until it is again, "+
			"or until a person moves them", d.Destination)}
	}
	if !dest.take(ctx) {
		return Result{Err: ctx.Err()}
	}
	defer dest.free()
	ctx, cancel := context.WithTimeout(ctx, dest.Timeout)
	defer cancel()
	return dest.Processor.Process(ctx, d)
}

// processAll delivers d to every destination that takes it, in parallel.
func (f *Fanout) processAll(ctx context.Context, d Delivery) Result {
	names, _ := f.Route(d)
	var failed []string
	var res Result
	for _, c := range f.deliver(ctx, d, names, time.Hour) {
		switch {
		case c.Waiting != "":
			failed = append(failed, c.Waiting)
		case c.Result.Err != nil:
			failed = append(failed, c.Destination+": "+c.Result.Err.Error())
			res.HTTPStatus = cmp.Or(res.HTTPStatus, c.Result.HTTPStatus)
		}
	}
	if len(failed) > 0 {
		res.Err = errors.New(strings.Join(failed, "; "))
	}
	return res
}

func (d *fanoutDestination) tryTake() bool {
	if d.slots == nil {
		return true
	}
	select {
	case d.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (d *fanoutDestination) take(ctx context.Context) bool {
	if d.slots == nil {
		return true
	}
	select {
	case d.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (d *fanoutDestination) free() {
	if d.slots != nil {
		<-d.slots
	}
}
