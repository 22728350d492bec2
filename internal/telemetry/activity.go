package telemetry

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/hookd/hookd/internal/startstop"
	"github.com/hookd/hookd/internal/store/activity"
)

// ActivityConfig configures an Activity. Zero fields get the defaults below.
type ActivityConfig struct {
	// Replica names this process's rows. Default: the host name, the
	// process id and a random suffix, unique among running replicas.
	Replica string
	// FlushInterval is how often the counts are added to the database: what
	// a crash may lose, and how far the charts lag. Default: 5 s.
	FlushInterval time.Duration
	// StopTimeout bounds each flush, the last one too, which Run makes
	// once its context is cancelled. Default: 5 s.
	StopTimeout time.Duration
}

// Activity counts what the pipeline does, in memory, and adds the counts to
// the database every FlushInterval: one upsert of this replica's row of the
// current minute. Counting is an atomic add, so no delivery or retry ever
// waits on the database for it; a crash loses at most the counts since the
// last flush, never an event. A nil *Activity counts nothing.
type Activity struct {
	store   *activity.Store
	logger  *slog.Logger
	cfg     ActivityConfig
	pending [numActivityFields]atomic.Int64
	flushes *startstop.Service
}

// The counted facts, in the order of activity.Counts' fields.
const (
	actReceived = iota
	actProcessed
	actQueued
	actRetried
	actDead
	actRejected
	actBadSignature
	numActivityFields
)

// NewActivity returns an Activity over store.
func NewActivity(store *activity.Store, logger *slog.Logger, cfg ActivityConfig) *Activity {
	cfg.Replica = cmp.Or(cfg.Replica, defaultReplica())
	cfg.FlushInterval = cmp.Or(cfg.FlushInterval, 5*time.Second)
	cfg.StopTimeout = cmp.Or(cfg.StopTimeout, DefaultStopTimeout)
	a := &Activity{store: store, logger: logger.With("component", "activity"), cfg: cfg}
	a.flushes = flushLoop(cfg.FlushInterval, cfg.StopTimeout, a.Flush, a.flushFailed)
	return a
}

func defaultReplica() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "hookd"
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

func (a *Activity) add(field int, n int64) {
	if a == nil || n == 0 {
		return
	}
	a.pending[field].Add(n)
}

// received counts one delivery to the receiver, answered with outcome.
func (a *Activity) received(outcome Outcome) {
	a.add(actReceived, 1)
	switch outcome {
	case OutcomeProcessed, OutcomeTestDiscarded:
		a.add(actProcessed, 1)
	case OutcomeQueued, OutcomeDeferred:
		// A deferred event is on the queue as surely as a failed one.
		a.add(actQueued, 1)
	case OutcomeBadSignature, OutcomeBadPayload, OutcomeTooLarge:
		a.add(actRejected, 1)
	}
}

// wrongSignature counts a delivery whose signature header was well formed
// and recent but matched no configured secret: what the signature alert
// watches. A missing or garbage header says nothing about hookd's secret,
// since anyone on the internet can send one.
func (a *Activity) wrongSignature() { a.add(actBadSignature, 1) }

// retried counts the retries of one batch once they are committed.
func (a *Activity) retried(succeeded, failed int) {
	a.add(actRetried, int64(succeeded+failed))
	a.add(actProcessed, int64(succeeded))
}

// take returns the counts since the last take and zeroes them.
func (a *Activity) take() activity.Counts {
	var v [numActivityFields]int64
	for i := range v {
		v[i] = a.pending[i].Swap(0)
	}
	return activity.Counts{
		Received: v[actReceived], Processed: v[actProcessed], Queued: v[actQueued], Retried: v[actRetried],
		Dead: v[actDead], Rejected: v[actRejected], BadSignature: v[actBadSignature],
	}
}

// giveBack adds counts a failed flush could not store back to the ones
// pending, so the next flush stores them.
func (a *Activity) giveBack(c activity.Counts) {
	for i, n := range []int64{c.Received, c.Processed, c.Queued, c.Retried, c.Dead, c.Rejected, c.BadSignature} {
		a.add(i, n)
	}
}

// Flush adds the counts since the last flush to this replica's row of the
// current minute. When that fails before reaching the database, the counts
// stay pending for the next flush; when it fails in a way that leaves
// unknown whether they were added, they are dropped, since counting them
// twice would be worse than losing a few seconds of them.
func (a *Activity) Flush(ctx context.Context) error {
	c := a.take()
	if c.IsZero() {
		return nil
	}
	err := a.store.Add(ctx, a.cfg.Replica, c)
	if errors.Is(err, activity.ErrNotAdded) {
		a.giveBack(c)
	}
	return err
}

// Run flushes every FlushInterval until ctx is cancelled, then flushes once
// more, bounded by StopTimeout, and returns nil. Cancel ctx after the
// receiver and the retry loop have stopped, so the last flush holds their
// last counts. A failed flush is logged; its counts wait for the next.
func (a *Activity) Run(ctx context.Context) error { return a.flushes.Run(ctx) }

func (a *Activity) flushFailed(ctx context.Context, err error, last bool) {
	switch {
	case last:
		a.logger.Warn("last activity counts lost at stop", "err", err)
	case errors.Is(err, activity.ErrNotAdded):
		a.logger.WarnContext(ctx, "cannot store activity counts; keeping them for the next flush", "err", err)
	default:
		a.logger.WarnContext(ctx, "activity counts of the last few seconds lost", "err", err)
	}
}
