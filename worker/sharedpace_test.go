package worker_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/worker"
)

// Three replicas' Paces of one key, each waited on by 16 workers at once,
// let through at most the rate in any 1 s window between them.
func TestSharedPace_HoldsAcrossReplicas(t *testing.T) {
	b := setup(t)
	const perSecond, calls = 20, 120
	var mu sync.Mutex
	var at []time.Time
	var wg sync.WaitGroup
	next := make(chan struct{}, calls)
	for range calls {
		next <- struct{}{}
	}
	close(next)
	for range 3 {
		pace := worker.NewSharedPace(queue.New(b.pool), "paced", perSecond)
		for range 16 {
			wg.Go(func() {
				for range next {
					if _, err := pace.Wait(t.Context()); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					at = append(at, time.Now())
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i := range at {
		n := 0
		for j := i; j < len(at) && at[j].Sub(at[i]) < time.Second; j++ {
			n++
		}
		most = max(most, n)
	}
	if most > perSecond+1 {
		t.Errorf("%d calls in one 1 s window, want at most %d and one of tolerance", most, perSecond)
	}
	t.Logf("%d calls in %v, at most %d in a 1 s window", len(at), at[len(at)-1].Sub(at[0]), most)
}

// OnWait is told of every call refused its turn under a shared rate, and
// of none given one at once: at one call a quarter hour, of ten calls that
// may not wait, at most the first gets a slot, and each of the others is
// counted once.
func TestSharedPace_OnWaitCountsEachRefusal(t *testing.T) {
	b := setup(t)
	var waits atomic.Int64
	pace := worker.NewSharedPace(queue.New(b.pool), "paced", 1.0/900).OnWait(func() { waits.Add(1) })
	refused := 0
	for range 10 {
		if !pace.TryWait(t.Context(), 0) {
			refused++
		}
	}
	if refused < 9 || waits.Load() != int64(refused) {
		t.Fatalf("%d of 10 calls refused and %d counted; want at least 9 refused, each counted once", refused, waits.Load())
	}
}

// OnWait is told of each call that waited for its token under a Pace of
// this process: the first of three calls in a row takes the bucket's one
// token at once, the two after it wait.
func TestPace_OnWaitCountsEachWait(t *testing.T) {
	t.Parallel()
	var waits atomic.Int64
	pace := worker.NewPace(4).OnWait(func() { waits.Add(1) })
	for range 3 {
		if _, err := pace.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if waits.Load() != 2 {
		t.Fatalf("%d waits counted, want 2", waits.Load())
	}
	if !(*worker.Pace)(nil).OnWait(func() { waits.Add(1) }).TryWait(t.Context(), 0) || waits.Load() != 2 {
		t.Fatal("a nil Pace refused a call, or counted one")
	}
}
