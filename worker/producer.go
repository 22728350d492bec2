package worker

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hookd/hookd/internal/startstop"
	"github.com/hookd/hookd/internal/telemetry"
	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/queue"
)

// claimGrace is how long a claim may go on once its loop is told to stop.
// A claim cancelled while its statement runs may still commit on the
// server, and what it leased is then held by no one until the leases
// expire; a claim that ends within the grace is known, and what it leased
// is given back at once. A claim stuck on a frozen database is still cut
// short, one grace after the stop.
const claimGrace = time.Second

// ProducerConfig configures a loop that runs on the producer: the retry
// loop (NewRetrier) or the replay runner (NewReplayer). Zero fields get the
// defaults of the loop it configures.
type ProducerConfig struct {
	// Interval is how long an idle loop waits before it looks for work
	// again: the retry loop after a batch that was not full, the replay
	// runner for a running replay (one started on this replica wakes it at
	// once: Replayer.Wake). Default: DefaultRetryInterval,
	// DefaultReplayInterval.
	Interval time.Duration
	// BatchSize is how many jobs one claim takes, each with its lease. The
	// leases last until the batch's last job must have ended
	// (producer.leaseFor), or until the replica stops beating: a replica
	// that dies mid-batch leaves its jobs to the others seconds later.
	// Default: DefaultRetryBatch (at most MaxRetryBatch),
	// DefaultReplayBatch.
	BatchSize int
	// Concurrency is how many jobs run at once, of all the batches in
	// flight (the retry loop keeps two): the most the app gets together.
	// Default: DefaultRetryConcurrency, DefaultReplayConcurrency.
	Concurrency int
	// ProcessTimeout bounds one processor run. Default:
	// DefaultProcessTimeout.
	ProcessTimeout time.Duration
	// StopTimeout is how long, once Run's context is cancelled, the jobs
	// in flight may keep running before their processors are cancelled
	// too. The jobs cut short then, and those not started, are given back:
	// an event due again at once with its attempts unchanged, a replay's
	// member pending. Default: 10 s.
	StopTimeout time.Duration
	// Processor handles each job. Default: Discard.
	Processor Processor
	// Metrics, when set, times the processor runs and counts retries and
	// dead letters.
	Metrics *telemetry.Metrics
	// Control, when set, holds delivery: while a person paused it or the
	// circuit breaker is open no job starts, and one that failed because
	// the app is down is given back uncounted; while the breaker is open
	// the retry loop claims one event per probe.
	Control *Control
	// Pace, when set, bounds the deliveries to the app a second, shared
	// with the receiver and every other path that delivers: each job takes
	// its token, and a batch claims no more than the rate lets start within
	// one processor run.
	Pace *Pace
	// Heartbeat, when set, keeps the leases live while the replica beats,
	// and cancels every processor run when it cannot (worker.Heartbeat).
	Heartbeat *Heartbeat
	// Alone, when set, is shared by every path of the replica: no job
	// starts while a suspect runs alone (or waits to), and the loops claim
	// nothing meanwhile.
	Alone *Alone
	// Destination is the destination whose deliveries the retry loop
	// claims ("": queue.DefaultDestination): with several, each has a
	// retry loop of its own, with its own concurrency.
	Destination string
	// Suspects names the destinations whose suspects the retry loop runs
	// alone, as they are configured now (nil: Destination's); NoSuspects
	// leaves them to another loop of the replica, so that one loop holds
	// the replica's suspect slot, and SuspectsOnly makes a loop that runs
	// suspects and claims nothing else (RetryLoops).
	Suspects     func() []string
	NoSuspects   bool
	SuspectsOnly bool
	// Tracer, when set, makes each job a trace of its own, a CONSUMER span
	// (tracing.SpanProcess), linked to the span that queued the event
	// while it is queued; nil traces nothing.
	Tracer *tracing.Tracer
}

// replayDestination is the destination a replay's call goes to, for its
// span and metrics: the one app's, queue.DefaultDestination, or "" when
// Processor fans each event out to every destination that takes it.
func (cfg ProducerConfig) replayDestination() string {
	if _, fans := cfg.Processor.(*Fanout); fans {
		return ""
	}
	return cmp.Or(cfg.Destination, queue.DefaultDestination)
}

// withDefaults is cfg with its zero fields set: a loop's own interval,
// batch size and concurrency, and the defaults every loop shares.
func (cfg ProducerConfig) withDefaults(interval time.Duration, batchSize, concurrency int) ProducerConfig {
	cfg.Interval = cmp.Or(cfg.Interval, interval)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, batchSize)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, concurrency)
	cfg.ProcessTimeout = cmp.Or(cfg.ProcessTimeout, DefaultProcessTimeout)
	cfg.StopTimeout = cmp.Or(cfg.StopTimeout, 10*time.Second)
	cfg.Processor = cmp.Or[Processor](cfg.Processor, Discard)
	return cfg
}

// producer is the machine the retry loop and the replay runner both run
// on, as River's producer is for its queues: it claims a batch of jobs,
// each under its lease, runs them Concurrency at a time at the delivery
// rate while delivery is not held, each bounded by ProcessTimeout and by
// its batch's leases, and has each worker write the outcome of its last
// job together with the start of its next. A path keeps only what differs:
// what it claims, how it runs and writes one job (its jobs), and what
// it reports. Its loop runs on service (startstop.Service), within run.
type producer struct {
	cfg     ProducerConfig
	service *startstop.Service
	// batches is how many batches the path keeps in flight at once.
	batches int
	// slots holds a token for each job running, Concurrency in all,
	// whichever batch in flight it is of: Concurrency bounds what the app
	// gets at once, not what each batch sends it.
	slots chan struct{}
}

// newProducer is a producer for cfg, with defaults set, that keeps batches
// batches in flight.
func newProducer(cfg ProducerConfig, batches int) producer {
	return producer{cfg: cfg, batches: batches, slots: make(chan struct{}, cfg.Concurrency)}
}

// run calls loop with ctx, which stops new claims when cancelled, and
// workCtx, on which processing and the writes of outcomes run: it outlives
// ctx by stopTimeout, so a stop lets the jobs in flight end before their
// processors are cancelled too. It returns when loop does.
func (p *producer) run(ctx context.Context, loop func(ctx, workCtx context.Context)) {
	workCtx, cancelWork := startstop.Outlive(ctx, p.cfg.StopTimeout)
	defer cancelWork()
	loop(ctx, workCtx)
}

// claimSize is how many jobs a claim takes: batchSize, or under a Pace
// only as many as the rate lets start within one processor run, so that
// the last of them does not wait for its turn past its lease.
func (p *producer) claimSize() int {
	if rate := p.cfg.Pace.PerSecond(); rate > 0 {
		return min(p.cfg.BatchSize, max(1, int(rate*p.cfg.ProcessTimeout.Seconds())))
	}
	return p.cfg.BatchSize
}

// leaseFor is how long a claim leases its jobs for: the longest its last
// job can take to end. Concurrency workers take the batch's jobs in turn,
// each run bounded by processTimeout, so no worker starts more than
// claimSize/concurrency of them. Under a Pace the jobs also wait for their
// turns, at most one processor run in all since claimSize bounds the batch
// so (more when the receiver shares the rate: a job whose turn would come
// too late for its run to fit is given back), so the leases last one run
// longer. The batches in flight share the Concurrency slots, so a batch's
// jobs may also wait out the others' runs: the leases last that many times
// as long.
func (p *producer) leaseFor() time.Duration {
	rounds := (p.claimSize() + p.cfg.Concurrency - 1) / p.cfg.Concurrency
	if p.cfg.Pace != nil {
		rounds++
	}
	return time.Duration(p.batches*rounds) * p.cfg.ProcessTimeout
}

// aloneFor is how long a suspect's run alone is leased for: one processor
// run, and under a Pace one more for its turn, as leaseFor counts a
// batch's (takeTurn lets a job wait for its turn only while its run still
// fits in the lease after it).
func (p *producer) aloneFor() time.Duration {
	if p.cfg.Pace != nil {
		return 2 * p.cfg.ProcessTimeout
	}
	return p.cfg.ProcessTimeout
}

// takeTurn waits for a job's turn under the Pace, as long as the
// processor run still fits within the lease after it.
func (p *producer) takeTurn(ctx context.Context, deadline time.Time) (Turn, bool) {
	if p.cfg.Pace == nil {
		return Turn{}, true
	}
	waitCtx, cancel := context.WithDeadline(ctx, deadline.Add(-p.cfg.ProcessTimeout))
	defer cancel()
	turn, err := p.cfg.Pace.Wait(waitCtx)
	return turn, err == nil
}

// errTurnMissed cuts short a job that missed its turn under the Pace while
// its start was written, and found no other within its lease: it is given
// back uncounted, as a run the shutdown cut short is.
var errTurnMissed = errors.New("missed its turn under the delivery rate while its start was written")

// process runs the Processor on d within the lease's deadline.
func (p *producer) process(ctx context.Context, deadline time.Time, d Delivery) (Result, time.Duration) {
	runCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	return Process(runCtx, p.cfg.Processor, p.cfg.ProcessTimeout, d)
}

// jobs is what a path gives the producer's workers for one claimed batch,
// of jobs J (a pointer to the path's own record of a job).
type jobs[J comparable] interface {
	// prepare decides whether j runs now; the worker then waits for its
	// turn under the Pace (producer.takeTurn). When j does not run,
	// prepare leaves it as it is to be settled: given back, or with the
	// outcome it needs without a run. A job prepare never sees, because
	// shutdown came first, is settled as it was claimed: given back.
	prepare(ctx context.Context, j J) bool
	// begin starts j's run: the delivery to process, and the context to
	// process it in (ctx, or the run's span's).
	begin(ctx context.Context, j J) (context.Context, Delivery)
	// end leaves in j the outcome of its run, the processor's res.
	end(ctx context.Context, j J, res Result, took time.Duration)
	// write is a worker's turn at the database: it writes the outcome of
	// job done and the start of job next, either of which may be the zero
	// J (none), and reports whether next may run. When it may not (its
	// lease is gone, or the start could not be written), write leaves it
	// given back.
	write(done, next J) bool
	// settled reports job j once write has written its outcome.
	settled(ctx context.Context, j J)
}

// work runs a batch's jobs, whose leases last until deadline, with
// Concurrency workers, which take them in turn rather than a goroutine
// each: a worker's stack grows once to what an HTTP call needs, not once
// per job, which a profile of the drain showed costing 2% of the CPU.
// Each turn at the database writes the outcome of the worker's last job
// and starts its next, so a worker never starts a job while the outcome
// of its last is unwritten: a crash interrupts no job but the ones
// running, and an outcome never waits for a slower job of its batch. A job
// runs in one of the Concurrency slots the batches in flight share
// (jobWorker.takeSlot), held from before its start is written until its run
// ends, so a crash interrupts no more than Concurrency runs. Once ctx is
// cancelled no job starts.
//
// A job also enters the replica's Alone with its slot, so none starts
// while a suspect runs alone (workAlone runs that suspect).
func work[J comparable](ctx context.Context, p *producer, deadline time.Time, batch []J, js jobs[J]) {
	workWith(ctx, p, deadline, batch, js, false)
}

// workAlone is work for a suspect's run alone: it runs while the
// replica's Alone is closed, which it does not enter.
func workAlone[J comparable](ctx context.Context, p *producer, deadline time.Time, j J, js jobs[J]) {
	workWith(ctx, p, deadline, []J{j}, js, true)
}

func workWith[J comparable](ctx context.Context, p *producer, deadline time.Time, batch []J, js jobs[J], alone bool) {
	queued := make(chan J, len(batch))
	for _, j := range batch {
		queued <- j
	}
	close(queued)
	var workers sync.WaitGroup
	for range min(p.cfg.Concurrency, len(batch)) {
		w := &jobWorker[J]{p: p, js: js, deadline: deadline, alone: alone}
		workers.Go(func() { w.loop(ctx, queued) })
	}
	workers.Wait()
}

// jobWorker is one of work's workers: it takes the batch's jobs one at a
// time, and holds the last one it took until its outcome is written.
type jobWorker[J comparable] struct {
	p        *producer
	js       jobs[J]
	deadline time.Time
	// last is the job the worker took last, whose outcome is not written
	// yet; the zero J once it is.
	last J
	// alone: the worker runs a suspect alone, and enters no Alone.
	alone bool
	// turn is the turn under the Pace of the job start took last.
	turn Turn
}

// loop takes jobs until none is left, starting each one it may in the
// turn at the database that writes the outcome of the one before, and
// then writes the outcome of its last.
func (w *jobWorker[J]) loop(ctx context.Context, queued <-chan J) {
	for j := range queued {
		if w.start(ctx, j) {
			w.run(ctx, j)
		}
	}
	w.writeLast(ctx)
}

// start decides whether j runs, writes the last job's outcome with j's
// start, if any, in one turn at the database, and reports whether j runs.
// Either way j becomes the last job, whose outcome the next turn writes.
func (w *jobWorker[J]) start(ctx context.Context, j J) bool {
	var next J
	// A fenced replica starts nothing: its leases may soon be another's.
	// The jobs it does not start are given back at once, due again.
	if ctx.Err() == nil && !w.p.cfg.Heartbeat.Fenced() && w.takeSlot(ctx) {
		ok := w.js.prepare(ctx, j)
		if ok && w.p.cfg.Pace != nil {
			// Under a rate the last job's outcome is written first, alone:
			// its commit waits for the WAL's flush, which, between the
			// turn and the call, would make the call late (run). The
			// start written after the turn writes no WAL.
			w.writeLast(ctx)
			w.turn, ok = w.p.takeTurn(ctx, w.deadline)
		}
		if ok {
			next = j
		} else {
			w.freeSlot()
		}
	}
	var zero J
	started := false
	if w.last != zero || next != zero {
		started = w.js.write(w.last, next)
	}
	if next != zero && !started {
		w.freeSlot()
	}
	if w.last != zero {
		w.js.settled(ctx, w.last)
	}
	w.last = j
	return started
}

// run runs j, started, and frees its slot once it has ended.
//
// The run is bound to the replica's heartbeat: a replica that cannot beat
// cancels it. The path's end then sees its context cancelled under a
// failed run, as at shutdown, and gives the job back uncounted: a run the
// fence cut short is no attempt of the event's.
//
// Its start's write comes between its turn under the Pace and its call:
// when that write took long enough for the turn to pass (the database
// slow to answer), the call would go out beside the next turn's, so it
// waits for another one. A job that gets none within its lease is given
// back uncounted (errTurnMissed).
func (w *jobWorker[J]) run(ctx context.Context, j J) {
	ctx, unbind := w.p.cfg.Heartbeat.Bind(ctx)
	defer unbind()
	if w.turn.Missed() {
		turn, ok := w.p.takeTurn(ctx, w.deadline)
		if !ok {
			cut, cancel := context.WithCancelCause(ctx)
			cancel(errTurnMissed)
			runCtx, _ := w.js.begin(cut, j)
			w.js.end(runCtx, j, Result{Err: errTurnMissed}, 0)
			w.freeSlot()
			return
		}
		w.turn = turn
	}
	runCtx, d := w.js.begin(ctx, j)
	res, took := w.p.process(runCtx, w.deadline, d)
	w.js.end(runCtx, j, res, took)
	w.freeSlot()
}

// takeSlot waits for a job's slot (producer.slots) until ctx is done, and
// reports whether it has it. A worker that must wait writes the outcome of
// its last job first, alone: a run that ended never waits unwritten on
// another batch's runs.
//
// With the slot it enters the replica's Alone: while a suspect runs alone,
// or waits to, no slot is taken and the job is given back.
func (w *jobWorker[J]) takeSlot(ctx context.Context) bool {
	select {
	case w.p.slots <- struct{}{}:
		return w.enter()
	default:
	}
	w.writeLast(ctx)
	select {
	case w.p.slots <- struct{}{}:
		return w.enter()
	case <-ctx.Done():
		return false
	}
}

// enter enters the replica's Alone with the slot just taken, or gives
// the slot back.
func (w *jobWorker[J]) enter() bool {
	if w.alone || w.p.cfg.Alone.Enter() {
		return true
	}
	w.p.freeSlot()
	return false
}

// freeSlot gives back the slot of a job, and leaves the Alone it entered.
func (w *jobWorker[J]) freeSlot() {
	if !w.alone {
		w.p.cfg.Alone.Leave()
	}
	w.p.freeSlot()
}

// writeLast writes the outcome of the last job alone, if it has one
// unwritten.
func (w *jobWorker[J]) writeLast(ctx context.Context) {
	var zero J
	if w.last == zero {
		return
	}
	w.js.write(w.last, zero)
	w.js.settled(ctx, w.last)
	w.last = zero
}

// freeSlot gives back a job's slot (producer.slots).
func (p *producer) freeSlot() { <-p.slots }
