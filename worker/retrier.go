package worker

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookd/hookd/queue"
)

// RetrierConfig configures a Retrier. Zero fields get the defaults below.
type RetrierConfig struct {
	// Interval is how long the loop waits after a batch that was not full
	// before it looks for due events again. Default: DefaultRetryInterval.
	Interval time.Duration
	// BatchSize is how many due events one batch claims, locks and settles
	// together. Each held lock takes a slot in PostgreSQL's shared lock
	// table, so it is capped at MaxRetryBatch. Default: DefaultRetryBatch.
	BatchSize int
	// ClaimWindow is how far a claim defers its events: a replica that dies
	// mid-batch leaves them due again after this long. It must exceed
	// ProcessTimeout, or a slow event could be claimed a second time while it
	// runs (the lock would still keep the two runs apart). Default:
	// queue.DefaultClaimWindow (2 minutes).
	ClaimWindow time.Duration
	// Concurrency is how many processors of one batch run at once. Default:
	// DefaultRetryConcurrency.
	Concurrency int
	// ProcessTimeout bounds one processor run. Default:
	// DefaultProcessTimeout.
	ProcessTimeout time.Duration
	// StopTimeout is how long, once Run's context is cancelled, the events
	// in flight may keep running before their processors are cancelled too.
	// The events cut short then, and those not started, go back to the queue
	// due at once with their attempts unchanged. Default: 10 s.
	StopTimeout time.Duration
	// Processor handles each event. Default: Discard.
	Processor Processor
	// Metrics, when set, counts retries and dead letters.
	Metrics *Metrics
}

// The defaults of the settings a user can change (HOOKD_RETRY_INTERVAL,
// HOOKD_RETRY_BATCH, HOOKD_RETRY_CONCURRENCY): hookd's settings table shows
// these, so a zero field here and an unset variable mean the same.
const (
	// DefaultRetryInterval is how often an idle retry loop looks for due
	// events: a retry is at most this late, and an idle replica costs one
	// cheap query per interval.
	DefaultRetryInterval = 5 * time.Second
	// DefaultRetryBatch is where BenchmarkRetrierDrain stops improving: on
	// 2 cores, 500 and 1000 drained a 10,000-event backlog equally fast and
	// well ahead of 100 and 250, and 500 holds half the locks.
	DefaultRetryBatch = 500
	// MaxRetryBatch keeps one batch's advisory locks far below the 6,400
	// slots of PostgreSQL's default shared lock table, with room for a second
	// replica and the receivers.
	MaxRetryBatch = 1000
	// DefaultRetryConcurrency is enough parallel processors to keep a batch
	// of forwards to a slow downstream from running one at a time.
	DefaultRetryConcurrency = 32
)

// tickRecordEvery bounds how often the loop reports that it is alive, so a
// loop draining back-to-back batches does not write a status row per batch.
const tickRecordEvery = time.Second

// Retrier is the retry loop: it claims due events from the queue, processes
// each under its per-event lock, and resolves or reschedules them.
type Retrier struct {
	store   *queue.Store
	logger  *slog.Logger
	cfg     RetrierConfig
	proc    Processor
	metrics *Metrics

	lastTick atomic.Int64 // unix nanoseconds of the last RecordRetrierTick
}

// NewRetrier returns a Retrier over store.
func NewRetrier(store *queue.Store, logger *slog.Logger, cfg RetrierConfig) *Retrier {
	cfg.Interval = cmp.Or(cfg.Interval, DefaultRetryInterval)
	cfg.BatchSize = min(cmp.Or(cfg.BatchSize, DefaultRetryBatch), MaxRetryBatch)
	cfg.ClaimWindow = cmp.Or(cfg.ClaimWindow, queue.DefaultClaimWindow)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultRetryConcurrency)
	cfg.ProcessTimeout = cmp.Or(cfg.ProcessTimeout, DefaultProcessTimeout)
	cfg.StopTimeout = cmp.Or(cfg.StopTimeout, 10*time.Second)
	return &Retrier{
		store:   store,
		logger:  logger.With("component", "retrier"),
		cfg:     cfg,
		proc:    cmp.Or[Processor](cfg.Processor, Discard),
		metrics: cfg.Metrics,
	}
}

// Run retries due events until ctx is cancelled, then stops claiming, lets
// the batches in flight finish for up to StopTimeout, and returns nil. It
// runs batchLoops loops of batches; in each, batches follow each other at
// once while they come back full, and after a short one it waits Interval.
// A database error is logged and retried after Interval.
func (r *Retrier) Run(ctx context.Context) error {
	// Processing and the writes of outcomes run on workCtx, which outlives
	// ctx by StopTimeout: cancelling ctx only stops new claims.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(r.cfg.StopTimeout, cancelWork)
		context.AfterFunc(workCtx, func() { t.Stop() })
	})
	defer stop()

	r.logger.InfoContext(ctx, "retry loop started", "interval", r.cfg.Interval,
		"batch_size", r.cfg.BatchSize, "concurrency", r.cfg.Concurrency, "batch_loops", batchLoops)
	var wg sync.WaitGroup
	for range batchLoops {
		wg.Go(func() { r.loop(ctx, workCtx) })
	}
	wg.Wait()
	r.logger.Info("retry loop stopped")
	return nil
}

// batchLoops is how many batches are in flight at once. A batch spends its
// time in turns on the database (claim, lock, settle) and on the app
// (processing); with two, one batch's processing overlaps the next one's
// database work, so a backlog drains with neither side waiting on the other.
// The claim keeps the batches apart, as it does across replicas.
const batchLoops = 2

// loop claims and settles batches one after another until ctx is cancelled.
func (r *Retrier) loop(ctx, workCtx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if ctx.Err() != nil {
			continue
		}
		n, err := r.runBatch(ctx, workCtx)
		wait := r.cfg.Interval
		switch {
		case err != nil && ctx.Err() == nil:
			r.logger.ErrorContext(ctx, "retry batch failed", "err", err)
		case n == r.cfg.BatchSize:
			wait = 0
		}
		timer.Reset(wait)
	}
}

// RunBatch claims one batch of due events and processes it, as one turn of
// Run does, and returns how many events it claimed.
func (r *Retrier) RunBatch(ctx context.Context) (int, error) {
	return r.runBatch(ctx, ctx)
}

// runBatch claims with claimCtx and does everything after the claim with
// workCtx, so that a stop between the two never strands claimed work.
func (r *Retrier) runBatch(claimCtx, workCtx context.Context) (int, error) {
	r.recordTick(claimCtx)
	claimed, err := r.store.ClaimDue(claimCtx, r.cfg.BatchSize, r.cfg.ClaimWindow)
	if err != nil {
		if claimCtx.Err() != nil {
			return 0, nil
		}
		return 0, err
	}
	if len(claimed) == 0 {
		return 0, nil
	}
	return len(claimed), r.settle(workCtx, claimed)
}

func (r *Retrier) recordTick(ctx context.Context) {
	now, last := time.Now().UnixNano(), r.lastTick.Load()
	if now-last < int64(tickRecordEvery) || !r.lastTick.CompareAndSwap(last, now) {
		return
	}
	if err := r.store.RecordRetrierTick(ctx); err != nil && ctx.Err() == nil {
		r.logger.WarnContext(ctx, "cannot record retrier tick", "err", err)
	}
}

// settle locks the claimed events and reads their states in one round
// trip, processes the ones still to do concurrently, and writes all outcomes
// with the COMMIT of the locking transaction in one more: one statement for
// the successes, one for the failures. An event whose lock is held elsewhere
// is left claimed; it is due again after the claim window.
func (r *Retrier) settle(ctx context.Context, claimed []queue.Event) error {
	tx, states, err := r.store.LockClaims(ctx, claimed)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))

	var todo, done []queue.Settled
	for i, e := range claimed {
		switch states[i] {
		case queue.ClaimHeld:
			todo = append(todo, queue.Settled{Event: e})
		case queue.ClaimProcessed:
			done = append(done, queue.Settled{Event: e})
		}
	}

	r.processAll(ctx, todo)

	// An event left without an Attempt was not tried, or was cut short,
	// because shutdown cancelled ctx: it goes back to the queue uncounted.
	var attempted, failed []queue.Settled
	var released []queue.Event
	for _, s := range todo {
		switch {
		case s.Attempt == nil:
			released = append(released, s.Event)
			continue
		case s.Attempt.Succeeded:
			done = append(done, s)
		default:
			failed = append(failed, s)
		}
		attempted = append(attempted, s)
	}
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	statuses, err := tx.CommitSettled(writeCtx, done, failed, released)
	if err != nil {
		return err
	}
	if len(released) > 0 {
		r.logger.Info("shutdown cut retries short: released, due again, attempts not counted", "events", len(released))
	}
	r.report(ctx, attempted, failed, statuses)
	return nil
}

// processAll runs the processor on every event of todo, Concurrency at a
// time, and fills in each one's Attempt. Once ctx is cancelled no processor
// starts: it could only fail, and its failure would count against the event.
//
// Concurrency workers take the events in turn, rather than a goroutine per
// event: a worker's stack grows once to what an HTTP call needs, not once
// per event, which a profile of the drain showed costing 2% of the CPU.
func (r *Retrier) processAll(ctx context.Context, todo []queue.Settled) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(r.cfg.Concurrency, len(todo)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(len(todo)) {
					return
				}
				todo[i].Attempt = r.attempt(ctx, todo[i].Event)
			}
		})
	}
	wg.Wait()
}

// attempt runs the processor on e and returns the attempt to record, or nil
// when ctx was cancelled under a failing run: that run was cut short by
// shutdown and is no attempt.
func (r *Retrier) attempt(ctx context.Context, e queue.Event) *queue.NewAttempt {
	path := queue.PathRetry
	if e.ManualRetry {
		path = queue.PathManual
	}
	number := e.Attempts + 1
	res, took := process(ctx, r.proc, r.cfg.ProcessTimeout, Delivery{
		EventID: e.EventID, EventType: e.EventType, Payload: []byte(e.Payload), Attempt: number,
	})
	if res.Err != nil && ctx.Err() != nil {
		// Cut short by shutdown, not failed by the app: no attempt.
		return nil
	}
	r.metrics.observeProcess(path, res.Err == nil, took)
	a := &queue.NewAttempt{
		Source: e.Source, EventID: e.EventID, Duration: took, Succeeded: res.Err == nil,
		HTTPStatus: res.HTTPStatus, Path: path, Number: number,
	}
	if res.Err != nil {
		a.Error = errorText(res.Err)
	}
	return a
}

// report logs and counts the outcomes once they are committed.
func (r *Retrier) report(ctx context.Context, todo, failed []queue.Settled, statuses []queue.Status) {
	r.metrics.countRetries(len(todo)-len(failed), len(failed))
	for i, f := range failed {
		if statuses[i] == queue.StatusDead {
			r.metrics.countDead()
			r.logger.ErrorContext(ctx, "event is dead: no retries left", "event_id", f.Event.EventID,
				"event_type", f.Event.EventType, "attempt", f.Attempt.Number, "err", f.Attempt.Error)
			continue
		}
		r.logger.WarnContext(ctx, "retry failed", "event_id", f.Event.EventID,
			"event_type", f.Event.EventType, "attempt", f.Attempt.Number,
			"next_in", r.store.RetryDelay(f.Attempt.Number), "err", f.Attempt.Error)
	}
}
