package worker

import "sync"

// retryWindow is how many due deliveries a retry loop's turn claims. It
// starts at the loop's whole claim and stays there while retries succeed.
// A turn in which every attempt failed halves it, down to one, and the
// loop waits an Interval before its next turn; a turn with a success
// doubles it back, up to the whole claim.
//
// A destination whose app fails every call (a 500 to everything after a
// bad deploy) would otherwise be retried as fast as the app answers: each
// retry is a claim, a call and an outcome, and a backlog coming due at
// once takes the cores and the database the other destinations' calls
// need. Its loop instead retries one delivery per turn, which is enough to
// learn that the app is back, and spends its deliveries' attempts no
// faster than that: they wait on the queue, due, as they would behind a
// pause. The breaker does this for an app that is down (no answer, a 502,
// 503 or 504) and, open, holds every path; the window holds only the
// retry loop, and only while nothing it retries succeeds.
//
// It starts whole rather than small, as TCP's slow start would: starting
// at the concurrency spared the first failing turn's calls (about 170
// instead of 1,400 in TestRetrier_AnAppFailingEveryCallIsRetriedFewerAtATime)
// but cost a healthy backlog's drain 3-17% in make bench-load.
type retryWindow struct {
	full int

	mu   sync.Mutex
	size int
	// narrowed: a turn's attempts all failed since the window was last
	// whole.
	narrowed bool
}

// newRetryWindow is the window of a loop claiming up to full deliveries a
// turn.
func newRetryWindow(full int) *retryWindow {
	return &retryWindow{full: full, size: full}
}

// claim is how many deliveries the next turn claims.
func (w *retryWindow) claim() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.size
}

// windowChange is what one turn's outcome did to the window.
type windowChange int

const (
	windowKept windowChange = iota
	// windowNarrowed: every attempt of the turn failed; the loop waits
	// an Interval before its next turn.
	windowNarrowed
	// windowClosing: it narrowed for the first time since it was whole:
	// a run of failures begins.
	windowClosing
	// windowReopened: it is whole again after a run of failures.
	windowReopened
)

// after sets the window from a turn's attempts: succeeded the app took,
// failed it did not.
func (w *retryWindow) after(succeeded, failed int) windowChange {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case succeeded > 0 && w.size < w.full:
		w.size = min(w.full, 2*w.size)
		if w.size == w.full && w.narrowed {
			w.narrowed = false
			return windowReopened
		}
	case succeeded == 0 && failed > 0:
		w.size = max(1, w.size/2)
		if !w.narrowed {
			w.narrowed = true
			return windowClosing
		}
		return windowNarrowed
	}
	return windowKept
}
