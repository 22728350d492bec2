package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hookd/hookd/queue"
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
	// OrderBy is a field path of the event (data.object.customer): the
	// events with one value of it reach the destination one at a time, in
	// the order hookd accepted them; "" orders nothing.
	OrderBy string
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
	// turns takes and gives back the turns of deliveries to destinations
	// with OrderBy; nil orders nothing.
	turns OrderTurns
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

// OrderTurns takes and gives back the turns of deliveries to ordered
// destinations (queue.Store).
type OrderTurns interface {
	TakeOrderTurn(ctx context.Context, destination, key string, holdFor time.Duration) (queue.OrderTurn, error)
	GiveBackOrderTurns(ctx context.Context, turns []queue.OrderTurn) error
}

// OrderBy makes the destinations with OrderBy take their turns with
// turns: without it, none is ordered. Call it before the first delivery.
func (f *Fanout) OrderBy(turns OrderTurns) { f.turns = turns }

// Ordered says whether destination's deliveries go one at a time per key:
// its retry loop then claims them by key (queue.ClaimOrderedDeliveries).
func (f *Fanout) Ordered(destination string) bool {
	d, ok := f.set.Load().dests[destination]
	return ok && d.OrderBy != "" && f.turns != nil
}

// OrderKey is the key of the event payload under destination's OrderBy:
// the field's value when it is a string or a number, "" (not ordered)
// when the destination orders nothing or the event has no such value.
func (f *Fanout) OrderKey(destination string, payload []byte) string {
	d, ok := f.set.Load().dests[destination]
	if !ok || d.OrderBy == "" || f.turns == nil {
		return ""
	}
	return orderKey(payload, d.OrderBy)
}

func orderKey(payload []byte, path string) string {
	v := gjson.GetBytes(payload, path)
	switch v.Type {
	case gjson.String:
		return v.Str
	case gjson.Number:
		return v.Raw
	}
	return ""
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
	// OrderKey is the delivery's key when its destination is ordered;
	// Turn, when set, the turn it took, to give back with its outcome.
	// Refused its turn, the delivery waits on the queue behind the key's
	// earlier ones.
	OrderKey string
	Turn     *queue.OrderTurn
}

// Deliver calls each destination of names with d at once, each under its
// own timeout, and returns their outcomes in the order of names. A
// destination held, or whose cap is full, is not called or waited for
// (Called.Waiting).
func (f *Fanout) Deliver(ctx context.Context, d Delivery, names []string) []Called {
	return f.deliver(ctx, d, names, InlineRateWait, nil)
}

// DeliverTaken is Deliver with the turns of d's deliveries to ordered
// destinations taken already, with the event's lease (queue.Delivery's
// Turns): a destination's turn not among them is taken here.
func (f *Fanout) DeliverTaken(ctx context.Context, d Delivery, names []string, turns []queue.OrderTurn) []Called {
	return f.deliver(ctx, d, names, InlineRateWait, turns)
}

// InlineRateWait is the longest a call waits for its turn under its
// destination's rate while Stripe waits: past it, the delivery is queued,
// and the destination's retry loop makes it at the rate.
const InlineRateWait = 100 * time.Millisecond

// deliver is DeliverTaken with calls waiting up to rateWait for their
// turn under their destinations' rates.
func (f *Fanout) deliver(ctx context.Context, d Delivery, names []string, rateWait time.Duration,
	taken []queue.OrderTurn) []Called {
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
		if !f.takeTurn(ctx, d, dest, taken, &out[i]) {
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

// takeTurn takes the turn of d's delivery to dest, when dest is ordered
// and d has a key, and says whether the delivery may go on: not when the
// key has an earlier delivery pending or in flight (c.Waiting says so).
// A turn that cannot be taken is a wait too: the delivery is queued, its
// place taken as its row is written.
func (f *Fanout) takeTurn(ctx context.Context, d Delivery, dest *fanoutDestination, taken []queue.OrderTurn,
	c *Called) bool {
	if dest.OrderBy == "" || f.turns == nil {
		return true
	}
	if c.OrderKey = orderKey(d.Payload, dest.OrderBy); c.OrderKey == "" {
		return true
	}
	i := slices.IndexFunc(taken, func(t queue.OrderTurn) bool { return t.Destination == dest.Name })
	var t queue.OrderTurn
	if i >= 0 {
		t = taken[i]
	} else {
		var err error
		if t, err = f.turns.TakeOrderTurn(ctx, dest.Name, c.OrderKey, dest.Timeout); err != nil {
			c.Waiting = fmt.Sprintf("deferred: the turn of %s %q could not be taken: %v", dest.OrderBy, c.OrderKey, err)
			return false
		}
	}
	c.Turn = &t
	if !t.Granted {
		c.Waiting = fmt.Sprintf("ordered: waits for an earlier event with %s %q to reach destination %q",
			dest.OrderBy, c.OrderKey, dest.Name)
		return false
	}
	return true
}

// ErrTurnWait is a replay's call not made because its key, at an ordered
// destination, has an earlier delivery pending or in flight: the replay
// tries it again, spending no attempt on it.
var ErrTurnWait = errors.New("waiting for its turn")

// giveBackTurns gives back the turns of calls whose outcomes write
// nothing to the queue (a replay's).
func (f *Fanout) giveBackTurns(ctx context.Context, calls []Called) error {
	var turns []queue.OrderTurn
	for _, c := range calls {
		if c.Turn != nil {
			turns = append(turns, *c.Turn)
		}
	}
	if len(turns) == 0 {
		return nil
	}
	// The calls are over whatever ctx says now: a turn left held would
	// hold its key until its lease expired.
	return f.turns.GiveBackOrderTurns(context.WithoutCancel(ctx), turns)
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
	if d.Replay != "" {
		// A replay's call takes its turn as a new event's does: a retry's
		// claim holds its key already.
		var c Called
		ok := f.takeTurn(ctx, d, dest, nil, &c)
		// A turn not given back only holds its key until its lease
		// expires: the call's outcome counts for more than that error.
		defer func() { _ = f.giveBackTurns(ctx, []Called{c}) }()
		if !ok {
			return Result{Err: fmt.Errorf("%w: %s", ErrTurnWait, c.Waiting)}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, dest.Timeout)
	defer cancel()
	return dest.Processor.Process(ctx, d)
}

// processAll delivers d to every destination that takes it, in parallel.
func (f *Fanout) processAll(ctx context.Context, d Delivery) Result {
	names, _ := f.Route(d)
	var failed []string
	var res Result
	calls := f.deliver(ctx, d, names, time.Hour, nil)
	if err := f.giveBackTurns(ctx, calls); err != nil {
		failed = append(failed, err.Error())
	}
	for _, c := range calls {
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
