package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookd/hookd/internal/groupcommit"
	"github.com/hookd/hookd/internal/startstop"
	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/queue"
)

const (
	// DefaultReplayInterval is how often an idle replica looks for a
	// replay another one started, and how often a running one rereads
	// whether its replay was cancelled: well within a second.
	DefaultReplayInterval = time.Second
	// DefaultReplayBatch keeps a batch's leases short: a replica that dies
	// mid-batch leaves its members to the others when they expire.
	DefaultReplayBatch = 32
	// DefaultReplayConcurrency is a replay's deliveries at once: enough for
	// a slow app, few enough that a replay never crowds out Stripe's live
	// deliveries, and the delivery rate bounds it anyway.
	DefaultReplayConcurrency = 8
)

// cancelCheck is how often a batch rereads whether its replay is still
// running, so that a cancel on any replica stops it within a second.
const cancelCheck = 250 * time.Millisecond

// Replayer runs the replays (queue.StartReplay) in the background of
// hookd serve: it leases a batch of a running replay's members at a time,
// delivers each through the processor under its lease at the delivery
// rate, with the replay's name in Delivery.Replay, and writes each one's
// outcome with its lease's release. Replicas share a replay: the claim
// skips the members another holds.
type Replayer struct {
	producer
	store  *queue.Store
	logger *slog.Logger
	wake   startstop.Wake
	// running is the batch running now: its replay and whether that was
	// cancelled, which Cancelled sets at once.
	running atomic.Pointer[runningBatch]
	settles *groupcommit.Batcher[*replaying]
}

// NewReplayer returns a Replayer over store.
func NewReplayer(store *queue.Store, logger *slog.Logger, cfg ProducerConfig) *Replayer {
	cfg = cfg.withDefaults(DefaultReplayInterval, DefaultReplayBatch, DefaultReplayConcurrency)
	r := &Replayer{producer: newProducer(cfg, 1), store: store, logger: logger.With("component", "replayer"),
		wake: startstop.NewWake()}
	r.settles = groupcommit.New(cfg.BatchSize, r.settle)
	r.service = startstop.New(func(ctx context.Context) { r.run(ctx, r.loop) })
	return r
}

// runningBatch is a batch of a replay's members being delivered.
type runningBatch struct {
	replay    int64
	cancelled atomic.Bool
}

// Wake makes Run look for running replays now: after a start on this
// replica.
func (r *Replayer) Wake() {
	if r == nil {
		return
	}
	r.wake.Signal()
}

// Cancelled tells this replica's runner that replay id was cancelled: a
// batch of it running here starts no delivery from now on. The other
// replicas' runners find out within cancelCheck.
func (r *Replayer) Cancelled(id int64) {
	if r == nil {
		return
	}
	if b := r.running.Load(); b != nil && b.replay == id {
		b.cancelled.Store(true)
	}
}

// Run runs the running replays, oldest first, until ctx is cancelled; then
// it lets the deliveries in flight finish for up to StopTimeout, gives the
// rest back, and returns nil. A database error is logged and retried after
// Interval.
func (r *Replayer) Run(ctx context.Context) error { return r.service.Run(ctx) }

// loop runs batch after batch of the running replays until ctx is
// cancelled: at once after one that worked, after Interval when there was
// nothing to do, and after ControlRefresh while delivery is held.
func (r *Replayer) loop(ctx, workCtx context.Context) {
	startstop.Loop(ctx, r.wake, func(ctx context.Context) time.Duration {
		wait := r.cfg.Interval
		switch worked, err := r.runOnce(ctx, workCtx); {
		case err != nil && ctx.Err() == nil:
			r.logger.ErrorContext(ctx, "replay batch failed", "err", err)
		case worked:
			wait = 0
		}
		if r.cfg.Control.Held() {
			wait = ControlRefresh
		}
		return wait
	})
}

// runOnce runs one batch of the oldest running replay that has members
// this replica can lease now, and reports whether it ran any.
func (r *Replayer) runOnce(ctx, workCtx context.Context) (bool, error) {
	if r.cfg.Control.Held() || r.cfg.Heartbeat.Overdue() || r.cfg.Alone.Closed() {
		// Held, or the replica's beats are late and it would soon cancel
		// what it claimed now (Retrier.turn), or a suspect runs alone here.
		return false, nil
	}
	runs, err := r.store.RunningReplays(ctx)
	if err != nil {
		return false, err
	}
	for _, run := range runs {
		n, err := r.runBatch(ctx, workCtx, run)
		if err != nil || n > 0 {
			return n > 0, err
		}
	}
	return false, nil
}

// replaying is a leased member on its way to SettleReplayed.
type replaying struct {
	replay  int64
	owner   uuid.UUID
	member  queue.ReplayMember
	s       queue.ReplaySettled
	written bool
	err     error
	// delivery is the delivery's span and ctx its context, when traced;
	// span is the span of the outcome's write, whose first of a group is
	// the parent of the group's statements.
	ctx      context.Context
	delivery trace.Span
	span     trace.Span
}

// runBatch claims a batch of run's members unless claimCtx is done (the
// claim itself may outlive it by claimGrace), runs them while it is not,
// and does the rest with workCtx; it returns how many it claimed.
func (r *Replayer) runBatch(claimCtx, workCtx context.Context, run queue.RunningReplay) (int, error) {
	if claimCtx.Err() != nil {
		return 0, nil
	}
	claiming, claimed := startstop.Outlive(claimCtx, claimGrace)
	claim, err := r.store.ClaimReplayed(claiming, run.ID, r.claimSize(), r.leaseFor())
	claimed()
	if err != nil {
		if claimCtx.Err() != nil {
			return 0, nil
		}
		return 0, err
	}
	if len(claim.Members) == 0 {
		return 0, nil
	}
	// The replay's state is reread while the batch runs: a cancel on any
	// replica stops it between deliveries.
	batch := &runningBatch{replay: run.ID}
	r.running.Store(batch)
	defer r.running.Store(nil)
	cancelled := &batch.cancelled
	watch := r.watchCancel(run.ID, cancelled)
	watch.Start(workCtx)
	defer watch.Stop()

	b := &replayBatch{r: r, replay: run, ctx: workCtx, claimCtx: claimCtx, cancelled: cancelled}
	todo := make([]*replaying, len(claim.Members))
	for i, m := range claim.Members {
		todo[i] = &replaying{replay: run.ID, owner: claim.Owner, member: m,
			s: queue.ReplaySettled{EventID: m.EventID, Payload: m.Payload, Kind: queue.ReplaySettleReleased}}
	}
	work(workCtx, &r.producer, claim.Deadline, todo, b)
	b.settles.Wait()
	if cancelled.Load() {
		r.logger.InfoContext(workCtx, "replay cancelled: stopped between deliveries", "replay", run.ID, "name", run.Name)
	}
	r.logger.DebugContext(workCtx, "replay batch", "replay", run.ID, "delivered", b.delivered.Load(), "failed", b.failed.Load())
	return len(claim.Members), nil
}

// runSuspect claims the oldest replay's member that is a suspect and can
// run now, and runs it alone as its replay's delivery, while the suspect
// runner (Retrier.runSuspects) holds the suspect slot and the replica's
// Alone is closed; it reports whether there was one. A member that crashed
// hookd MaxAttempts times running alone is not run again: it is settled
// failed, with the crash as its error, and stays a suspect.
func (r *Replayer) runSuspect(ctx, workCtx context.Context) (bool, error) {
	c, ok, err := r.store.ClaimReplaySuspect(ctx, r.aloneFor())
	if err != nil || !ok {
		return false, err
	}
	m := c.Member
	t := &replaying{replay: c.Replay.ID, owner: c.Owner, member: m,
		s: queue.ReplaySettled{EventID: m.EventID, Payload: m.Payload, Kind: queue.ReplaySettleReleased}}
	if c.GivenUp {
		t.s.Kind, t.s.Error = queue.ReplaySettleCrashed, c.Error
		r.settles.Do(t)
		r.logger.ErrorContext(workCtx, "replay gave up an event: it crashed hookd each time it ran alone", "replay", c.Replay.ID,
			"name", c.Replay.Name, "event_id", m.EventID, "event_type", m.EventType, "err", c.Error)
		return true, t.err
	}
	r.logger.InfoContext(workCtx, "a suspect runs alone: a crash cut its replay's delivery short", "replay", c.Replay.ID,
		"name", c.Replay.Name, "event_id", m.EventID, "event_type", m.EventType)
	b := &replayBatch{r: r, replay: c.Replay, ctx: workCtx, claimCtx: ctx, cancelled: &atomic.Bool{}}
	workAlone(workCtx, &r.producer, c.Deadline, t, b)
	b.settles.Wait()
	return true, nil
}

// watchCancel sets cancelled once replay id is no longer running,
// rereading it every cancelCheck until it is stopped.
func (r *Replayer) watchCancel(id int64, cancelled *atomic.Bool) *startstop.Service {
	return startstop.New(func(ctx context.Context) {
		startstop.Every(ctx, cancelCheck, func(ctx context.Context) {
			if cancelled.Load() {
				return
			}
			if running, err := r.store.ReplayRunning(ctx, id); err == nil && !running {
				cancelled.Store(true)
			}
		})
	})
}

// replayBatch runs a claimed batch of a replay's members on the
// producer's workers (work). A replay's leases are taken with
// their runs started, so a worker has no start to write, and the outcome
// of its last member is written behind it (settles), gathered with the
// others': its next delivery goes at its turn of the rate, not after a
// commit.
type replayBatch struct {
	r      *Replayer
	replay queue.RunningReplay
	// ctx is the batch's work context, which the starts are written in.
	ctx       context.Context
	claimCtx  context.Context
	cancelled *atomic.Bool

	delivered, failed atomic.Int64
	settles           sync.WaitGroup
}

func (b *replayBatch) prepare(_ context.Context, t *replaying) bool {
	if m := t.member; m.Payload == nil || (m.Dead && !b.replay.Dead) {
		t.s.Kind = queue.ReplaySettleSkipped
		return false
	}
	return b.claimCtx.Err() == nil && !b.cancelled.Load() && !b.r.cfg.Control.Held()
}

func (b *replayBatch) begin(ctx context.Context, t *replaying) (context.Context, Delivery) {
	m := t.member
	t.ctx, t.delivery = b.r.startSpan(ctx, b.replay, m)
	return t.ctx, Delivery{
		EventID: m.EventID, EventType: m.EventType, Payload: m.Payload, Attempt: m.Attempts,
		Endpoint: m.Endpoint, Livemode: m.Livemode, Account: deref(m.Account), Replay: b.replay.Name,
		Destination: b.replay.Destination,
	}
}

func (b *replayBatch) end(ctx context.Context, t *replaying, res Result, took time.Duration) {
	b.r.outcome(ctx, t.member, b.replay.Destination, &t.s, res, took)
	switch t.s.Kind {
	case queue.ReplaySettleDelivered:
		b.delivered.Add(1)
	case queue.ReplaySettleFailed:
		b.failed.Add(1)
	}
}

func (b *replayBatch) write(done, next *replaying) bool {
	if done != nil {
		if done.delivery != nil {
			b.settles.Go(func() { b.r.settleTraced(done) })
		} else {
			b.settles.Go(func() { b.r.settles.Do(done) })
		}
	}
	if next == nil {
		return false
	}
	// The member's lease is marked started as its own run starts, not at
	// the claim: a crash then leaves as interrupted only the members that
	// were running. One whose lease is gone, or whose mark fails, is given
	// back (its Kind is still released) and runs in a later claim.
	started, err := b.r.store.StartReplayed(b.ctx, next.owner, next.member.EventID)
	if err != nil && b.ctx.Err() == nil {
		b.r.logger.WarnContext(b.ctx, "cannot mark a replay's member started: given back to the replay", "replay", next.replay,
			"event_id", next.member.EventID, "err", err)
	}
	return started
}

// settled has nothing to report: the replay's page counts its members.
func (b *replayBatch) settled(context.Context, *replaying) {}

// outcome sets what to settle a member as, from the processor's res:
// delivered, failed with its attempt, or released when shutdown or the
// fence (which is counted: queue.ReplaySettled.Fenced) cut it short or it
// failed because the app is down while delivery is held (the member is
// tried again once delivery resumes).
func (r *Replayer) outcome(ctx context.Context, m queue.ReplayMember, destination string, s *queue.ReplaySettled,
	res Result, took time.Duration) {
	traceFailure(ctx, res)
	if res.Err != nil && ctx.Err() != nil {
		s.Kind, s.Fenced = queue.ReplaySettleReleased, errors.Is(context.Cause(ctx), errFenced)
		return
	}
	if errors.Is(res.Err, ErrTurnWait) {
		// Not called: its key's earlier delivery goes first.
		s.Kind = queue.ReplaySettleReleased
		return
	}
	if dest := r.cfg.replayDestination(); dest != "" {
		r.cfg.Metrics.ObserveDelivery(dest, queue.PathReplay, res.Err == nil, took)
	} else {
		// Fanned out: each destination's call is inside the one run.
		r.cfg.Metrics.ObserveProcess(queue.PathReplay, res.Err == nil, took)
	}
	a := &queue.NewAttempt{
		Source: queue.SourceStripe, EventID: m.EventID, Duration: took, Succeeded: res.Err == nil,
		HTTPStatus: res.HTTPStatus, Path: queue.PathReplay, Number: m.Attempts, AppDown: IsAppDown(res.Err),
		TraceID: tracing.TraceID(ctx), Destination: destination,
	}
	s.Kind, s.Attempt = queue.ReplaySettleDelivered, a
	if res.Err != nil {
		a.Error = ErrorText(res.Err)
		s.Kind = queue.ReplaySettleFailed
		if a.AppDown && r.cfg.Control.Held() {
			s.Kind, s.Attempt = queue.ReplaySettleReleased, nil
		}
	}
}

// settle writes the outcomes of leased members that reach it at one moment
// in one statement per replay and lease owner, or each alone when that
// fails. As the retry loop's, the writes outlive shutdown's cancellation
// within queue.LeaseMargin, each statement on its own: a member whose
// outcome is not written is delivered again once its lease expires, so a
// slow first statement on a loaded machine must not leave the others
// without time.
func (r *Replayer) settle(batch []*replaying) {
	type key struct {
		replay int64
		owner  uuid.UUID
	}
	groups := map[key][]*replaying{}
	var order []key
	for _, t := range batch {
		k := key{t.replay, t.owner}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], t)
	}
	for _, k := range order {
		groupcommit.EachAlone(groups[k], queue.LeaseMargin, func(ctx context.Context, group []*replaying) error {
			if s := group[0].span; s != nil {
				ctx = trace.ContextWithSpan(ctx, s)
			}
			settled := make([]queue.ReplaySettled, len(group))
			for i, t := range group {
				settled[i] = t.s
			}
			written, err := r.store.SettleReplayed(ctx, k.replay, k.owner, settled)
			if err != nil {
				return err
			}
			for i, t := range group {
				t.written = written[i]
			}
			return nil
		}, func(t *replaying, err error) {
			t.err = err
			r.logger.Error("cannot write a replay's outcome: the member is tried again when its lease expires",
				"replay", t.replay, "event_id", t.s.EventID, "err", err)
		})
	}
}

// startSpan starts the span of a replay's delivery of m, the root of a
// trace of its own linked to the delivery that queued the event, when it
// is still queued; a nil span with tracing off.
func (r *Replayer) startSpan(ctx context.Context, run queue.RunningReplay, m queue.ReplayMember) (context.Context, trace.Span) {
	if r.cfg.Tracer == nil {
		return ctx, nil
	}
	attrs := append(tracing.Event(m.EventID, m.EventType, m.Endpoint, m.Attempts, string(queue.PathReplay)),
		tracing.AttrReplay.String(run.Name))
	// A replay takes the event from the event log, not the queue: it has
	// waited for no one, and its span says no wait.
	return r.cfg.Tracer.StartProcess(ctx, r.cfg.replayDestination(), m.EventID, m.TraceParent, time.Time{}, attrs...)
}

// settleTraced writes a traced delivery's outcome under a span of its
// own, then ends the delivery's span with what became of it.
func (r *Replayer) settleTraced(t *replaying) {
	span := t.delivery
	_, t.span = r.cfg.Tracer.Start(t.ctx, tracing.SpanOutcome)
	r.settles.Do(t)
	outcome := string(t.s.Kind)
	switch {
	case t.err != nil:
		tracing.Fail(t.span, "outcome_not_written", t.err.Error())
		outcome = "not_written"
	case !t.written:
		outcome = "lease_lost"
	}
	t.span.End()
	tracing.Outcome(span, outcome)
	span.End()
}

// traceFailure marks the span of ctx failed when the processor failed.
func traceFailure(ctx context.Context, res Result) {
	if res.Err != nil {
		tracing.FailApp(trace.SpanFromContext(ctx), res.HTTPStatus, FailureClass(res))
	}
}
