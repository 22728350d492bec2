package worker

import (
	"context"
	"time"

	"golang.org/x/time/rate"
)

// Pace is HOOKD_FORWARD_RATE: a token bucket that every path delivering to
// the app takes a token from before it calls the processor (the receiver's
// inline path and reconciliation through internal/receiver, the retry loop,
// and whatever else delivers), so that a drain after an outage does not
// flood the app. NewPace's bucket is this process's alone; NewSharedPace's,
// which hookd serve uses, holds the rate across every replica. A nil Pace
// lets everything through at once.
//
// The bucket holds one token: the rate holds over any second, not only on
// average, and a backlog starts at the rate rather than with a burst.
type Pace struct {
	limiter   *rate.Limiter
	perSecond float64
	// shared, when set, holds the rate across every replica instead
	// (NewSharedPace).
	shared *sharedSlots
	// onWait, when set, is told of each call that waited for its turn or
	// was refused one (OnWait).
	onWait func()
}

// OnWait has p call f once for each call that waits for its turn under
// the rate, or that TryWait refuses a turn: hookd_rate_waits_total. A
// call given its turn at once is not counted. It returns p; on a nil Pace
// it does nothing, as nothing ever waits.
func (p *Pace) OnWait(f func()) *Pace {
	if p != nil {
		p.onWait = f
	}
	return p
}

// waited tells OnWait's f of one call that waited or was refused.
func (p *Pace) waited() {
	if p.onWait != nil {
		p.onWait()
	}
}

// NewPace returns a Pace of perSecond deliveries a second; nil, no bound,
// when perSecond is 0 or less.
func NewPace(perSecond float64) *Pace {
	if perSecond <= 0 {
		return nil
	}
	return &Pace{limiter: rate.NewLimiter(rate.Limit(perSecond), 1), perSecond: perSecond}
}

// PerSecond is the rate; 0 for none.
func (p *Pace) PerSecond() float64 {
	if p == nil {
		return 0
	}
	return p.perSecond
}

// A Turn is the moment a call may go under a Pace. A call kept back past
// it, by a write to the database between the wait and the call, would go
// out close beside the next turn's call: Missed says when, and such a call
// waits for another turn.
type Turn struct {
	at       time.Time
	interval time.Duration
}

// Missed reports whether a call starting now is too late for its turn:
// a whole interval of the rate after it, when the next turn has come.
// Calls up to that late keep any 1 s window to at most one call more than
// its turns, and each miss costs the rate a turn, so a write that takes a
// few milliseconds (or, under load, tens) must not be one. The zero Turn,
// a nil Pace's, is never missed.
func (t Turn) Missed() bool {
	return !t.at.IsZero() && time.Since(t.at) > t.interval
}

// Wait takes a token, waiting for it, and returns its turn. It fails
// without taking one, and at once, when ctx would end before the token
// comes.
func (p *Pace) Wait(ctx context.Context) (Turn, error) {
	if p == nil {
		return Turn{}, nil
	}
	if p.shared != nil {
		at, waited, err := p.shared.wait(ctx)
		if waited {
			p.waited()
		}
		return Turn{at: at, interval: p.shared.interval}, err
	}
	turn := func() Turn {
		return Turn{at: time.Now(), interval: time.Duration(float64(time.Second) / p.perSecond)}
	}
	if p.limiter.Allow() {
		return turn(), nil
	}
	p.waited()
	if err := p.limiter.Wait(ctx); err != nil {
		return Turn{}, err
	}
	return turn(), nil
}

// TryWait takes a token if one comes within bound, waiting for it, and
// reports whether it did; otherwise it takes none and returns at once.
func (p *Pace) TryWait(ctx context.Context, bound time.Duration) bool {
	if p == nil {
		return true
	}
	if p.shared != nil {
		ok, waited := p.shared.tryWait(ctx, bound)
		if waited || !ok {
			p.waited()
		}
		return ok
	}
	r := p.limiter.Reserve()
	delay := r.Delay()
	if !r.OK() || delay > bound {
		r.Cancel()
		p.waited()
		return false
	}
	if delay == 0 {
		return true
	}
	p.waited()
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		r.Cancel()
		return false
	}
}
