package worker

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync/atomic"
	"time"

	"github.com/hookd/hookd/internal/startstop"
	"github.com/hookd/hookd/queue"
)

// The circuit breaker's defaults (HOOKD_BREAKER_FAILURES,
// HOOKD_BREAKER_PROBE): 20 app-down failures in a row is past a deploy's
// blip of refused connections, and a first probe after 30 s finds an app
// back from a restart soon, while the doubling to MaxProbeWait costs a
// weekend's outage one request every 5 minutes.
const (
	DefaultBreakerFailures = 20
	DefaultBreakerProbe    = 30 * time.Second
)

// ControlRefresh is how often a replica reads delivery_control: a pause,
// a resume or the breaker's change on any replica reaches every other
// within about this, well within a second. It is a poll and not LISTEN,
// which a pooler in transaction mode (PgBouncer's) does not carry.
const ControlRefresh = 500 * time.Millisecond

// Control is this replica's copy of delivery_control, which the receiver,
// the retry loop and the pages read from memory: whether delivery is held,
// by a person's pause or the circuit breaker. Run keeps it fresh; Observe
// hears the breaker's state from this replica's own writes at once. A nil
// Control never holds delivery.
type Control struct {
	store  *queue.Store
	logger *slog.Logger
	state  atomic.Pointer[queue.DeliveryControl]
	// destinations is each destination's row, by name, as last read.
	destinations atomic.Pointer[map[string]queue.DestinationState]
	refresh      startstop.Wake
	// breakerLogged is the breaker's state this replica last logged:
	// Observe changes the state before the row is read, so the state
	// before a read cannot say whether the change was logged.
	breakerLogged atomic.Bool
	reads         *startstop.Service
}

// NewControl returns a Control over store, which holds nothing until its
// first read.
func NewControl(store *queue.Store, logger *slog.Logger) *Control {
	c := &Control{store: store, logger: logger.With("component", "delivery-control"), refresh: startstop.NewWake()}
	c.state.Store(&queue.DeliveryControl{})
	c.reads = startstop.New(c.run)
	return c
}

// State is the delivery_control row as last read.
func (c *Control) State() queue.DeliveryControl {
	if c == nil {
		return queue.DeliveryControl{}
	}
	return *c.state.Load()
}

// Held reports whether deliveries go to the queue instead of the app.
func (c *Control) Held() bool { return c.State().Held() }

// Observe is queue.WithBreaker's: an outcome this replica wrote left the
// breaker open (or closed) with failures counted, so this replica holds
// delivery (or delivers) now, and reads the whole row at once when the
// breaker changed.
func (c *Control) Observe(open bool, failures int) {
	if c == nil {
		return
	}
	st := c.State()
	changed := st.BreakerOpen() != open
	if changed {
		if open {
			now := time.Now()
			st.BreakerOpenedAt = &now
		} else {
			st.BreakerOpenedAt = nil
		}
	}
	st.BreakerFailures = failures
	c.state.Store(&st)
	if changed {
		c.Poke()
	}
}

// Counting is queue.WithBreaker's: whether the row as last seen counts
// failures or has the breaker open, so that a success must reset it.
func (c *Control) Counting() bool {
	st := c.State()
	return st.BreakerFailures > 0 || st.BreakerOpen()
}

// Poke asks Run to read the row now, as after a pause or a resume on this
// replica.
func (c *Control) Poke() {
	if c == nil {
		return
	}
	c.refresh.Signal()
}

// Refresh reads the row now.
func (c *Control) Refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ControlRefresh)
	defer cancel()
	st, err := c.store.ReadDeliveryControl(ctx)
	if err != nil {
		return err
	}
	if err := c.refreshDestinations(ctx); err != nil {
		return err
	}
	if before := c.State(); before.Paused() != st.Paused() {
		if st.Paused() {
			c.logger.InfoContext(ctx, "delivery paused: events wait on the queue with no attempt spent",
				"by", st.PausedBy, "reason", st.PausedReason)
		} else {
			c.logger.InfoContext(ctx, "delivery resumed")
		}
	}
	if open := st.BreakerOpen(); c.breakerLogged.Swap(open) != open {
		if open {
			c.logger.WarnContext(ctx, "circuit breaker opened: the app is down, so delivery waits on the queue "+
				"with no attempt spent until a probe reaches it", "cause", st.BreakerError, "failures_in_a_row", st.BreakerFailures)
		} else {
			c.logger.InfoContext(ctx, "circuit breaker closed: the app answers again, delivery resumes")
		}
	}
	c.state.Store(&st)
	return nil
}

// Run reads the row at once, then every ControlRefresh, and when poked,
// until ctx is cancelled, and returns nil. A failed read keeps the last
// state: the database being away stops deliveries' writes anyway.
func (c *Control) Run(ctx context.Context) error { return c.reads.Run(ctx) }

// run reads at a steady rate, not ControlRefresh after each read, so that
// a slow read does not slow how soon a pause reaches this replica; a poke
// reads between two ticks.
func (c *Control) run(ctx context.Context) {
	t := time.NewTicker(ControlRefresh)
	defer t.Stop()
	var failing bool
	for {
		err := c.Refresh(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			c.logger.WarnContext(ctx, "cannot read delivery control; keeping the last state", "err", err)
			failing = true
		case err == nil && failing:
			c.logger.InfoContext(ctx, "delivery control read again")
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.refresh:
		}
	}
}

// HeldReason is the last error of an event queued without an attempt
// while delivery is held: why, and by whom.
func (c *Control) refreshDestinations(ctx context.Context) error {
	states, err := c.store.DestinationStates(ctx)
	if err != nil {
		return err
	}
	now := make(map[string]queue.DestinationState, len(states))
	before := c.destinationStates()
	for _, d := range states {
		now[d.Name] = d
		was := before[d.Name]
		switch {
		case d.Paused() && !was.Paused():
			c.logger.InfoContext(ctx, "destination paused: its deliveries wait on the queue with no attempt spent",
				"destination", d.Name, "by", deref(d.PausedBy), "reason", deref(d.PausedReason))
		case !d.Paused() && was.Paused():
			c.logger.InfoContext(ctx, "destination resumed", "destination", d.Name)
		}
		switch {
		case d.BreakerOpen() && !was.BreakerOpen():
			c.logger.WarnContext(ctx, "a destination's circuit breaker opened: it looks down, so its deliveries wait on "+
				"the queue with no attempt spent until a probe reaches it; the other destinations go on",
				"destination", d.Name, "cause", deref(d.BreakerError), "failures_in_a_row", d.BreakerFailures)
		case !d.BreakerOpen() && was.BreakerOpen():
			c.logger.InfoContext(ctx, "a destination's circuit breaker closed: it answers again", "destination", d.Name)
		}
	}
	c.destinations.Store(&now)
	return nil
}

func (c *Control) destinationStates() map[string]queue.DestinationState {
	if c == nil {
		return nil
	}
	if m := c.destinations.Load(); m != nil {
		return *m
	}
	return nil
}

// DestinationHeld is why the deliveries to destination wait, "" when they
// do not: all of delivery is held (Held), a person paused the destination,
// or its own circuit breaker is open. One destination held holds no other.
func (c *Control) DestinationHeld(destination string) string {
	if st := c.State(); st.Held() {
		return HeldReason(st)
	}
	d := c.DestinationState(destination)
	switch {
	case d.Paused():
		return fmt.Sprintf("destination %s is paused by %s (%s): queued without an attempt, delivered when it resumes",
			destination, deref(d.PausedBy), deref(d.PausedReason))
	case d.BreakerOpen():
		return fmt.Sprintf("destination %s looks down: its circuit breaker is open; queued without an attempt, "+
			"delivered when a probe of it succeeds", destination)
	}
	return ""
}

// DestinationState is destination's row as last read, with what this
// replica's own outcomes did to its breaker since.
func (c *Control) DestinationState(destination string) queue.DestinationState {
	return c.destinationStates()[destination]
}

// ObserveDestination is queue.WithDestinationBreakers': an outcome this
// replica wrote left destination's breaker open or not, after failures
// in a row. The replica holds or releases the destination at once; the
// others when they next read the table.
func (c *Control) ObserveDestination(destination string, open bool, failures int) {
	if c == nil {
		return
	}
	for {
		old := c.destinations.Load()
		next := map[string]queue.DestinationState{}
		if old != nil {
			maps.Copy(next, *old)
		}
		d := next[destination]
		changed := d.BreakerOpen() != open
		switch {
		case changed && open:
			now := time.Now()
			d.BreakerOpenedAt = &now
		case changed:
			d.BreakerOpenedAt = nil
		}
		d.Name, d.BreakerFailures = destination, failures
		next[destination] = d
		if c.destinations.CompareAndSwap(old, &next) {
			if changed {
				c.Poke()
			}
			return
		}
	}
}

// CountingDestination is queue.WithDestinationBreakers': whether
// destination's breaker, as last seen, counts failures or is open.
func (c *Control) CountingDestination(destination string) bool {
	d := c.DestinationState(destination)
	return d.BreakerFailures > 0 || d.BreakerOpen()
}

func HeldReason(st queue.DeliveryControl) string {
	if st.Paused() {
		return fmt.Sprintf("delivery is paused by %s (%s): queued without an attempt, delivered when delivery resumes",
			st.PausedBy, st.PausedReason)
	}
	return "delivery is paused: the circuit breaker is open, the app looks down; queued without an attempt, " +
		"delivered when a probe of the app succeeds"
}
