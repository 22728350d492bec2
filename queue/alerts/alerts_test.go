package alerts_test

import (
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/alerts"
	"github.com/hookd/hookd/queue/queuetest"
)

// testBundle is a Store on a fresh, migrated database of the test's own,
// and its pool for the rows a test puts in place.
type testBundle struct {
	store *queue.Store
	pool  *pgxpool.Pool
}

// setup returns the bundle of a test on a fresh database. Every test of the
// package starts with it.
func setup(t *testing.T) *testBundle {
	t.Helper()
	store, pool := queuetest.NewStore(t)
	return &testBundle{store: store, pool: pool}
}

func TestTakeNewlyDead(t *testing.T) {
	t.Parallel()

	t.Run("ConcurrentTakersSplitTheDeathsWithoutRepeats", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
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
				err := bundle.store.InTx(t.Context(), func(tx *queue.Tx) error {
					taken, err := alerts.TakeNewlyDead(t.Context(), tx.PgxTx())
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
		bundle := setup(t)
		e := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: queue.MaxAttempts})
		take := func() int {
			var n int
			if err := bundle.store.InTx(t.Context(), func(tx *queue.Tx) error {
				taken, err := alerts.TakeNewlyDead(t.Context(), tx.PgxTx())
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
		if _, err := bundle.store.RetryDead(t.Context(), e.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := bundle.store.ScheduleRetry(t.Context(), e.ID, queue.MaxAttempts, "still failing"); err != nil {
			t.Fatal(err)
		}
		if n := take(); n != 1 {
			t.Errorf("take after it died again: %d, want 1", n)
		}
	})
}
