package queue_test

import (
	"sync"
	"testing"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

func TestTakeNewlyDead(t *testing.T) {
	t.Parallel()

	t.Run("ConcurrentTakersSplitTheDeathsWithoutRepeats", func(t *testing.T) {
		t.Parallel()
		store, bundle := setup(t)
		const dead = 40
		for range dead {
			queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: queue.MaxAttempts})
		}
		seen := map[string]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 8 {
			wg.Go(func() {
				<-start
				err := store.InTx(t.Context(), func(tx *queue.Tx) error {
					taken, err := tx.TakeNewlyDead(t.Context())
					mu.Lock()
					defer mu.Unlock()
					for _, d := range taken {
						seen[d.EventID]++
					}
					return err
				})
				if err != nil {
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(seen) != dead {
			t.Errorf("%d deaths taken, want %d", len(seen), dead)
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("%s taken %d times, want once", id, n)
			}
		}
	})

	t.Run("AnEventThatDiesAgainIsTakenAgain", func(t *testing.T) {
		t.Parallel()
		store, bundle := setup(t)
		e := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: queue.MaxAttempts})
		take := func() int {
			var n int
			if err := store.InTx(t.Context(), func(tx *queue.Tx) error {
				taken, err := tx.TakeNewlyDead(t.Context())
				n = len(taken)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := take(); n != 1 {
			t.Fatalf("first take: %d, want 1", n)
		}
		if n := take(); n != 0 {
			t.Fatalf("second take: %d, want 0", n)
		}
		// A person sends it back; its last retry fails again.
		if _, err := store.RetryDead(t.Context(), e.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := queuetest.NewSeed(store).ScheduleRetry(t.Context(), e.ID, queue.MaxAttempts, "still failing"); err != nil {
			t.Fatal(err)
		}
		if n := take(); n != 1 {
			t.Errorf("take after it died again: %d, want 1", n)
		}
	})
}
