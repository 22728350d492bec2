package worker

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"

	"github.com/hookd/hookd/internal/groupcommit"
	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/queue"
)

// settling is a claimed event on its way to SettleAndStart, and what that
// made of it.
type settling struct {
	s queue.Settled
	// started: the attempt's start is recorded on its lease
	// (queue.Store.SettleAndStart), so it counts from here.
	started bool
	state   queue.SettledState
	err     error
	// cut: released because shutdown cut it short, not because delivery
	// is held or a probe found the app still down.
	cut bool
	// ctx holds the attempt's span, from its start to its outcome's
	// write (the worker's context when it is not traced); outcome is the
	// span of that write. Set by retryBatch.begin and stepWriter.write.
	ctx     context.Context
	span    trace.Span
	outcome trace.Span
}

// step is one worker's turn at the database: the outcome of its last
// event, the start of its next, or both.
type step struct {
	settle, start *settling
	err           error
}

// stepWriter is the retry loop's group commit, as River's completer is
// its producer's: it writes the steps that the workers of every batch in
// flight reach at one moment with their leases, in one short transaction
// (queue.Store.SettleAndStart), or each step alone when that fails.
type stepWriter struct {
	store   *queue.Store
	logger  *slog.Logger
	tracer  *tracing.Tracer
	batcher *groupcommit.Batcher[*step]
}

// newStepWriter returns a stepWriter over store whose transactions hold
// up to size steps.
func newStepWriter(store *queue.Store, logger *slog.Logger, tracer *tracing.Tracer, size int) *stepWriter {
	w := &stepWriter{store: store, logger: logger, tracer: tracer}
	w.batcher = groupcommit.New(size, w.commit)
	return w
}

// write writes st with the steps that reach the database with it, under
// the span of its outcome's write when its attempt is traced, and reports
// whether its start may run. Not started: the lease is gone, or the start
// could not be written, and no attempt is made without it; the event
// stays given back.
func (w *stepWriter) write(st *step) bool {
	if t := st.settle; t != nil && t.span != nil {
		_, t.outcome = w.tracer.Start(t.ctx, tracing.SpanOutcome)
	}
	w.batcher.Do(st)
	if t := st.settle; t != nil && t.span != nil {
		t.endSpans()
	}
	return st.start != nil && st.err == nil && st.start.started
}

// startAlone writes the start of t alone and at once, not in the group
// the workers' steps form: a start writes no WAL, so its commit waits for
// no flush (queue's startAttemptsSQL), while a group's waits for the
// flush of its outcomes. It reports whether t may run.
func (w *stepWriter) startAlone(t *settling) bool {
	st := &step{start: t}
	w.commit([]*step{st})
	return st.err == nil && t.started
}

// settle writes the outcomes of events that need no run, together, at
// once: the claim found them processed.
func (w *stepWriter) settle(done []*settling) {
	if len(done) == 0 {
		return
	}
	steps := make([]*step, len(done))
	for i, t := range done {
		steps[i] = &step{settle: t}
	}
	w.commit(steps)
}

// commit writes a batch of steps, each group with its leases in one short
// transaction, or each step alone when that fails. The writes outlive
// shutdown's cancellation, within queue.LeaseMargin, so an outcome is
// written while its lease still holds: the processors' side effects
// happened.
func (w *stepWriter) commit(batch []*step) {
	groupcommit.EachAlone(batch, queue.LeaseMargin, w.commitGroup, w.fail)
	// Only shutdown is worth a line here: an event given back while
	// delivery is held, or by a probe that found the app still down, is
	// what the breaker's and the pause's own logs already say.
	var cut int
	for _, st := range batch {
		if t := st.settle; t != nil && t.s.Kind == queue.SettleReleased && t.state.Written && t.cut {
			cut++
		}
	}
	if cut > 0 {
		w.logger.Info("shutdown cut retries short: released, due again, attempts not counted", "events", cut)
	}
}

// commitGroup writes group's outcomes and starts in one transaction.
func (w *stepWriter) commitGroup(ctx context.Context, group []*step) error {
	// The group's statements are child spans of the outcome span of its
	// first traced attempt.
	ctx = tracing.Group(ctx, group, func(st *step) trace.Span {
		if st.settle == nil {
			return nil
		}
		return st.settle.outcome
	})
	var settled []queue.Settled
	var starting []queue.Claimed
	for _, st := range group {
		if st.settle != nil {
			settled = append(settled, st.settle.s)
		}
		if st.start != nil {
			starting = append(starting, st.start.s.Claimed)
		}
	}
	states, started, err := w.store.SettleAndStart(ctx, settled, starting)
	if err != nil {
		return err
	}
	for _, st := range group {
		if st.settle != nil {
			st.settle.state, states = states[0], states[1:]
		}
		if st.start != nil {
			st.start.started, started = started[0], started[1:]
		}
	}
	return nil
}

// fail records that st could not be written.
func (w *stepWriter) fail(st *step, err error) {
	st.err = err
	if st.settle != nil {
		st.settle.err = err
		w.logger.Error("cannot write a retry's outcome: the event is due again once its replica lets it go",
			"event_id", st.settle.s.Claimed.Event.EventID, "err", err)
	}
	if st.start != nil {
		w.logger.Error("cannot record the start of a retry: it is given back, not run", "event_id",
			st.start.s.Claimed.Event.EventID, "err", err)
	}
}

// endSpans ends the attempt's outcome span and its own, saying what became
// of it: done, failed, dead, or released (given back uncounted), or that
// its outcome could not be written.
func (t *settling) endSpans() {
	outcome := string(t.s.Kind)
	switch {
	case t.err != nil:
		tracing.Fail(t.outcome, "outcome_not_written", t.err.Error())
		outcome = "not_written"
	case !t.state.Written:
		outcome = "lease_lost"
	case t.state.Status == queue.StatusDead:
		outcome = string(queue.StatusDead)
	}
	if t.outcome != nil {
		t.outcome.End()
	}
	tracing.Outcome(t.span, outcome)
	t.span.End()
}

// context is the attempt's traced context, so that what is logged of it
// carries its trace; ctx when it was not traced.
func (t *settling) context(ctx context.Context) context.Context {
	if t.ctx != nil {
		return t.ctx
	}
	return ctx
}
