package worker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

// runHeartbeat starts a Heartbeat of a new replica over pool and returns
// its store; the heartbeat stops with the test.
func runHeartbeat(t *testing.T, pool *pgxpool.Pool) (*queue.Store, *worker.Heartbeat) {
	t.Helper()
	store := queue.New(pool, queue.WithReplica(uuid.New()))
	hb := worker.NewHeartbeat(store, discardLogger)
	if err := hb.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = hb.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return store, hb
}

// A replica whose beats stop reaching the database cancels its processors
// on its own clock, FenceAfter its last good beat, before ReplicaSilence
// lets another replica take their events over.
func TestHeartbeat_FencesItselfWhenItCannotBeat(t *testing.T) {
	t.Parallel()
	_, pool := queuetest.NewStore(t)
	own, err := pgxpool.New(t.Context(), pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	_, hb := runHeartbeat(t, own)
	run, unbind := hb.Bind(context.Background())
	defer unbind()
	if run.Err() != nil {
		t.Fatalf("a run bound to a beating replica: %v", context.Cause(run))
	}
	// The database goes out of reach.
	cut := time.Now()
	own.Close()
	queuetest.WaitFor(t, 2*queue.ReplicaSilence, "the run to be cancelled", func() bool { return run.Err() != nil })
	if took := time.Since(cut); took >= queue.ReplicaSilence {
		t.Errorf("cancelled %s after the last beat, want before ReplicaSilence (%s)", took, queue.ReplicaSilence)
	}
	if !errors.Is(context.Cause(run), worker.ErrFenced) {
		t.Errorf("cause %v, want ErrFenced", context.Cause(run))
	}
	if after, unbind := hb.Bind(context.Background()); after.Err() == nil {
		t.Errorf("a run bound while fenced is not cancelled")
		unbind()
	}
}

// A beat that finds its replica's row gone (the database lost it, or
// another replica found this one silent) fences at once, and the replica
// registers again.
func TestHeartbeat_RowGoneFencesAndRegistersAgain(t *testing.T) {
	t.Parallel()
	_, pool := queuetest.NewStore(t)
	store, hb := runHeartbeat(t, pool)
	first := store.Replica()
	run, unbind := hb.Bind(context.Background())
	defer unbind()
	if _, err := pool.Exec(t.Context(), `DELETE FROM hookd_replicas WHERE id = $1`, first); err != nil {
		t.Fatal(err)
	}
	queuetest.WaitFor(t, 5*queue.BeatInterval, "the run to be cancelled", func() bool { return run.Err() != nil })
	// The row commits a moment before the heartbeat lifts its fence, so
	// both are polled for together.
	queuetest.WaitFor(t, 5*queue.BeatInterval, "the replica registered again, a run bound to it not cancelled", func() bool {
		if queuetest.Count(t, pool, `SELECT count(*) FROM hookd_replicas WHERE id = $1`, first) != 1 {
			return false
		}
		again, unbindAgain := hb.Bind(context.Background())
		defer unbindAgain()
		return again.Err() == nil
	})
}

// A backward step of the wall clock (NTP correcting it, a VM resumed) moves
// no fence: the replica keeps beating and its runs keep running, while the
// database, on its own clock, still sees it beat and grants its leases.
// The clock here steps the wall time back 60 s while the monotonic time
// goes on, as the system's does.
func TestHeartbeat_AWallClockStepMovesNoFence(t *testing.T) {
	t.Parallel()
	_, pool := queuetest.NewStore(t)
	store := queue.New(pool, queue.WithReplica(uuid.New()))
	hb := worker.NewHeartbeat(store, discardLogger)
	start := time.Now()
	var step atomic.Int64
	worker.UseClock(hb, func() time.Time { return time.Now().Add(time.Duration(step.Load())) },
		func() time.Duration { return time.Since(start) })
	if err := hb.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = hb.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	run, unbind := hb.Bind(context.Background())
	defer unbind()

	var stepped time.Time
	if err := pool.QueryRow(t.Context(), `SELECT now()`).Scan(&stepped); err != nil {
		t.Fatal(err)
	}
	step.Store(int64(-60 * time.Second))
	// Longer than FenceAfter, on the database's clock: a fence moved by
	// the step would have fired by then.
	queuetest.WaitFor(t, 3*queue.ReplicaSilence, "the replica to beat for longer than FenceAfter after the step", func() bool {
		if run.Err() != nil {
			t.Fatalf("a run of the replica was cancelled after the wall clock stepped back: %v", context.Cause(run))
		}
		return queuetest.Count(t, pool, `SELECT count(*) FROM hookd_replicas WHERE id = $1 AND beat_at > $2::timestamptz + $3::interval`,
			store.Replica(), stepped, (queue.FenceAfter+queue.BeatInterval).String()) == 1
	})
	if run.Err() != nil || hb.Overdue() {
		t.Fatalf("after the step: run cancelled %v, overdue %v; want neither", context.Cause(run), hb.Overdue())
	}
	again, unbindAgain := hb.Bind(context.Background())
	defer unbindAgain()
	if again.Err() != nil {
		t.Fatalf("a run bound after the step: %v", context.Cause(again))
	}
}
