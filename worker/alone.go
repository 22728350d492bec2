package worker

import (
	"context"
	"sync"
)

// Alone lets a replica run one event with nothing else in flight: the
// suspect runner (Retrier) closes it, waits for the runs in flight on
// every path to end, runs its suspects one at a time, and opens it again.
// Every other run enters it before it starts and leaves it when it ends;
// while it is closed none may enter, so the retry loop and the replay
// runner claim nothing, and the receiver queues its deliveries instead of
// running them. A nil Alone is always open.
type Alone struct {
	mu      sync.Mutex
	running int
	closed  bool
	// drained is closed when the last run in flight leaves a closed Alone.
	drained chan struct{}
}

// NewAlone returns an open Alone.
func NewAlone() *Alone { return &Alone{} }

// Enter reports whether a run may start now, counting it in flight until
// Leave when it may.
func (a *Alone) Enter() bool {
	if a == nil {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.running++
	return true
}

// Leave ends a run Enter let start.
func (a *Alone) Leave() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.running--
	if a.running == 0 && a.drained != nil {
		close(a.drained)
		a.drained = nil
	}
}

// Closed reports whether a suspect runs, or waits to run, alone.
func (a *Alone) Closed() bool {
	if a == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closed
}

// close lets no run start and returns a channel closed once none is in
// flight.
func (a *Alone) close() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	drained := make(chan struct{})
	if a.running == 0 {
		close(drained)
	} else {
		a.drained = drained
	}
	return drained
}

// open lets runs start again.
func (a *Alone) open() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed, a.drained = false, nil
}

// wait waits for drained until ctx is done, and reports whether nothing
// is in flight.
func wait(ctx context.Context, drained <-chan struct{}) bool {
	select {
	case <-drained:
		return true
	case <-ctx.Done():
		return false
	}
}
