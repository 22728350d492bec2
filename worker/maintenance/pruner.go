package maintenance

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/hookd/hookd/internal/startstop"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/activity"
	"github.com/hookd/hookd/internal/store/rejections"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
)

// MinMarkerRetention is Stripe's redelivery window: a redelivery that finds
// no marker is processed again. No retention, scheduled or manual, may be
// shorter.
const MinMarkerRetention = stripeevent.RedeliveryWindow

// DefaultMarkerRetention is HOOKD_MARKER_RETENTION's default: ten times
// Stripe's redelivery window, so an event retried by hand days after its
// first delivery still finds its marker.
const DefaultMarkerRetention = 30 * 24 * time.Hour

// DefaultPayloadRetention is HOOKD_PAYLOAD_RETENTION's default: how long
// the event log keeps each event's exact payload, long enough to replay
// the events of a bug found a few days late, short enough that the log
// does not hold customers' data for the markers' whole month.
const DefaultPayloadRetention = 7 * 24 * time.Hour

// PrunerConfig configures a Pruner. Zero fields get the defaults below.
type PrunerConfig struct {
	// Interval is how often the pruner runs; it also runs once at start.
	// Default: 1 hour, a small fraction of any sensible retention.
	Interval time.Duration
	// Retention is the age after which dedup markers, and the attempt
	// history of events no longer queued, are deleted. Stripe redelivers
	// for up to three days, so it should not be below MinMarkerRetention.
	// Default: DefaultMarkerRetention. The event log's rows go with it.
	Retention time.Duration
	// PayloadRetention is the age after which the event log's payloads
	// are cleared. Default: DefaultPayloadRetention.
	PayloadRetention time.Duration
	// Timeout bounds one run. Default: 1 minute.
	Timeout time.Duration
	// CountPruned, when set, hears how many markers each run deleted (the
	// metrics' counter).
	CountPruned func(markers int64)
}

// staleLeaseAge is how long after it expired an abandoned lease is deleted:
// one whose holder died and that no delivery or claim took over since. An
// expired lease already lets anyone take the event; deleting it only keeps
// the table small, so the age is generous.
const staleLeaseAge = time.Hour

// Pruner deletes old dedup markers on a schedule, and with them the attempt
// history of resolved events. Dead and pending events keep their history.
type Pruner struct {
	service    *startstop.Service
	store      *queue.Store
	accounts   *accounts.Store
	activity   *activity.Store
	rejections *rejections.Store
	logger     *slog.Logger
	cfg        PrunerConfig
}

// NewPruner returns a Pruner over store, over accts for what signing in to
// the dashboard leaves behind, and over act and rej for the chart counts
// and the rejection log.
func NewPruner(store *queue.Store, accts *accounts.Store, act *activity.Store, rej *rejections.Store,
	logger *slog.Logger, cfg PrunerConfig) *Pruner {
	cfg.Interval = cmp.Or(cfg.Interval, time.Hour)
	cfg.Retention = cmp.Or(cfg.Retention, DefaultMarkerRetention)
	cfg.PayloadRetention = cmp.Or(cfg.PayloadRetention, DefaultPayloadRetention)
	cfg.Timeout = cmp.Or(cfg.Timeout, time.Minute)
	p := &Pruner{
		store:      store,
		accounts:   accts,
		activity:   act,
		rejections: rej,
		logger:     logger.With("component", "pruner"),
		cfg:        cfg,
	}
	p.service = startstop.New(func(ctx context.Context) {
		p.prune(ctx)
		startstop.Every(ctx, p.cfg.Interval, p.prune)
	})
	return p
}

// Run prunes at once and then every Interval until ctx is cancelled, and
// returns nil once the run in progress has ended.
func (p *Pruner) Run(ctx context.Context) error { return p.service.Run(ctx) }

// prune is one scheduled run: a failed run is logged and tried again at
// the next tick.
func (p *Pruner) prune(ctx context.Context) {
	if _, err := p.RunOnce(ctx); err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		p.logger.ErrorContext(ctx, "prune failed", "err", err)
	}
}

// RunOnce deletes the markers and attempt history older than the
// retention, records the run for the dashboard, deletes expired dashboard
// sessions, sign-in counts old enough to start over, the chart counts
// older than activity.Retention, the refused deliveries older than the
// retention or beyond rejections.MaxRows and the suspects whose event is
// gone (queue.Store.PruneSuspects), and returns how many markers it
// deleted.
func (p *Pruner) RunOnce(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	markers, err := p.store.PruneProcessed(ctx, p.cfg.Retention)
	if p.cfg.CountPruned != nil {
		p.cfg.CountPruned(markers)
	}
	if err != nil {
		return markers, err
	}
	attempts, err := p.store.PruneAttempts(ctx, p.cfg.Retention)
	if err != nil {
		return markers, err
	}
	if err := p.store.RecordPrune(ctx, markers); err != nil {
		return markers, err
	}
	sessions, err := p.accounts.DeleteExpiredSessions(ctx)
	if err != nil {
		return markers, err
	}
	logins, err := p.accounts.DeleteStaleLoginFailures(ctx)
	if err != nil {
		return markers, err
	}
	counts, err := p.activity.Prune(ctx)
	if err != nil {
		return markers, err
	}
	refused, err := p.rejections.Prune(ctx, p.cfg.Retention, rejections.MaxRows)
	if err != nil {
		return markers, err
	}
	leases, err := p.store.PruneLeases(ctx, staleLeaseAge)
	if err != nil {
		return markers, err
	}
	fenceCuts, err := p.store.PruneFenceCuts(ctx, p.cfg.Retention)
	if err != nil {
		return markers, err
	}
	pairs, err := p.store.PrunePairs(ctx, p.cfg.Retention)
	if err != nil {
		return markers, err
	}
	payloads, err := p.store.PrunePayloads(ctx, p.cfg.PayloadRetention)
	if err != nil {
		return markers, err
	}
	// A replay that ended is kept as long as the events it replayed.
	replays, err := p.store.PruneReplays(ctx, p.cfg.Retention)
	if err != nil {
		return markers, err
	}
	suspects, err := p.store.PruneSuspects(ctx, p.cfg.Retention)
	if err != nil {
		return markers, err
	}
	misses, err := p.store.PruneRouteMisses(ctx, p.cfg.Retention)
	if err != nil {
		return markers, err
	}
	if markers > 0 || attempts > 0 || sessions > 0 || logins > 0 || counts > 0 || refused > 0 || leases > 0 || pairs > 0 ||
		payloads > 0 || replays > 0 || suspects > 0 || fenceCuts > 0 || misses > 0 {
		p.logger.InfoContext(ctx, "pruned", "markers", markers, "attempts", attempts,
			"expired_sessions", sessions, "stale_login_counts", logins, "activity_minutes", counts,
			"refused_deliveries", refused, "abandoned_leases", leases, "fence_cuts", fenceCuts, "event_pairs", pairs,
			"event_log_payloads", payloads, "replays", replays, "suspects", suspects, "route_misses", misses,
			"older_than", p.cfg.Retention, "payloads_older_than", p.cfg.PayloadRetention)
	}
	return markers, nil
}
