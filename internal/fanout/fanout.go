// Package fanout runs the destinations hookd serve delivers to: it makes
// the worker.Fanout of a destinations.Set, records the set in the database
// for the dashboard and the other replicas, and applies a set read anew
// (SIGHUP) to the running fan-out and its retry loops.
package fanout

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hookd/hookd/internal/config"
	"github.com/hookd/hookd/internal/destinations"
	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/worker"
)

// On says whether hookd delivers to the destinations of
// HOOKD_DESTINATIONS_FILE, rather than to HOOKD_FORWARD_URL's one app or
// nowhere.
func On(cfg config.Config) bool {
	set := cfg.Destinations
	return set != nil && set.Source != destinations.SourceForwardURL && cfg.Processor != config.ProcessorDiscard
}

// Managed is cfg with the dashboard's destinations as its set, when it
// has no file and the dashboard has some (queue.Store.ManagedSet): they
// are then delivered to beside HOOKD_FORWARD_URL's default.
func Managed(ctx context.Context, cfg config.Config, store *queue.Store) (config.Config, error) {
	if cfg.DestinationsFile != "" || cfg.Processor == config.ProcessorDiscard {
		return cfg, nil
	}
	set, err := store.ManagedSet(ctx, cfg.ForwardURL, cfg.DestinationsKey)
	if err != nil {
		return cfg, err
	}
	if set.Source == destinations.SourceDashboard {
		cfg.Destinations = set
	}
	return cfg, nil
}

// New returns the fan-out to the destinations of cfg's set, each called
// through a Forwarder of its own; nil when hookd has one app
// (HOOKD_FORWARD_URL), which it runs as it always did, or discards every
// event.
func New(cfg config.Config, logger *slog.Logger, tracer *tracing.Tracer) (*worker.Fanout, error) {
	if !On(cfg) {
		if set := cfg.Destinations; set != nil && set.Source == destinations.SourceFile {
			logger.Warn("HOOKD_DESTINATIONS_FILE is ignored with HOOKD_PROCESSOR=discard")
		}
		return nil, nil
	}
	route, dests, err := build(cfg, tracer)
	if err != nil {
		return nil, err
	}
	logger.Info("delivering to several destinations", "source", cfg.Destinations.Source,
		"destinations", cfg.Destinations.Names(), "hash", cfg.Destinations.Hash)
	return worker.NewFanout(route, dests), nil
}

// build makes the route and the destinations of cfg's set: a Forwarder
// each, with HOOKD_FORWARD_*'s settings where the destination sets none.
func build(cfg config.Config, tracer *tracing.Tracer) (worker.Route, []worker.FanoutDestination, error) {
	set := cfg.Destinations
	var dests []worker.FanoutDestination
	for _, d := range set.Destinations {
		secrets := d.SigningSecrets
		if d.SigningSecretEnv == "" && cfg.ForwardSecret.Reveal() != "" {
			// HOOKD_FORWARD_SECRET signs for every destination that names
			// no secret of its own.
			secrets = []string{cfg.ForwardSecret.Reveal()}
		}
		f, err := worker.NewDestinationForwarder(worker.ForwardOptions{Name: d.Name, URL: d.URL, Secrets: secrets,
			Headers: d.Headers})
		if err != nil {
			return nil, nil, fmt.Errorf("HOOKD_DESTINATIONS_FILE: destination %q: %v", d.Name, err)
		}
		f.KeepConns(int(cfg.RetryConcurrency+cfg.InlineConcurrency) + worker.DefaultReplayConcurrency)
		f.CloseIdleAfter(cfg.ForwardIdleTimeout)
		f.Traced(tracer)
		dests = append(dests, worker.FanoutDestination{Name: d.Name, Processor: f,
			Timeout: cmp.Or(d.Timeout, cfg.ForwardTimeout), Concurrency: d.Concurrency, Rate: cmp.Or(d.Rate, cfg.ForwardRate), OrderBy: d.OrderBy})
	}
	return routeBy(set), dests, nil
}

// routeBy routes an event by set's routes.
func routeBy(set *destinations.Set) worker.Route {
	return func(d worker.Delivery) ([]string, map[string]error) {
		matched, failed := set.Route(destinations.Event{Type: d.EventType, Livemode: d.Livemode, Account: d.Account,
			Endpoint: d.Endpoint, Payload: d.Payload})
		names := make([]string, len(matched))
		for i, m := range matched {
			names[i] = m.Name
		}
		return names, failed
	}
}

// Record records the destinations of set this replica delivers to, and
// the hash of their configuration, in the destinations table the dashboard
// and the other replicas read (queue.ApplyDestinations), and says which
// destinations taken out of the configuration were retired with
// deliveries still waiting.
func Record(ctx context.Context, store *queue.Store, set *destinations.Set, logger *slog.Logger) error {
	if set == nil {
		return nil
	}
	applied := make([]queue.AppliedDestination, len(set.Destinations))
	for i, d := range set.Destinations {
		applied[i] = queue.AppliedDestination{Name: d.Name, URL: d.DisplayURL(), Source: cmp.Or(d.Source, set.Source),
			Concurrency: d.Concurrency, Timeout: d.Timeout,
			Route: map[string]any{"types": d.Types, "livemode": d.Livemode, "accounts": d.Accounts,
				"endpoints": d.Endpoints, "filter": d.Filter, "rate": d.Rate, "order_by": d.OrderBy}}
	}
	got, err := store.ApplyDestinations(ctx, applied, set.Hash)
	if err != nil {
		return err
	}
	if len(got.Retired) > 0 {
		logger.Warn("destinations taken out of the configuration with deliveries still waiting are retired: "+
			"they get no new events; move their deliveries to another destination or drop them on the destinations page",
			"retired", got.Retired)
	}
	if len(got.Removed) > 0 {
		logger.Info("destinations taken out of the configuration removed, with nothing left to deliver", "removed", got.Removed)
	}
	return nil
}

// Reloader applies HOOKD_DESTINATIONS_FILE anew on SIGHUP: the file read
// and checked whole, as at start; a bad one is logged, one line, and
// nothing of it is applied.
type Reloader struct {
	Config config.Config
	Getenv func(string) string
	Store  *queue.Store
	Fanout *worker.Fanout
	Loops  *worker.RetryLoops
	Logger *slog.Logger
	Tracer *tracing.Tracer
}

// Run applies the file on each SIGHUP until ctx is done; without a file,
// the dashboard's destinations as soon as they change (ManagedEvery).
func (r *Reloader) Run(ctx context.Context) error {
	hangups := make(chan os.Signal, 1)
	signal.Notify(hangups, syscall.SIGHUP)
	defer signal.Stop(hangups)
	tick := time.NewTicker(ManagedEvery)
	defer tick.Stop()
	version, _ := r.Store.ManagedVersion(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hangups:
			if r.Fanout == nil {
				r.Logger.WarnContext(ctx, "SIGHUP ignored: hookd delivers to HOOKD_FORWARD_URL alone, "+
					"and rereads HOOKD_DESTINATIONS_FILE only when it was started with one")
				continue
			}
			if err := r.Reload(ctx); err != nil {
				r.Logger.ErrorContext(ctx, "HOOKD_DESTINATIONS_FILE not applied: the destinations stay as they were",
					"err", err)
			}
		case <-tick.C:
			if r.Config.DestinationsFile != "" {
				continue
			}
			now, err := r.Store.ManagedVersion(ctx)
			if err != nil || now == version {
				continue
			}
			if r.Fanout == nil {
				// Started with one app, this replica runs it as it always
				// did, without the fan-out a dashboard destination needs.
				r.Logger.WarnContext(ctx, "the dashboard's destinations changed: restart hookd (one replica at a "+
					"time is safe) to deliver to them; until then it delivers to HOOKD_FORWARD_URL alone")
				version = now
				continue
			}
			if err := r.Reload(ctx); err != nil {
				r.Logger.ErrorContext(ctx, "the dashboard's destinations not applied: the destinations stay as they were",
					"err", err)
				continue
			}
			version = now
		}
	}
}

// ManagedEvery is how often a replica without a destinations file looks
// whether the dashboard's destinations changed: an admin's change reaches
// every replica within it.
const ManagedEvery = 2 * time.Second

// Reload reads and applies HOOKD_DESTINATIONS_FILE: the database's record
// first, then the fan-out, whose next delivery routes by the new file,
// then the retry loops, one per destination now configured.
func (r *Reloader) Reload(ctx context.Context) error {
	cfg := r.Config
	if cfg.DestinationsFile != "" {
		if err := config.LoadDestinations(&cfg, r.Getenv); err != nil {
			return err
		}
	} else {
		set, err := r.Store.ManagedSet(ctx, cfg.ForwardURL, cfg.DestinationsKey)
		if err != nil {
			return err
		}
		cfg.Destinations = set
	}
	route, dests, err := build(cfg, r.Tracer)
	if err != nil {
		return err
	}
	if err := Record(ctx, r.Store, cfg.Destinations, r.Logger); err != nil {
		return err
	}
	r.Fanout.Replace(route, dests)
	r.Loops.Sync()
	r.Config = cfg
	r.Logger.InfoContext(ctx, "destinations applied", "source", cfg.Destinations.Source,
		"destinations", cfg.Destinations.Names(), "hash", cfg.Destinations.Hash)
	return nil
}
