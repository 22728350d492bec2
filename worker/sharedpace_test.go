package worker_test

import (
	"slices"
	"sync"
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
					if err := pace.Wait(t.Context()); err != nil {
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
