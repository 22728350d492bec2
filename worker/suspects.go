package worker

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/hookd/hookd/queue"
)

// SuspectsPerSlot is how many suspects a replica runs alone, one after
// the other, before it hands the suspect slot on: few enough that its
// deliveries wait no more than a few runs, and that the other replicas
// take their turns.
const SuspectsPerSlot = 4

// suspectPoll is how often an idle replica asks whether a suspect waits.
const suspectPoll = time.Second

// suspectsTurn is one turn of the suspect runner (queue/suspects.go): when
// some suspect can run now and delivery is not held, it takes the suspect
// slot, closes the replica's Alone so that nothing else starts, waits for
// the runs in flight to end, runs up to SuspectsPerSlot suspects one at a
// time, each with nothing else in flight, and hands the slot on.
func (r *Retrier) suspectsTurn(ctx, workCtx context.Context) time.Duration {
	poll := min(r.cfg.Interval, suspectPoll)
	if r.cfg.Control.Held() || r.cfg.Heartbeat.Overdue() {
		return poll
	}
	if _, err := r.runSuspects(ctx, workCtx); err != nil && ctx.Err() == nil {
		r.logger.ErrorContext(ctx, "suspects failed to run alone", "err", err)
	}
	// The slot goes to whichever replica asks next, this one after a
	// poll: the others take their turns.
	return poll
}

// RunSuspects runs what one turn of the suspect runner does: when some
// suspect can run now and this replica gets the suspect slot, up to
// SuspectsPerSlot suspects one at a time, each alone. It returns how many
// it ran.
func (r *Retrier) RunSuspects(ctx context.Context) (int, error) { return r.runSuspects(ctx, ctx) }

func (r *Retrier) runSuspects(ctx, workCtx context.Context) (int, error) {
	waiting, err := r.store.SuspectsWaitingOf(ctx, r.suspectsOf(), r.replays != nil)
	if err != nil || !waiting {
		return 0, err
	}
	// Draining takes at most one processor run (nothing new starts), and
	// each suspect its run alone: the slot is renewed before each.
	drainFor := r.aloneFor() + queue.LeaseMargin
	slot, err := r.store.TakeSuspectSlot(ctx, drainFor)
	if errors.Is(err, queue.ErrEventLocked) || errors.Is(err, queue.ErrNotGranted) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer func() {
		if err := slot.Release(context.WithoutCancel(ctx)); err != nil {
			r.logger.WarnContext(ctx, "cannot hand the suspect slot on: it passes when its lease expires", "err", err)
		}
	}()
	drained := r.cfg.Alone.close()
	defer r.cfg.Alone.open()
	drainCtx, cancel := context.WithTimeout(ctx, drainFor)
	ok := wait(drainCtx, drained)
	cancel()
	if !ok {
		return 0, nil
	}
	ran := 0
	for ran < SuspectsPerSlot && ctx.Err() == nil && !r.cfg.Control.Held() {
		if err := slot.Renew(ctx, r.aloneFor()+queue.LeaseMargin); err != nil {
			return ran, nil
		}
		more, err := r.runSuspect(ctx, workCtx)
		if err != nil || !more {
			return ran, err
		}
		ran++
	}
	return ran, nil
}

// RunsReplaySuspects makes the replay runner's suspects run alone in this
// retry loop's turns of the suspect slot too: a replay's member cut short
// by a crash runs alone as that replay's delivery (Replayer.runSuspect).
// serve wires the two; a Retrier without it runs the retries' suspects
// alone, and leaves the replays' to replicas that have both.
func (r *Retrier) RunsReplaySuspects(replays *Replayer) { r.replays = replays }

// runSuspect runs the next suspect alone, and reports whether there was
// one: the oldest replay's member cut short, if any can run now (few: a
// replay runs DefaultReplayConcurrency at once), else the oldest suspect
// on the queue, as a retry.
func (r *Retrier) runSuspect(ctx, workCtx context.Context) (bool, error) {
	if r.replays != nil {
		if ran, err := r.replays.runSuspect(ctx, workCtx); ran || err != nil {
			return ran, err
		}
	}
	c, deadline, ok, err := r.store.ClaimSuspectOf(ctx, r.suspectsOf(), r.aloneFor())
	if err != nil || !ok {
		return false, err
	}
	t := &settling{s: queue.Settled{Claimed: c, Kind: queue.SettleReleased}}
	switch {
	case c.Dead:
		r.cfg.Metrics.CountDead()
		r.logger.ErrorContext(workCtx, "event is dead: it crashed hookd each time it ran alone", "event_id", c.Event.EventID,
			"event_type", c.Event.EventType, "attempt", c.Event.Attempts)
	case c.Processed:
		t.s.Kind = queue.SettleDone
		r.steps.settle([]*settling{t})
	default:
		r.logger.InfoContext(workCtx, "a suspect runs alone: a crash cut its run short", "event_id", c.Event.EventID,
			"event_type", c.Event.EventType, "attempt", c.Event.Attempts)
		workAlone(workCtx, &r.producer, deadline, t, &retryBatch{r: r, ctx: workCtx})
	}
	return true, nil
}

// suspectsOf names the destinations whose suspects r runs alone.
func (r *Retrier) suspectsOf() []string {
	if r.cfg.Suspects != nil {
		return r.cfg.Suspects()
	}
	return []string{cmp.Or(r.cfg.Destination, queue.DefaultDestination)}
}
