// Package groupcommit gathers work that arrives while a batch of it is at
// the database into the next batch, so that one round trip and one commit
// serve every item that came meanwhile (group commit).
package groupcommit

// A lone item waits for nobody: it starts a batch of one at once. Under
// load, one goroutine runs batch after batch, each holding what arrived
// while the one before it ran. One batch of a Batcher runs at a time,
// unless it stalls: a batch still running after the Batcher's stall time
// (waiting on a lock, say) no longer holds up the items that arrive
// behind it, which go on in a batch beside it, up to maxStalled stalled
// batches. No goroutine outlives the items it serves.

import (
	"context"
	"sync"
	"time"
)

const (
	// DefaultStallAfter is how long a batch may hold up the next before
	// the next goes beside it: far longer than a batch takes on a loaded
	// machine (milliseconds), far shorter than a client waits.
	DefaultStallAfter = 100 * time.Millisecond
	// maxStalled bounds the stalled batches of a Batcher, each of which
	// holds a connection of the pool: past it, items wait for one of them
	// to end, as they would for a database that is stuck as a whole.
	maxStalled = 4
)

// Batcher runs items in batches. Its zero value is not usable: use New.
type Batcher[T any] struct {
	run        func([]T)
	size       int
	stallAfter time.Duration
	// waiting, when set, is told how many items wait for a batch, as a
	// change of that number.
	waiting func(delta int)

	mu      sync.Mutex
	pending []*entry[T]
	// running is how many batches run, and stalled how many of them have
	// run longer than stallAfter.
	running, stalled int
}

type entry[T any] struct {
	item T
	done chan struct{}
}

// New returns a Batcher whose batches hold at most size items and are run
// by run, which must have finished with every item when it returns, and
// stall after DefaultStallAfter.
func New[T any](size int, run func(batch []T)) *Batcher[T] {
	return &Batcher[T]{run: run, size: max(size, 1), stallAfter: DefaultStallAfter}
}

// StallAfter sets how long a batch may hold up the next one before the
// next one runs beside it.
func (b *Batcher[T]) StallAfter(d time.Duration) { b.stallAfter = d }

// OnWaiting sets a function told each change of the number of items
// waiting for a batch, e.g. to export it as a metric.
func (b *Batcher[T]) OnWaiting(f func(delta int)) { b.waiting = f }

// Do runs item in a batch and returns once that batch has been run.
func (b *Batcher[T]) Do(item T) {
	e := &entry[T]{item: item, done: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, e)
	b.addWaiting(1)
	batch := b.startLocked()
	b.mu.Unlock()
	if batch == nil {
		<-e.done
		return
	}
	// This goroutine answers its own item next, so the batches after this
	// one, if any arrived meanwhile, go on in a goroutine of their own.
	b.runBatch(batch)
	if next := b.next(); next != nil {
		go b.loop(next)
	}
	<-e.done
}

// startLocked takes the waiting items as a new batch when no batch runs
// that has not stalled, and a stalled one may be added.
func (b *Batcher[T]) startLocked() []*entry[T] {
	if len(b.pending) == 0 || b.running > b.stalled || b.stalled >= maxStalled {
		return nil
	}
	b.running++
	return b.takeLocked()
}

// loop runs batch, then every batch that arrives while it runs, until none
// is waiting.
func (b *Batcher[T]) loop(batch []*entry[T]) {
	for batch != nil {
		b.runBatch(batch)
		batch = b.next()
	}
}

// next takes the waiting items as the next batch of a goroutine whose batch
// just ended, or gives up its running place when none is waiting or
// another batch, which has not stalled, will take them.
func (b *Batcher[T]) next() []*entry[T] {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.running--
	return b.startLocked()
}

func (b *Batcher[T]) runBatch(batch []*entry[T]) {
	items := make([]T, len(batch))
	for i, e := range batch {
		items[i] = e.item
	}
	defer func() {
		for _, e := range batch {
			close(e.done)
		}
	}()
	var stalled, ended bool
	timer := time.AfterFunc(b.stallAfter, func() {
		b.mu.Lock()
		if ended {
			b.mu.Unlock()
			return
		}
		stalled = true
		b.stalled++
		next := b.startLocked()
		b.mu.Unlock()
		if next != nil {
			go b.loop(next)
		}
	})
	b.run(items)
	timer.Stop()
	b.mu.Lock()
	ended = true
	if stalled {
		b.stalled--
	}
	b.mu.Unlock()
}

func (b *Batcher[T]) takeLocked() []*entry[T] {
	n := min(len(b.pending), b.size)
	b.addWaiting(-n)
	batch := b.pending[:n:n]
	b.pending = b.pending[n:]
	if len(b.pending) == 0 {
		b.pending = nil
	}
	return batch
}

func (b *Batcher[T]) addWaiting(n int) {
	if b.waiting != nil {
		b.waiting(n)
	}
}

// aloneAtOnce bounds how many members of a failed group are written alone
// at the same time: each takes a connection of the pool.
const aloneAtOnce = 8

// EachAlone runs do for the whole group, and when that fails, for each of
// its members alone, so that one member's failing write never changes
// another's outcome: each member gets the error of its own write, fail. It is
// how a batch whose transaction failed is written again, one by one.
//
// Every call of do gets a context of its own that ends after timeout: a
// member whose write hangs (waiting on a lock, say) until the group's
// context ends leaves the others their own time to be written alone. The
// members are written up to aloneAtOnce at a time, so one that hangs holds
// up none of the others either.
func EachAlone[T any](group []T, timeout time.Duration, do func(context.Context, []T) error, fail func(T, error)) {
	try := func(members []T) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return do(ctx, members)
	}
	err := try(group)
	if err == nil {
		return
	}
	if len(group) == 1 {
		fail(group[0], err)
		return
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, aloneAtOnce)
	for _, m := range group {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := try([]T{m}); err != nil {
				fail(m, err)
			}
		})
	}
	wg.Wait()
}
