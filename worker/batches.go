package worker

import (
	"context"
	"sync"
	"time"

	"github.com/hookd/hookd/queue"
)

const (
	// batchesAtOnce is how many batches of deliveries are at the database at
	// once. While one is, the deliveries that arrive wait and go together in
	// the next: a transaction, its two round trips and its commit are shared
	// by every event in it, which is what lets the receiver keep up with a
	// burst on two cores. Measured with make bench-load, a second batch at
	// once halved the events per batch and cost more than it overlapped.
	batchesAtOnce = 1
	// maxBatch bounds the events of one batch: each holds a lock in the
	// server's shared lock table until the batch commits. A batch is also
	// no larger than the inline slots, so that a batch alone never runs
	// out of them: events are deferred because the app is slow, not because
	// they came together.
	maxBatch = 64
	// batchStepAside is how long a batch may wait for the app before it
	// stops counting as one of batchesAtOnce: the deliveries behind it then
	// start a batch of their own instead of waiting for a slow app. The
	// inline slots bound how many deliveries can wait for the app this way,
	// and so how many connections such batches hold.
	batchStepAside = 10 * time.Millisecond
)

// delivery is one verified event on its way through a batch, and its answer.
type delivery struct {
	ctx       context.Context
	ev        event
	payload   []byte
	sigHeader string
	path      queue.AttemptPath
	// deferred: no inline slot was free, so the event is queued unprocessed.
	deferred bool
	// release gives back the inline slot the delivery holds, if any: once
	// the app has answered, or with the answer.
	release func()

	outcome Outcome
	err     error
	done    chan struct{}
}

func (d *delivery) answer(o Outcome, err error) {
	d.releaseSlot()
	d.outcome, d.err = o, err
	close(d.done)
}

func (d *delivery) releaseSlot() {
	if d.release != nil {
		d.release()
		d.release = nil
	}
}

// deliveryBatches groups the deliveries that arrive while earlier batches
// are at the database (group commit). A delivery that finds fewer than
// batchesAtOnce batches running starts one itself, at once, in its own
// goroutine: a lone delivery waits for nobody. Otherwise it waits in pending,
// and the batch that ends or steps aside first takes every pending delivery
// (up to its size) into the next batch (see start). No goroutine outlives
// the deliveries it serves.
type deliveryBatches struct {
	// run handles one batch and answers every delivery in it. It calls
	// stepAside when the batch turns out slow, so that the next one can
	// start without it.
	run func(batch []*delivery, stepAside func())
	// size is the most deliveries a batch takes.
	size int
	// metrics counts the deliveries waiting in pending.
	metrics *Metrics

	mu      sync.Mutex
	pending []*delivery
	running int // batches at the database that have not stepped aside
}

// do runs d through a batch and returns once it is answered.
func (b *deliveryBatches) do(d *delivery) {
	d.done = make(chan struct{})
	b.mu.Lock()
	b.pending = append(b.pending, d)
	b.metrics.addWaiting(1)
	if b.running >= batchesAtOnce {
		b.mu.Unlock()
		<-d.done
		return
	}
	b.running++
	batch := b.takeLocked()
	b.mu.Unlock()
	// This goroutine answers its own request next, so the batches after
	// this one go on in a goroutine of their own.
	b.start(batch, false)
	<-d.done
}

// start runs batch, then hands its place on to the pending deliveries, or
// gives it back. With goOn, the next batch runs in this goroutine: under
// load one goroutine runs batch after batch, and the next starts without
// waiting to be scheduled.
func (b *deliveryBatches) start(batch []*delivery, goOn bool) {
	for batch != nil {
		var handedOn sync.Once
		stepAside := func() { handedOn.Do(func() { b.handOn(nil) }) }
		b.run(batch, stepAside)
		var next []*delivery
		handedOn.Do(func() {
			if goOn {
				b.handOn(&next)
			} else {
				b.handOn(nil)
			}
		})
		batch = next
	}
}

// handOn gives up a running batch's place: the pending deliveries take it
// as the next batch, or it is freed. The next batch is put in *next, for
// the caller to run, or with next nil started in a goroutine of its own.
func (b *deliveryBatches) handOn(next *[]*delivery) {
	b.mu.Lock()
	if len(b.pending) == 0 {
		b.running--
		b.mu.Unlock()
		return
	}
	batch := b.takeLocked()
	b.mu.Unlock()
	if next != nil {
		*next = batch
		return
	}
	go b.start(batch, true)
}

func (b *deliveryBatches) takeLocked() []*delivery {
	n := min(len(b.pending), b.size)
	b.metrics.addWaiting(-n)
	batch := b.pending[:n:n]
	b.pending = b.pending[n:]
	if len(b.pending) == 0 {
		b.pending = nil
	}
	return batch
}
