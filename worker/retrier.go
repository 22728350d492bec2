package worker

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/hookd/hookd/internal/startstop"
	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/queue"
)

// MaxProbeWait is how long the circuit breaker's probes come apart at most:
// the wait doubles after each probe from HOOKD_BREAKER_PROBE up to this.
const MaxProbeWait = 5 * time.Minute

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
	// MaxRetryBatch bounds how long a batch's leases last, and so how long
	// the events of a replica that died mid-batch wait to be taken over.
	MaxRetryBatch = 1000
	// DefaultRetryConcurrency is enough parallel processors to keep
	// forwards to a slow downstream from running one at a time, and the
	// two batches in flight busy while a backlog drains: 32 runs for each.
	DefaultRetryConcurrency = 64
)

// tickRecordEvery bounds how often the loop reports that it is alive, so a
// loop draining back-to-back batches does not write a status row per batch.
const tickRecordEvery = time.Second

// Retrier is the retry loop: it claims due events from the queue, each with
// its lease, processes them, and resolves or reschedules each as it ends.
type Retrier struct {
	producer
	store  *queue.Store
	logger *slog.Logger
	// steps writes the workers' turns at the database, those that reach it
	// at one moment in one short transaction.
	steps *stepWriter

	lastTick atomic.Int64 // unix nanoseconds of the last RecordRetrierTick
	// keylessNoneAt is when an ordered destination's claim last found no
	// due delivery without a key (unix nanoseconds; 0: it found some).
	keylessNoneAt atomic.Int64
	// replays, when set, runs the replays' suspects in this loop's turns
	// of the suspect slot (RunsReplaySuspects).
	replays *Replayer
	// window is how many deliveries a turn claims: fewer, an Interval
	// apart, while every retry fails.
	window *retryWindow
}

// NewRetrier returns a Retrier over store.
func NewRetrier(store *queue.Store, logger *slog.Logger, cfg ProducerConfig) *Retrier {
	cfg = cfg.withDefaults(DefaultRetryInterval, DefaultRetryBatch, DefaultRetryConcurrency)
	cfg.BatchSize = min(cfg.BatchSize, MaxRetryBatch)
	if cfg.Alone == nil {
		// Suspects run alone among the retry loop's runs, at least.
		cfg.Alone = NewAlone()
	}
	r := &Retrier{producer: newProducer(cfg, batchLoops), store: store, logger: logger.With("component", "retrier")}
	r.steps = newStepWriter(store, r.logger, cfg.Tracer, cfg.BatchSize)
	r.window = newRetryWindow(r.claimSize())
	r.service = startstop.New(func(ctx context.Context) { r.run(ctx, r.loops) })
	return r
}

// Run retries due events until ctx is cancelled, then stops claiming, lets
// the batches in flight finish for up to StopTimeout, and returns nil. It
// runs batchLoops loops of batches; in each, batches follow each other at
// once while they come back full, and after a short one it waits Interval.
// A database error is logged and retried after Interval.
func (r *Retrier) Run(ctx context.Context) error { return r.service.Run(ctx) }

// batchLoops is how many batches are in flight at once. A batch spends its
// time in turns on the database (claim, lock, settle) and on the app
// (processing); with two, one batch's processing overlaps the next one's
// database work, so a backlog drains with neither side waiting on the other.
// The claim keeps the batches apart, as it does across replicas.
const batchLoops = 2

// loops runs batchLoops loops of turns until ctx is cancelled and their
// batches have ended.
func (r *Retrier) loops(ctx, workCtx context.Context) {
	r.logger.InfoContext(ctx, "retry loop started", "interval", r.cfg.Interval,
		"batch_size", r.cfg.BatchSize, "concurrency", r.cfg.Concurrency, "batch_loops", batchLoops)
	var wg sync.WaitGroup
	for range batchLoops {
		if r.cfg.SuspectsOnly {
			break
		}
		wg.Go(func() {
			startstop.Loop(ctx, nil, func(ctx context.Context) time.Duration { return r.turn(ctx, workCtx) })
		})
	}
	if !r.cfg.NoSuspects {
		wg.Go(func() {
			startstop.Loop(ctx, nil, func(ctx context.Context) time.Duration { return r.suspectsTurn(ctx, workCtx) })
		})
	}
	wg.Wait()
	r.logger.Info("retry loop stopped")
}

// turn is one turn of a loop: a batch, or a probe while delivery is held.
// It returns how long to wait before the next: none after a full batch or
// one a person hastened, Interval after a short one.
func (r *Retrier) turn(ctx, workCtx context.Context) time.Duration {
	if st := r.cfg.Control.State(); st.Held() {
		// A held loop still says it is alive: it is waiting on purpose,
		// not stalled.
		r.recordTick(ctx)
		if r.probe(ctx, workCtx, st) != nil && ctx.Err() == nil {
			r.logger.ErrorContext(ctx, "probe of the app failed to run")
		}
		return ControlRefresh
	}
	if r.cfg.Heartbeat.Overdue() {
		// The replica's beats are late: it would soon cancel what it
		// claimed now, each run spending an attempt on nothing. It claims
		// again once a beat gets through.
		r.recordTick(ctx)
		return queue.BeatInterval
	}
	if r.cfg.Alone.Closed() {
		// A suspect runs alone on this replica: nothing else starts.
		r.recordTick(ctx)
		return ControlRefresh
	}
	if r.cfg.Destination != "" && r.cfg.Control.DestinationHeld(r.cfg.Destination) != "" {
		// Its destination is paused, or its breaker open: nothing of it is
		// claimed but a probe, and the other destinations' loops go on.
		r.recordTick(ctx)
		if r.probeDestination(ctx, workCtx) != nil && ctx.Err() == nil {
			r.logger.ErrorContext(ctx, "probe of the destination failed to run")
		}
		return ControlRefresh
	}
	size := r.window.claim()
	b, err := r.runBatch(ctx, workCtx, size, false)
	narrowed := r.narrowWindow(ctx, b)
	switch {
	case err != nil && ctx.Err() == nil:
		r.logger.ErrorContext(ctx, "retry batch failed", "err", err)
	case b.hastened:
		return 0
	case narrowed:
		return r.cfg.Interval
	case b.claimed == size:
		return 0
	case b.claimed > 0 && r.ordered():
		// A short batch of an ordered destination says only that its
		// other keys' heads were in flight, in the other loop's batch:
		// each that succeeded has made its key's next delivery its head.
		return 0
	}
	return r.cfg.Interval
}

// narrowWindow sets the window from the attempts of a turn's batch, logs
// when a run of failures begins and ends, and reports whether every
// attempt failed: the loop then waits an Interval before its next turn.
func (r *Retrier) narrowWindow(ctx context.Context, b batchOutcome) bool {
	change := r.window.after(b.succeeded, b.failed)
	switch change {
	case windowClosing:
		r.logger.WarnContext(ctx, "every retry of a batch failed: retrying fewer at a time, an interval apart, until one succeeds",
			"failed", b.failed, "claim", r.window.claim(), "interval", r.cfg.Interval)
	case windowReopened:
		r.logger.InfoContext(ctx, "a retry succeeded: retrying whole batches again", "claim", r.window.claim())
	case windowKept:
		return false
	}
	// The destination's row says so, each narrowed turn (an interval
	// apart): the dashboard shows it, and its due deliveries count as
	// waiting their turn, not stuck.
	narrowed := change != windowReopened
	if err := r.store.MarkRetriesNarrowed(ctx, r.cfg.Destination, narrowed); err != nil && ctx.Err() == nil {
		r.logger.WarnContext(ctx, "cannot record the retry window on the destination", "err", err)
	}
	return narrowed
}

// RunBatch claims one batch of due events and processes it, as one turn of
// Run does, and returns how many events it claimed.
func (r *Retrier) RunBatch(ctx context.Context) (int, error) {
	b, err := r.runBatch(ctx, ctx, r.claimSize(), false)
	return b.claimed, err
}

// probe runs one event, claimed as an ordinary attempt, when the circuit
// breaker is open, nobody paused delivery, and this replica wins the turn
// of a due probe. Its success closes the breaker (in the statement that
// settles it); its app-down failure is given back uncounted, since it says
// nothing about the event.
func (r *Retrier) probe(ctx, workCtx context.Context, st queue.DeliveryControl) error {
	if st.Paused() || st.ProbeDueAt == nil || time.Now().Before(*st.ProbeDueAt) {
		return nil
	}
	won, err := r.store.TakeProbe(ctx, MaxProbeWait)
	if err != nil || !won {
		return err
	}
	b, err := r.runBatch(ctx, workCtx, 1, true)
	if err == nil {
		r.logger.InfoContext(ctx, "circuit breaker open: probed the app", "events", b.claimed)
	}
	return err
}

// runBatch claims unless claimCtx is done (the claim itself may outlive
// it by claimGrace), and does everything after the claim with workCtx, so
// that a stop between the two never strands claimed work. It
// returns how many events it claimed, and whether a person asked for an
// event of the batch to be tried again while it ran, so that it is due now.
//
// A probe's batch is the one event that tests whether the app is back while
// the breaker holds everything else.
// probeDestination runs, when its destination's breaker is open (not
// paused) and its probe is due, one claim of a single delivery as the
// probe, which this replica alone wins.
func (r *Retrier) probeDestination(ctx, workCtx context.Context) error {
	d := r.cfg.Control.DestinationState(r.cfg.Destination)
	if d.Paused() || !d.BreakerOpen() || d.ProbeDueAt == nil || time.Now().Before(*d.ProbeDueAt) {
		return nil
	}
	won, err := r.store.TakeDestinationProbe(ctx, r.cfg.Destination, MaxProbeWait)
	if err != nil || !won {
		return err
	}
	b, err := r.runBatch(ctx, workCtx, 1, true)
	if err == nil {
		r.logger.InfoContext(ctx, "circuit breaker open: probed the destination", "events", b.claimed)
	}
	return err
}

func (r *Retrier) runBatch(claimCtx, workCtx context.Context, n int, probe bool) (batchOutcome, error) {
	r.recordTick(claimCtx)
	if claimCtx.Err() != nil {
		return batchOutcome{}, nil
	}
	claiming, claimed := startstop.Outlive(claimCtx, claimGrace)
	claim, err := r.claim(claiming, n)
	claimed()
	if err != nil {
		if claimCtx.Err() != nil {
			return batchOutcome{}, nil
		}
		return batchOutcome{}, err
	}
	if len(claim.Claimed) == 0 {
		return batchOutcome{}, nil
	}
	b := &retryBatch{r: r, ctx: workCtx, probe: probe}
	var todo, done []*settling
	for _, c := range claim.Claimed {
		switch {
		case c.Dead:
			r.cfg.Metrics.CountDead()
			r.logger.ErrorContext(workCtx, "event is dead: its last attempt was interrupted", "event_id", c.Event.EventID,
				"event_type", c.Event.EventType, "attempt", c.Event.Attempts)
		case c.Processed:
			done = append(done, &settling{s: queue.Settled{Claimed: c, Kind: queue.SettleDone}})
		default:
			todo = append(todo, &settling{s: queue.Settled{Claimed: c, Kind: queue.SettleReleased}})
		}
	}
	r.steps.settle(done)
	work(workCtx, &r.producer, claim.Deadline, todo, b)
	return batchOutcome{claimed: len(claim.Claimed), hastened: b.hastened.Load(),
		succeeded: int(b.succeeded.Load()), failed: int(b.failed.Load())}, nil
}

// batchOutcome is what a batch of the retry loop came to.
type batchOutcome struct {
	// claimed is how many deliveries the batch claimed.
	claimed int
	// hastened: a person asked for a retry of a failed delivery of the
	// batch while it ran, so it is due now.
	hastened bool
	// succeeded and failed count the batch's attempts, as written.
	succeeded, failed int
}

// claim claims up to n of the destination's deliveries: by key, one
// at a time each, when the destination is ordered.
func (r *Retrier) claim(ctx context.Context, n int) (queue.Attempts, error) {
	if !r.ordered() {
		return r.store.ClaimDeliveries(ctx, r.cfg.Destination, n, r.leaseFor())
	}
	// Deliveries without a key are looked for again an interval after a
	// look found none, as an idle loop would: looking reads every due
	// delivery of the destination, each claim of a keyed backlog.
	if time.Since(time.Unix(0, r.keylessNoneAt.Load())) < r.cfg.Interval {
		return r.store.ClaimOrderedHeads(ctx, r.cfg.Destination, n, r.leaseFor())
	}
	a, err := r.store.ClaimOrderedDeliveries(ctx, r.cfg.Destination, n, r.leaseFor())
	if err == nil {
		var none int64
		if !slices.ContainsFunc(a.Claimed, func(c queue.Claimed) bool { return c.Event.OrderKey == nil }) {
			none = time.Now().UnixNano()
		}
		r.keylessNoneAt.Store(none)
	}
	return a, err
}

// ordered reports whether the loop's destination is ordered (order_by):
// its claims take each key's head alone.
func (r *Retrier) ordered() bool {
	f, ok := r.cfg.Processor.(*Fanout)
	return ok && f.Ordered(r.cfg.Destination)
}

func (r *Retrier) recordTick(ctx context.Context) {
	now, last := time.Now().UnixNano(), r.lastTick.Load()
	if now-last < int64(tickRecordEvery) || !r.lastTick.CompareAndSwap(last, now) {
		return
	}
	// A stop that comes while the tick is written does not cut it short:
	// the other loop, which saw this one's tick taken, skipped its own, so
	// a lost write would leave the turn unrecorded.
	tickCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queue.BeatInterval)
	defer cancel()
	if err := r.store.RecordRetrierTick(tickCtx); err != nil {
		r.logger.WarnContext(ctx, "cannot record retrier tick", "err", err)
	}
}

// retryBatch runs a claimed batch's events on the producer's workers
// (work): each worker's turn at the database writes the outcome of its
// last event and starts its next, with the other workers that reach the
// database at that moment (stepWriter).
//
// While delivery is held, an event not yet started is given back
// uncounted, and so is one whose attempt failed because the app is down:
// attempts are not spent against an app that is not there.
type retryBatch struct {
	r   *Retrier
	ctx context.Context
	// probe: the batch is the one event that tests whether the app is
	// back while the breaker holds everything else.
	probe bool
	// hastened: a person asked for a retry of a failed event of the batch
	// while it ran, so it is due now.
	hastened atomic.Bool
	// succeeded and failed count the batch's attempts as they are written.
	succeeded, failed atomic.Int32
}

func (b *retryBatch) prepare(context.Context, *settling) bool {
	cfg := b.r.cfg
	return b.probe || !cfg.Control.Held() && (cfg.Destination == "" || cfg.Control.DestinationHeld(cfg.Destination) == "")
}

// begin starts the attempt of a claimed event: its span, when traced, and
// the delivery the processor gets.
func (b *retryBatch) begin(ctx context.Context, t *settling) (context.Context, Delivery) {
	r, e := b.r, t.s.Claimed.Event
	if r.cfg.Tracer != nil {
		t.ctx, t.span = r.cfg.Tracer.StartProcess(ctx, cmp.Or(e.Destination, queue.DefaultDestination), e.EventID,
			deref(e.TraceParent), e.CreatedAt,
			tracing.Event(e.EventID, e.EventType, e.Endpoint, e.Attempts, string(t.s.Claimed.Path))...)
		ctx = t.ctx
	}
	return ctx, Delivery{
		EventID: e.EventID, EventType: e.EventType, Payload: []byte(e.Payload), Attempt: e.Attempts,
		Endpoint: e.Endpoint, Livemode: e.Livemode, Account: deref(e.Account), Destination: e.Destination,
	}
}

// end sets what to settle an attempt as, from the processor's res: done,
// failed with its attempt, or released when ctx was cancelled under a
// failing run, which was then cut short by shutdown or the fence (which
// is counted: queue.Settled.Fenced) and is no attempt, or when it failed
// because the app is down while delivery is held or in a probe.
func (b *retryBatch) end(ctx context.Context, t *settling, res Result, took time.Duration) {
	r, s := b.r, &t.s
	e := s.Claimed.Event
	path := s.Claimed.Path
	if res.Err != nil && ctx.Err() != nil {
		s.Kind, s.Fenced = queue.SettleReleased, errors.Is(context.Cause(ctx), errFenced)
		return
	}
	r.cfg.Metrics.ObserveDelivery(e.Destination, path, res.Err == nil, took)
	a := &queue.NewAttempt{
		Source: e.Source, EventID: e.EventID, Destination: e.Destination, Duration: took, Succeeded: res.Err == nil,
		HTTPStatus: res.HTTPStatus, Path: path, Number: e.Attempts, AppDown: IsAppDown(res.Err),
		TraceID: tracing.TraceID(ctx),
	}
	s.Kind, s.Attempt = queue.SettleDone, a
	if res.Err != nil {
		a.Error = ErrorText(res.Err)
		s.Kind = queue.SettleFailed
		tracing.FailApp(trace.SpanFromContext(ctx), res.HTTPStatus, FailureClass(res))
		if a.AppDown && (b.probe || r.cfg.Control.Held() ||
			r.cfg.Destination != "" && r.cfg.Control.DestinationHeld(r.cfg.Destination) != "") {
			s.Kind, s.Attempt = queue.SettleReleased, nil
		}
	}
}

func (b *retryBatch) write(done, next *settling) bool {
	if done != nil {
		done.cut = done.s.Kind == queue.SettleReleased && b.ctx.Err() != nil
	}
	if done == nil && next != nil && b.r.cfg.Pace != nil {
		// The start of a call whose turn under the rate is taken goes on
		// its own, not behind the other workers' outcomes.
		return b.r.steps.startAlone(next)
	}
	return b.r.steps.write(&step{settle: done, start: next})
}

func (b *retryBatch) settled(ctx context.Context, t *settling) {
	if t.err == nil && t.state.Written {
		b.r.report(t.context(ctx), t)
		if t.state.Hastened {
			b.hastened.Store(true)
		}
		switch {
		case t.s.Kind == queue.SettleDone && t.s.Attempt != nil:
			b.succeeded.Add(1)
		case t.s.Kind == queue.SettleFailed:
			b.failed.Add(1)
		}
	}
}

// report logs and counts an outcome once it is committed.
func (r *Retrier) report(ctx context.Context, t *settling) {
	s := t.s
	switch s.Kind {
	case queue.SettleDone:
		if s.Attempt != nil {
			r.cfg.Metrics.CountRetries(1, 0)
		}
	case queue.SettleFailed:
		r.cfg.Metrics.CountRetries(0, 1)
		e := s.Claimed.Event
		switch {
		case t.state.Hastened:
			r.logger.WarnContext(ctx, "retry failed; a person asked for another, due now", "event_id", e.EventID,
				"event_type", e.EventType, "attempt", s.Attempt.Number, "err", s.Attempt.Error)
		case t.state.Status == queue.StatusDead:
			r.cfg.Metrics.CountDead()
			r.logger.ErrorContext(ctx, "event is dead: no retries left", "event_id", e.EventID,
				"event_type", e.EventType, "attempt", s.Attempt.Number, "err", s.Attempt.Error)
		default:
			r.logger.WarnContext(ctx, "retry failed", "event_id", e.EventID,
				"event_type", e.EventType, "attempt", s.Attempt.Number,
				"next_in", r.store.RetryDelay(s.Attempt.Number), "err", s.Attempt.Error)
		}
	}
}

// RetrierStalledAfter is how long the retry loop may go without looking for
// due events before it counts as stalled, for a loop that polls every
// interval when idle: several missed polls, not one, since a poll can wait
// behind a long batch, and never under 30 seconds.
func RetrierStalledAfter(interval time.Duration) time.Duration {
	return max(30*time.Second, 3*cmp.Or(interval, DefaultRetryInterval))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
