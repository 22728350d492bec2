package worker

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookd/hookd/internal/startstop"
	"github.com/hookd/hookd/queue"
)

// errFenced is the cause of a processor's cancellation when its replica
// could not beat in time: its leases may be taken over soon, so it stops
// before another run of its events could start.
var errFenced = errors.New("this replica could not reach the database to keep its leases, so it stopped its processors")

// Heartbeat keeps a replica's leases live: it beats every
// queue.BeatInterval (queue.Store.Beat), and fences the replica on its own
// clock when it cannot. Every processor run under a lease of the replica's
// is bound to it (Bind) and is cancelled queue.FenceAfter after the last
// beat that succeeded was sent, unless a later one succeeds: before
// queue.ReplicaSilence has passed since that beat on the database's clock,
// when another replica may take the leases over. A beat that finds the
// replica's row gone (the database lost it, or another replica found this
// one silent) fences at once and registers again.
type Heartbeat struct {
	store  *queue.Store
	logger *slog.Logger

	mu sync.Mutex
	// gen is cancelled when the replica fences itself; runs bound to it
	// end. A new one starts with the next beat that succeeds.
	gen    context.Context
	cancel context.CancelCauseFunc
	// fence fires FenceAfter after the last good beat was sent.
	fence *time.Timer
	// clock is read for every fence decision; tests give their own.
	clock clock
	// good is when the last good beat was sent, a Moment, read without
	// the lock by Overdue on every receiver's exchange; never before the
	// first.
	good atomic.Int64

	beats *startstop.Service
}

// NewHeartbeat returns the Heartbeat of store's replica (queue.WithReplica).
// Until Run registers it, it is fenced: nothing bound to it runs.
func NewHeartbeat(store *queue.Store, logger *slog.Logger) *Heartbeat {
	h := &Heartbeat{store: store, logger: logger.With("component", "heartbeat", "replica", store.Replica()),
		clock: processClock{start: time.Now()}}
	h.good.Store(never)
	h.gen, h.cancel = context.WithCancelCause(context.Background())
	h.cancel(errFenced)
	h.beats = startstop.New(func(ctx context.Context) {
		startstop.Every(ctx, queue.BeatInterval, h.beat)
		h.stop()
	})
	return h
}

// Register makes the replica known and its processors free to run. Run
// does it; callers that take leases before Run starts call it first.
func (h *Heartbeat) Register(ctx context.Context) error {
	sent := h.Now()
	if err := h.store.Register(ctx); err != nil {
		return err
	}
	h.beaten(sent)
	return nil
}

// Run beats until ctx is cancelled, then removes the replica, once every
// run bound to it has ended (the caller stops them first). A replica not
// registered yet registers with its first beat.
func (h *Heartbeat) Run(ctx context.Context) error { return h.beats.Run(ctx) }

func (h *Heartbeat) beat(ctx context.Context) {
	sent := h.Now()
	beatCtx, cancel := context.WithTimeout(ctx, queue.FenceAfter)
	defer cancel()
	h.mu.Lock()
	fenced := h.gen.Err() != nil
	h.mu.Unlock()
	if fenced {
		// Fenced: the replica registers again, its row being gone, or
		// silent.
		if err := h.store.Register(beatCtx); err != nil {
			if ctx.Err() == nil {
				h.logger.WarnContext(ctx, "cannot register this replica's heartbeat again; trying again", "err", err)
			}
			return
		}
		h.logger.InfoContext(ctx, "heartbeat back: this replica takes leases again", "replica", h.store.Replica())
		h.beaten(sent)
		return
	}
	registered, err := h.store.Beat(beatCtx)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			h.logger.WarnContext(ctx, "heartbeat failed: the replica stops its processors if none succeeds within "+
				queue.FenceAfter.String()+" of the last", "err", err)
		}
	case !registered:
		h.logger.WarnContext(ctx, "this replica's heartbeat row was gone (the database lost it, or the replica "+
			"was silent too long): its processors stop, and it registers again")
		h.fenceNow()
	default:
		h.beaten(sent)
	}
}

// overdueAfter is how long after the last good beat was sent Overdue
// reports true: two beats missed, half of FenceAfter.
const overdueAfter = 2 * queue.BeatInterval

// Overdue reports whether the replica's last good beat was sent more than
// two BeatIntervals ago (or never): its own beats are failing or slow, as
// on a loaded machine or just after the database came back, and it fences
// itself soon or has. A write the replica makes anyway can carry a beat
// (queue.Exchange's Beat, then Beaten): a replica whose deliveries commit
// is not silent, and it never takes a lease the database grants on a beat
// its own clock has already given up on. A nil Heartbeat is never overdue.
func (h *Heartbeat) Overdue() bool {
	if h == nil {
		return false
	}
	good := h.good.Load()
	return good == never || h.clock.Elapsed()-time.Duration(good) > overdueAfter
}

// A Moment is a reading of the heartbeat's monotonic clock, taken in this
// process: only the time between two Moments means anything. The fence
// never compares wall-clock times, so a step of the system's clock (NTP, a
// VM resumed) moves no fence while the database still grants leases.
type Moment time.Duration

// never is good's value before the first good beat.
const never = math.MinInt64

// Now is the Moment a beat is sent at, for Beaten. A nil Heartbeat reads 0.
func (h *Heartbeat) Now() Moment {
	if h == nil {
		return 0
	}
	return Moment(h.clock.Elapsed())
}

// Beaten notes that a beat of the replica sent at sent (a Moment of Now)
// succeeded, the heartbeat's own or one another write carried (Overdue): a
// fenced replica runs again, and its fence moves to FenceAfter after sent.
func (h *Heartbeat) Beaten(sent Moment) {
	if h != nil {
		h.beaten(sent)
	}
}

// beaten notes a beat sent at sent that succeeded. Beats carried by other
// writes may end out of order: one sent before the last good beat moves
// nothing.
func (h *Heartbeat) beaten(sent Moment) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if int64(sent) < h.good.Load() {
		return
	}
	h.good.Store(int64(sent))
	if h.gen.Err() != nil {
		h.gen, h.cancel = context.WithCancelCause(context.Background())
	}
	wait := time.Duration(sent) + queue.FenceAfter - h.clock.Elapsed()
	if h.fence == nil {
		h.fence = time.AfterFunc(wait, h.fenceNow)
		return
	}
	h.fence.Reset(wait)
}

// fenceNow cancels every run bound to the replica. The replica keeps its
// id: each cancelled run still writes its outcome with its lease, as it
// would have, and a lease another replica took over meanwhile refuses it.
func (h *Heartbeat) fenceNow() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gen.Err() != nil {
		return
	}
	h.logger.Warn("fenced: this replica's processors stop before another replica may take their events over",
		"last_good_beat", h.lastGoodBeat())
	h.cancel(errFenced)
}

// stop ends the heartbeat at a clean stop and removes the replica.
func (h *Heartbeat) stop() {
	h.mu.Lock()
	if h.fence != nil {
		h.fence.Stop()
	}
	h.cancel(errFenced)
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), queue.BeatInterval)
	defer cancel()
	if err := h.store.Deregister(ctx); err != nil {
		h.logger.Warn("cannot remove this replica's heartbeat row: its leases go when it is seen silent", "err", err)
	}
}

// Fenced reports whether the replica is fenced now: a run bound to it now
// would be cancelled at once. A nil Heartbeat never is.
func (h *Heartbeat) Fenced() bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gen.Err() != nil
}

// Bind returns ctx, also cancelled when the replica fences itself. A nil
// Heartbeat binds nothing: the leases then have no replica and are judged
// by their expiry alone.
func (h *Heartbeat) Bind(ctx context.Context) (context.Context, context.CancelFunc) {
	if h == nil {
		return context.WithCancel(ctx)
	}
	h.mu.Lock()
	gen := h.gen
	h.mu.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	if gen.Err() != nil {
		// Fenced now: cancelled before the caller starts anything.
		cancel(context.Cause(gen))
	}
	stop := context.AfterFunc(gen, func() { cancel(context.Cause(gen)) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// lastGoodBeat is when the last good beat was sent on the wall clock, for
// the log alone, or the zero time before the first.
func (h *Heartbeat) lastGoodBeat() time.Time {
	good := h.good.Load()
	if good == never {
		return time.Time{}
	}
	return h.clock.Now().Add(time.Duration(good) - h.clock.Elapsed())
}

// clock is what the heartbeat reads time from: Elapsed, on the monotonic
// clock, for every fence decision; Now, the wall clock, only for what it
// logs.
type clock interface {
	Now() time.Time
	Elapsed() time.Duration
}

// processClock is the process's own clock; Elapsed is monotonic since
// start.
type processClock struct{ start time.Time }

func (processClock) Now() time.Time           { return time.Now() }
func (c processClock) Elapsed() time.Duration { return time.Since(c.start) }
