package groupcommit_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hookd/hookd/internal/groupcommit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A lone item runs at once, in a batch of its own.
func TestLoneItemRunsAlone(t *testing.T) {
	var batches [][]int
	b := groupcommit.New(8, func(batch []int) { batches = append(batches, batch) })
	b.Do(1)
	b.Do(2)
	if len(batches) != 2 || len(batches[0]) != 1 || len(batches[1]) != 1 {
		t.Fatalf("batches %v, want [[1] [2]]", batches)
	}
}

// Items that arrive while a batch runs go together in the next one, no
// more than size at a time, each run exactly once, and never two batches
// at once.
func TestItemsArrivingMeanwhileShareTheNextBatch(t *testing.T) {
	const items, size = 200, 16
	release := make(chan struct{})
	first := make(chan struct{})
	var running, overlaps atomic.Int64
	var mu sync.Mutex
	seen := map[int]int{}
	var sizes []int
	b := groupcommit.New(size, func(batch []int) {
		if running.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer running.Add(-1)
		if batch[0] == -1 {
			close(first)
			<-release
		}
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, len(batch))
		for _, it := range batch {
			seen[it]++
		}
	})
	var waiting atomic.Int64
	b.OnWaiting(func(d int) { waiting.Add(int64(d)) })

	var wg sync.WaitGroup
	wg.Go(func() { b.Do(-1) })
	<-first
	for i := range items {
		wg.Go(func() { b.Do(i) })
	}
	// Poll, never sleep: every item is waiting behind the first batch.
	for waiting.Load() != items {
		runtime.Gosched()
		if t.Context().Err() != nil {
			t.Fatal("items never all waited")
		}
	}
	close(release)
	wg.Wait()

	if overlaps.Load() != 0 {
		t.Errorf("%d batches ran beside another", overlaps.Load())
	}
	if waiting.Load() != 0 {
		t.Errorf("waiting ends at %d, want 0", waiting.Load())
	}
	for i := range items {
		if seen[i] != 1 {
			t.Fatalf("item %d ran %d times, want 1", i, seen[i])
		}
	}
	// The first batch held the lone item; the 200 behind it ran in full
	// batches of 16 but the last.
	if len(sizes) != 1+(items+size-1)/size {
		t.Errorf("batch sizes %v: want the first, then %d batches of up to %d", sizes, (items+size-1)/size, size)
	}
	for _, n := range sizes {
		if n > size {
			t.Errorf("a batch of %d, over the size %d", n, size)
		}
	}
}

// Do returns only once its item's batch has run.
func TestDoReturnsAfterItsBatchRan(t *testing.T) {
	type item struct{ done bool }
	b := groupcommit.New(4, func(batch []*item) {
		for _, it := range batch {
			it.done = true
		}
	})
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			it := &item{}
			b.Do(it)
			if !it.done {
				t.Error("Do returned before its batch ran")
			}
		})
	}
	wg.Wait()
}

// A member whose write hangs until its context ends fails alone: the
// group's failure leaves every other member its own try, with time of its
// own, and each gets the outcome of its own write.
func TestEachAloneGivesEveryMemberItsOwnTime(t *testing.T) {
	const stuck = 3
	group := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	var mu sync.Mutex
	written := map[int]int{}
	failed := map[int]error{}
	groupcommit.EachAlone(group, 200*time.Millisecond, func(ctx context.Context, members []int) error {
		if slices.Contains(members, stuck) {
			<-ctx.Done()
			return ctx.Err()
		}
		mu.Lock()
		defer mu.Unlock()
		for _, m := range members {
			written[m]++
		}
		return nil
	}, func(m int, err error) {
		mu.Lock()
		defer mu.Unlock()
		failed[m] = err
	})
	if len(failed) != 1 || !errors.Is(failed[stuck], context.DeadlineExceeded) {
		t.Errorf("failed: %v; want only member %d, with its own deadline", failed, stuck)
	}
	for _, m := range group {
		if want := 1; m != stuck && written[m] != want {
			t.Errorf("member %d written %d times, want %d", m, written[m], want)
		}
	}
	if written[stuck] != 0 {
		t.Errorf("the stuck member was written %d times", written[stuck])
	}
}

// A batch stuck at the database holds up the items behind it only until it
// stalls: they go on in a batch beside it and are done while it still runs.
func TestStalledBatchHoldsUpNoOne(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	b := groupcommit.New(8, func(batch []int) {
		if slices.Contains(batch, 0) {
			close(started)
			<-release
		}
	})
	b.StallAfter(10 * time.Millisecond)
	stuck := make(chan struct{})
	go func() {
		defer close(stuck)
		b.Do(0)
	}()
	<-started
	b.Do(1) // returns only if its batch ran beside the stuck one
	select {
	case <-stuck:
		t.Fatal("the stuck batch ended before it was released")
	default:
	}
	close(release)
	<-stuck
}

// Stalled batches are bounded: however many items arrive while batches are
// stuck, at most MaxStalled run at once, and every item is done once, in
// one batch, when they end.
func TestStalledBatchesAreBounded(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var running, most int
	done := map[int]int{}
	b := groupcommit.New(1, func(batch []int) {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		<-release
		mu.Lock()
		running--
		for _, i := range batch {
			done[i]++
		}
		mu.Unlock()
	})
	b.StallAfter(time.Millisecond)
	const items = 3 * groupcommit.MaxStalled
	var wg sync.WaitGroup
	for i := range items {
		wg.Go(func() { b.Do(i) })
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := running
		mu.Unlock()
		if n == groupcommit.MaxStalled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d batches running, want %d stalled ones beside each other", n, groupcommit.MaxStalled)
		}
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	if most != groupcommit.MaxStalled {
		t.Errorf("at most %d batches ran at once, want %d", most, groupcommit.MaxStalled)
	}
	for i := range items {
		if done[i] != 1 {
			t.Errorf("item %d done %d times, want 1", i, done[i])
		}
	}
}
