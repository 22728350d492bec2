package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hookd/hookd/internal/store/reconcileruns"
	"github.com/hookd/hookd/queue"
)

const (
	// timelineEvery is how often each replica reads the database's WAL
	// timeline: a failover is noticed within it.
	timelineEvery = 2 * time.Second
	// failoverMargin is how much earlier than the newest event the new
	// primary holds a failover's reconcile run starts: the clocks of the
	// replicas, the old primary's and Stripe's may differ, and the standby
	// may have lagged by this much behind what it had replayed.
	failoverMargin = 2 * time.Minute
	// failoverRetry is how often a failover's reconcile run is tried again
	// while another run holds the reconcile lock or Stripe's API fails,
	// until failoverGiveUp has passed.
	failoverRetry  = 5 * time.Second
	failoverGiveUp = 10 * time.Minute
)

// FailoverWatch notices a failover of the database by itself (SPEC.md,
// "Faults"): every replica reads the WAL timeline every timelineEvery, and
// the one that writes a new timeline (queue.Store.NoteTimeline, which
// audits it) logs it, sends a one-off alert, and, with a Stripe API key,
// reconciles at once the window from the newest event the new primary
// holds, less failoverMargin, to now, young events included, whatever
// HOOKD_RECONCILE_INTERVAL says: an event an asynchronous standby lost
// after it was answered 200 is delivered again instead of never.
type FailoverWatch struct {
	Store  *queue.Store
	Logger *slog.Logger
	// Alert sends a one-off alert; nil without HOOKD_ALERT_URL.
	Alert func(context.Context, string)
	// Reconciler is nil without STRIPE_API_KEY and an endpoint id.
	Reconciler *Reconciler
}

// Run looks every timelineEvery until ctx is cancelled.
func (w *FailoverWatch) Run(ctx context.Context) error {
	tick := time.NewTicker(timelineEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			w.Look(ctx)
		}
	}
}

// Look reads the timeline once, and acts when it changed. The server
// looks once before it takes its first delivery, so that the timeline is
// kept, and reaches the standbys, before anything it answers could be
// lost with a failover.
func (w *FailoverWatch) Look(ctx context.Context) {
	lookBack := DefaultWindow
	if w.Reconciler != nil {
		lookBack = w.Reconciler.MaxWindow()
	}
	f, err := w.Store.NoteTimeline(ctx, lookBack)
	if err != nil {
		if ctx.Err() == nil {
			w.Logger.Debug("cannot read the database's timeline", "err", err)
		}
		return
	}
	if f != nil {
		w.failedOver(ctx, f)
	}
}

func (w *FailoverWatch) failedOver(ctx context.Context, f *queue.Failover) {
	since := f.Newest.Add(-failoverMargin)
	if f.Newest.IsZero() {
		since = time.Time{}
	}
	w.Logger.Warn("the database failed over: its WAL timeline changed; events answered 200 shortly before "+
		"may be gone if the standby was asynchronous", "from_timeline", f.From, "to_timeline", f.To,
		"newest_event", f.Newest, "reconcile", w.Reconciler != nil)
	text := fmt.Sprintf("hookd: the database failed over (WAL timeline %d to %d). ", f.From, f.To)
	if w.Reconciler != nil {
		text += "Events it lost are being pulled again from Stripe's Events API."
	} else {
		text += "Events answered 200 just before may be lost if its standby was asynchronous: " +
			"set STRIPE_API_KEY so hookd reconciles after a failover, or run hookd reconcile."
	}
	if w.Alert != nil {
		w.Alert(ctx, text)
	}
	if w.Reconciler != nil {
		go w.reconcile(context.WithoutCancel(ctx), since)
	}
}

// reconcile runs the failover's reconcile run, again every retry while
// another run holds the lock or it fails, until it ran or giveUp passed.
func (w *FailoverWatch) reconcile(ctx context.Context, since time.Time) {
	deadline := time.Now().Add(failoverGiveUp)
	retry := failoverRetry
	for {
		// Without a recent event on the new primary, since is zero and the
		// run looks back its usual window.
		res, err := w.Reconciler.RunOnce(ctx, Options{Trigger: reconcileruns.TriggerFailover, Since: since, Young: true})
		if err == nil {
			w.Logger.Warn("reconciled after the failover", "summary", res.Summary())
			return
		}
		if time.Now().After(deadline) {
			w.Logger.Error("the reconcile run after the failover failed; run hookd reconcile", "err", err)
			return
		}
		if !errors.Is(err, reconcileruns.ErrRunning) {
			w.Logger.Warn("the reconcile run after the failover failed; trying again", "err", err, "retry_in", retry)
		}
		t := time.NewTimer(retry)
		<-t.C
	}
}
