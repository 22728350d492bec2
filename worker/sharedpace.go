package worker

import (
	"context"
	"sync"
	"time"

	"github.com/hookd/hookd/queue"
)

// sharedSlots is a Pace's rate held across every replica: the slots of its
// calls are reserved in the database (queue.ReserveSlots), a few at a
// time, and each call waits for its slot. A slot whose time passed unused
// is dropped rather than spent late, so that calls never bunch up behind
// an idle spell: the rate holds in every window, whichever replicas call.
type sharedSlots struct {
	store    *queue.Store
	key      string
	interval time.Duration
	batch    int

	mu    sync.Mutex
	slots []time.Time // reserved, on this machine's clock, in order
	// offset is the database's clock less this machine's, as read by the
	// reservation with the shortest round trip so far (as NTP does): a
	// slow answer says little of when the database read its clock, and
	// replicas that placed their slots by such answers would bunch calls
	// that the database spaced out.
	offset  time.Duration
	bestRTT time.Duration
}

// NewSharedPace returns a Pace of perSecond calls a second to key (a
// destination) across every replica that shares store's database; nil,
// no bound, when perSecond is 0 or less. Each replica reserves up to a
// tenth of a second of calls at once, so the database sees a handful of
// reservations a second whatever the rate.
func NewSharedPace(store *queue.Store, key string, perSecond float64) *Pace {
	if perSecond <= 0 {
		return nil
	}
	batch := min(max(int(perSecond/10), 1), 16)
	interval := time.Duration(float64(time.Second) / perSecond * (1 + jitterMargin))
	return &Pace{perSecond: perSecond, shared: &sharedSlots{store: store, key: key, interval: interval, batch: batch}}
}

// jitterMargin places the slots that much further apart than the rate
// asks: a call reaches the app some milliseconds after its slot (the
// goroutine scheduled, the request written and read), more on a busy
// machine, and two delayed by different amounts are closer together at
// the app than their slots. A wait that ends late already takes another
// slot (wait); the margin absorbs what comes after it. Measured on two
// shared cores at a load average of 8-15, 3% still let a 1 s window at the
// app see two calls over the rate now and then, 8% none in six runs: the
// rate is a ceiling, met to within 8%.
const jitterMargin = 0.08

// staleSlot is how late a slot may be taken: later, it is dropped.
func (s *sharedSlots) staleSlot() time.Duration { return s.interval / 8 }

// takeSlot hands out the next slot, reserving more when none is left, and
// says when it is and how long until it: when that is more than bound,
// the slot is left for the next caller and ok is false.
func (s *sharedSlots) takeSlot(ctx context.Context, bound time.Duration) (slot time.Time, wait time.Duration, ok bool,
	err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for len(s.slots) > 0 && now.Sub(s.slots[0]) > s.staleSlot() {
		s.slots = s.slots[1:]
	}
	if len(s.slots) == 0 {
		sl, err := s.store.ReserveSlots(ctx, s.key, s.batch, s.interval)
		if err != nil {
			return time.Time{}, 0, false, err
		}
		now = time.Now()
		if rtt := sl.Received.Sub(sl.Sent); s.bestRTT == 0 || rtt < s.bestRTT {
			s.bestRTT, s.offset = max(rtt, time.Nanosecond), sl.DBNow.Sub(sl.Sent.Add(rtt/2))
		}
		first := sl.First.Add(-s.offset)
		for i := range s.batch {
			s.slots = append(s.slots, first.Add(time.Duration(i)*s.interval))
		}
	}
	slot = s.slots[0]
	wait = max(slot.Sub(now), 0)
	if wait > bound {
		return slot, wait, false, nil
	}
	s.slots = s.slots[1:]
	return slot, wait, true, nil
}

// wait waits for the next slot, however far, and returns it: the retry
// loop's way. A wait that ends late (its timer, or this goroutine,
// scheduled late on a busy machine) has missed its slot: the call would go
// out beside the next slot's, so it waits for another one. waited says
// whether the call had to wait at all.
func (s *sharedSlots) wait(ctx context.Context) (slot time.Time, waited bool, err error) {
	for {
		slot, d, ok, err := s.takeSlot(ctx, time.Hour)
		if err != nil {
			return time.Time{}, waited, err
		}
		if !ok {
			waited = true
			continue
		}
		waited = waited || d > 0
		if err := sleep(ctx, d); err != nil {
			return time.Time{}, waited, err
		}
		if time.Since(slot) <= s.staleSlot() {
			return slot, waited, nil
		}
		waited = true
	}
}

// tryWait waits for the next slot when it is at most bound away; a wait
// that ends late tries again, as wait does, within what is left of bound.
// waited says whether the call waited for the slot it got.
func (s *sharedSlots) tryWait(ctx context.Context, bound time.Duration) (ok, waited bool) {
	deadline := time.Now().Add(bound)
	for {
		slot, d, ok, err := s.takeSlot(ctx, time.Until(deadline))
		if err != nil || !ok {
			return false, waited
		}
		waited = waited || d > 0
		if sleep(ctx, d) != nil {
			return false, waited
		}
		if time.Since(slot) <= s.staleSlot() {
			return true, waited
		}
		waited = true
	}
}

// sleep waits d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
