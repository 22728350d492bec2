package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/internal/config"
	"github.com/hookd/hookd/internal/fanout"
	"github.com/hookd/hookd/internal/idp"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/activity"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/store/idempotency"
	"github.com/hookd/hookd/internal/store/rejections"
	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/internal/store/ungenerated"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/internal/stripehealth"
	"github.com/hookd/hookd/internal/telemetry"
	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/web"
	"github.com/hookd/hookd/web/api"
	"github.com/hookd/hookd/worker"
	"github.com/hookd/hookd/worker/maintenance"
	"github.com/hookd/hookd/worker/reconcile"
)

// serve runs `hookd serve` until ctx is cancelled: build wires the stores,
// the receiver, the loops and the HTTP servers together, run starts them
// all in one errgroup, and stop shuts them down in one order, letting work
// in flight finish within HOOKD_SHUTDOWN_TIMEOUT.
func serve(ctx context.Context, cfg config.Config, getenv func(string) string, stdout, stderr io.Writer) error {
	var handler slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel})
	if cfg.Trace.On() {
		// Only with tracing on: the wrapper is one more call per record.
		handler = tracing.LogHandler(handler)
	}
	logger := slog.New(handler)
	tuneGC(cfg)
	tracer, shutdownTraces, err := tracing.Setup(ctx, cfg.Trace, logger, buildVersion())
	if err != nil {
		return err
	}
	// Last, once everything that starts spans has stopped: what the
	// exporter still holds is sent, within a bound of its own.
	defer func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), traceFlushTimeout)
		defer cancel()
		if err := shutdownTraces(flushCtx); err != nil {
			logger.Warn("traces not all exported at shutdown", "err", err)
		}
	}()
	s, err := build(ctx, cfg, getenv, logger, tracer)
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.run(ctx); err != nil {
		return err
	}
	logger.Info("stopped")
	return nil
}

// traceFlushTimeout bounds the export of the last spans at shutdown, after
// HOOKD_SHUTDOWN_TIMEOUT's work: a collector that is down must not hold up
// the exit for the exporter's own 10-second timeout and its retries.
const traceFlushTimeout = 5 * time.Second

// tuneGC sets the garbage collector for the receiver, unless GOGC or
// GOMEMLIMIT, which the Go runtime reads itself, say otherwise. hookd's
// live heap is a few MiB, and every delivery allocates a little, so at
// Go's default GOGC=100 it collects many times a second: on make
// bench-load, GOGC=400 took hookd's CPU per event from 112-126 µs to
// 104-108 µs for about 12 MiB more resident memory. The soft limit keeps
// a flood of request bodies (bounded by HOOKD_MAX_BODY_MEMORY) from
// growing the heap fivefold before a collection.
func tuneGC(cfg config.Config) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(64<<20 + cfg.MaxBodyMemory)
	}
}

// server is `hookd serve` built and not yet running.
type server struct {
	cfg    config.Config
	logger *slog.Logger
	// closers close the pools, in reverse order of opening.
	closers []func()

	listeners []listener
	// loops end when run's context is cancelled; the HTTP servers are
	// stopped by stop. Flushes run until everything else has stopped.
	loops   []func(context.Context) error
	flushes []func(context.Context) error
	// heartbeat keeps this replica's leases live; it beats until
	// everything that holds a lease has stopped.
	heartbeat *worker.Heartbeat
	// tracer traces deliveries and their statements; nil with tracing off.
	tracer *tracing.Tracer
}

// listener is one HTTP server and the address it serves.
type listener struct {
	srv *http.Server
	ln  net.Listener
}

func (s *server) close() {
	for _, l := range s.listeners {
		l.ln.Close()
	}
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// build opens the database and wires every part of hookd serve, or gives
// back what it opened and says what is wrong.
func build(ctx context.Context, cfg config.Config, getenv func(string) string, logger *slog.Logger,
	tracer *tracing.Tracer) (_ *server, err error) {
	s := &server{cfg: cfg, logger: logger, tracer: tracer}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	// The one app's processor, checked before the database is opened: a
	// hookd with neither HOOKD_FORWARD_URL nor a file refuses to start.
	proc, err := newProcessor(cfg, logger, tracer)
	if err != nil {
		return nil, err
	}
	st, err := s.openStores(ctx)
	if err != nil {
		return nil, err
	}
	// Without a file, the dashboard's destinations, if any, are delivered
	// to beside HOOKD_FORWARD_URL's.
	if cfg, err = fanout.Managed(ctx, cfg, st.queue); err != nil {
		return nil, err
	}
	s.cfg = cfg
	reg, metrics, rejections := s.observe(st)
	fan, err := fanout.New(cfg, logger, tracer)
	if err != nil {
		return nil, err
	}
	// Stripe's notices about Stripe itself are hookd's to keep, not the
	// app's to process, on every path an event runs.
	if fan != nil {
		fan.Wrap(func(p worker.Processor) worker.Processor { return stripehealth.Processor(p, st.ungenerated) })
		fan.HoldBy(st.control.DestinationHeld)
		fan.OrderBy(st.queue)
		fan.PaceBy(func(name string, perSecond float64) *worker.Pace {
			return worker.NewSharedPace(st.queue, name, perSecond).OnWait(func() { metrics.CountRateWait(name) })
		})
		proc = fan
	} else {
		proc = stripehealth.Processor(proc, st.ungenerated)
	}

	store, accts := st.queue, st.accounts
	if err := s.registerHeartbeat(ctx, store); err != nil {
		return nil, err
	}
	if err := fanout.Record(ctx, store, cfg.Destinations, logger); err != nil {
		return nil, err
	}
	// One Pace for every path that delivers to the app: the receiver (and
	// reconciliation through it), the retry loop and replays share the
	// rate, and so do the replicas. With several destinations each has its
	// own (fanout.New), HOOKD_FORWARD_RATE its default.
	var pace *worker.Pace
	if fan == nil {
		pace = worker.NewSharedPace(store, queue.DefaultDestination, cfg.ForwardRate).
			OnWait(func() { metrics.CountRateWait(queue.DefaultDestination) })
	}
	// One Alone for every path that runs events: while a suspect runs
	// alone on this replica, nothing else does.
	alone := worker.NewAlone()
	receiver := receiver.New(store, logger, receiver.Config{
		Endpoints: cfg.Endpoints, SnapshotAlias: cfg.SnapshotAlias, Processor: proc, Fanout: fan,
		ProcessTimeout: cfg.ForwardTimeout,
		Metrics:        metrics, InlineConcurrency: int(cfg.InlineConcurrency), Control: st.control, Pace: pace,
		Heartbeat: s.heartbeat, Alone: alone, Tracer: tracer})
	// Closed before the pool (closers run last added first): the
	// outcomes the receiver still retries must not hold its close.
	s.closers = append(s.closers, receiver.Stop)
	runs, retryLoops, replayer := s.producers(store, proc, fan, metrics, st.control, pace, alone)
	pruner := maintenance.NewPruner(store, accts, st.counts, st.refused, logger,
		maintenance.PrunerConfig{Retention: cfg.MarkerRetention, PayloadRetention: cfg.PayloadRetention,
			CountPruned: metrics.CountPruned})
	// One client, on one budget, for reconciliation and the dashboard.
	stripeClient := newStripeClient(cfg, logger)
	reconciler := newReconciler(cfg, stripeClient, store, receiver, logger)

	s.loops = append(s.loops, st.control.Run, pruner.Run)
	s.loops = append(s.loops, runs...)
	if cfg.Processor != config.ProcessorDiscard {
		reloader := &fanout.Reloader{Config: cfg, Getenv: getenv, Store: store, Fanout: fan, Loops: retryLoops,
			Logger: logger, Tracer: tracer}
		s.loops = append(s.loops, reloader.Run)
	}
	alert := s.addAlerter(store, stripeClient)
	if reconciler != nil {
		s.loops = append(s.loops, reconciler.Run)
	}
	watch := &reconcile.FailoverWatch{Store: store, Logger: logger, Alert: alert, Reconciler: reconciler}
	watch.Look(ctx)
	s.loops = append(s.loops, watch.Run)
	provider := s.addSignIn(accts)

	// A replay started here, on the dashboard or through the API, wakes
	// this replica's runner at once.
	acts := actions.New(actions.Stores{Queue: st.queue, Reads: st.reads, Audit: st.audit, Control: st.control,
		Tokens: st.tokens, Replayer: replayer, Logger: logger, Accounts: st.accounts, Rejections: st.pageRefusals,
		Reconciler: reconciler, Stripe: stripeClient, Destinations: actions.ManagedDestinations{File: cfg.DestinationsFile,
			ForwardURL: cfg.ForwardURL, Key: cfg.DestinationsKey, Endpoints: cfg.EndpointLabels(), ForwardRate: cfg.ForwardRate}})
	apiOpts := api.Options{Logger: logger, Actions: acts, Tokens: st.tokens, Idempotency: st.idempotency, Rate: cfg.APIRate}
	handler := newHandler(cfg, logger, st, pipeline{receiver: receiver, metrics: metrics, reg: reg,
		rejections: rejections, reconciler: reconciler, stripe: stripeClient, pace: pace, replayer: replayer, tracer: tracer,
		oidc: provider, alert: alert, actions: acts, api: apiOpts})
	if err := s.listen(handler, reg, apiOpts); err != nil {
		return nil, err
	}
	return s, nil
}

// producers makes the retry loops and the replay runner, which run on the
// one producer: they deliver through the same processor, under the same
// delivery control, rate and heartbeat; the retry loop's interval, batch
// and concurrency are settings, the replays' the worker's defaults. With
// several destinations each has a retry loop of its own, at its own
// concurrency (worker.RetryLoops), which a new configuration brings in
// line with its destinations. It returns the loops to run.
func (s *server) producers(store *queue.Store, proc worker.Processor, fan *worker.Fanout, metrics *telemetry.Metrics,
	control *worker.Control, pace *worker.Pace, alone *worker.Alone) ([]func(context.Context) error, *worker.RetryLoops,
	*worker.Replayer) {
	cfg := s.cfg
	delivering := worker.ProducerConfig{ProcessTimeout: cfg.ForwardTimeout, StopTimeout: cfg.ShutdownTimeout,
		Processor: proc, Metrics: metrics, Control: control, Pace: pace, Heartbeat: s.heartbeat, Alone: alone,
		Tracer: s.tracer}
	retries := delivering
	retries.Interval, retries.BatchSize, retries.Concurrency = cfg.RetryInterval, int(cfg.RetryBatch), int(cfg.RetryConcurrency)
	replayer := worker.NewReplayer(store, s.logger, delivering)
	if fan == nil {
		retrier := worker.NewRetrier(store, s.logger, retries)
		retrier.RunsReplaySuspects(replayer)
		return []func(context.Context) error{retrier.Run, replayer.Run}, nil, replayer
	}
	loops := worker.NewRetryLoops(store, s.logger, retries, fan)
	loops.Suspects().RunsReplaySuspects(replayer)
	return []func(context.Context) error{loops.Run, replayer.Run}, loops, replayer
}

// addAlerter adds the alerter's loop when HOOKD_ALERT_URL says where its
// alerts go, and returns how to post an alert of one's own through it (nil
// without).
func (s *server) addAlerter(store *queue.Store, stripeClient *stripeapi.Client) func(context.Context, string) {
	cfg := s.cfg
	if cfg.AlertURL == "" {
		return nil
	}
	alerter := maintenance.NewAlerter(store, s.logger, maintenance.AlerterConfig{
		URL: cfg.AlertURL.Reveal(), PublicURL: cfg.PublicURL, PendingAge: cfg.AlertPendingAge,
		StalledAfter: worker.RetrierStalledAfter(cfg.RetryInterval), BreakerFailures: int(cfg.BreakerFailures),
		Endpoints: cfg.Endpoints, Stripe: stripeClient, Quiet: cfg.AlertQuiet})
	s.loops = append(s.loops, alerter.Run)
	return alerter.Announce
}

// addSignIn makes the identity provider the settings name (nil without),
// one for the dashboard and the re-check loop, so they share its discovery,
// and adds the re-check loop when signed-in people are re-checked. It
// warns when a role is given to every person the provider signs in.
func (s *server) addSignIn(accts *accounts.Store) *idp.Provider {
	cfg := s.cfg
	provider := config.OIDCProvider(cfg)
	if provider == nil {
		return nil
	}
	if role, ok := cfg.OIDCRoles.Everyone(); ok {
		s.logger.Warn("HOOKD_OIDC_ROLES gives every person the identity provider signs in a role: "+
			"with a provider anyone can get an account at, that is anyone", "role", role, "allowed_domains", cfg.OIDCAllowedDomains)
	}
	switch {
	case config.OIDCRechecks(cfg):
		s.loops = append(s.loops, idp.NewRechecker(provider, accts, s.logger,
			idp.RecheckConfig{Every: cfg.OIDCRecheck, SessionMaxAge: cfg.SessionMaxAge}).Run)
	case cfg.OIDCRecheck > 0:
		s.logger.Warn("signed-in people are not re-checked at the identity provider: HOOKD_OIDC_RECHECK needs " +
			"HOOKD_OIDC_CLIENT_SECRET to seal refresh tokens with; a leaver keeps their session until HOOKD_SESSION_MAX_AGE")
	}
	return provider
}

// registerHeartbeat registers this replica's heartbeat, the replica of
// store, on a connection of its own: before anything takes a lease.
func (s *server) registerHeartbeat(ctx context.Context, store *queue.Store) error {
	beatPool, err := openBeatPool(ctx, s.cfg)
	if err != nil {
		return err
	}
	s.closers = append(s.closers, func() { closePool(beatPool, "heartbeat", poolCloseTimeout, s.logger) })
	s.heartbeat = worker.NewHeartbeat(queue.New(beatPool, queue.WithReplica(store.Replica())), s.logger)
	return s.heartbeat.Register(ctx)
}

// observe makes what records the pipeline's facts: the Prometheus
// registry, with the Go, process and queue collectors; the metrics, which
// also count the charts' activity; and the rejection log. The activity's
// and the log's writers are flushes: they run until everything else has
// stopped.
func (s *server) observe(st stores) (*prometheus.Registry, *telemetry.Metrics, *telemetry.RejectionLog) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		telemetry.NewQueueCollector(s.logger, st.queue, telemetry.DefaultQueueStatsMaxAge))
	activity := telemetry.NewActivity(st.counts, s.logger, telemetry.ActivityConfig{})
	rejections := telemetry.NewRejectionLog(st.refused, s.logger, telemetry.RejectionLogConfig{Secrets: config.EndpointSecrets(s.cfg.Endpoints)})
	s.flushes = append(s.flushes, activity.Run, rejections.Run)
	return reg, telemetry.NewMetrics(reg, activity), rejections
}

// pipeline is what build wires that the HTTP handler serves.
type pipeline struct {
	receiver   *receiver.Receiver
	metrics    *telemetry.Metrics
	reg        *prometheus.Registry
	rejections *telemetry.RejectionLog
	reconciler *reconcile.Reconciler
	stripe     *stripeapi.Client
	pace       *worker.Pace
	replayer   *worker.Replayer
	tracer     *tracing.Tracer
	oidc       *idp.Provider
	alert      func(context.Context, string)
	// actions are shared by the dashboard and /api/v1, whose options api
	// is.
	actions *actions.Actions
	api     api.Options
}

// newHandler is hookd's HTTP handler: the receiver, the dashboard and the
// operations endpoints over the stores and the pipeline.
func newHandler(cfg config.Config, logger *slog.Logger, st stores, p pipeline) http.Handler {
	// /metrics tells queue depths, traffic and failures: on the main
	// address whoever reaches the receiver could read them, so it is there
	// only when asked for.
	var mainGatherer prometheus.Gatherer
	if cfg.MetricsPublic {
		mainGatherer = p.reg
	}
	// /api/v1 is served here unless HOOKD_API_ADDR gives it a listener
	// of its own (listen).
	var apiHere *api.Options
	if cfg.APIAddr == "" {
		apiHere = &p.api
	}
	return web.NewServer(web.Options{
		Logger:    logger,
		Actions:   p.actions,
		API:       apiHere,
		Endpoints: cfg.Endpoints,
		Stores: web.Stores{Queue: st.queue, Reads: st.reads, Accounts: st.accounts, Tokens: st.tokens, Audit: st.audit,
			Activity: st.pageCounts, Rejections: st.pageRefusals, Ungenerated: st.pageUngenerated},
		Receiver:         p.receiver,
		Metrics:          p.metrics,
		Gatherer:         mainGatherer,
		MaxBody:          cfg.MaxBody,
		MaxBodyMemory:    cfg.MaxBodyMemory,
		Sessions:         st.sessions,
		SecureCookies:    cfg.SecureCookies,
		TrustedProxies:   cfg.TrustedProxies,
		MarkerRetention:  cfg.MarkerRetention,
		PayloadRetention: cfg.PayloadRetention,
		RetryInterval:    cfg.RetryInterval,
		Rejections:       p.rejections,
		Reconciler:       p.reconciler,
		Stripe:           p.stripe,
		Control:          st.control,
		Pace:             p.pace,
		Replayer:         p.replayer,
		// Who may sign in, and how: the identity provider, passwords and
		// how long a session lasts.
		OIDC:              p.oidc,
		PublicURL:         cfg.PublicURL,
		OIDCRecheck:       cfg.OIDCRecheck,
		Alert:             p.alert,
		Tracer:            p.tracer,
		TraceURL:          cfg.TraceURL,
		PasswordSignInOff: cfg.PasswordSignInOff,
		EmergencyAdmin:    cfg.EmergencyAdmin,
		SessionMaxAge:     cfg.SessionMaxAge,
	})
}

// stores are what build opens on the database.
type stores struct {
	queue *queue.Store
	// reads, pageCounts and pageRefusals are what the dashboard's pages
	// read, on its own pool under its time limit; counts and refused are
	// what telemetry writes and the pruner prunes.
	reads        *queue.Store
	pageCounts   *activity.Store
	pageRefusals *rejections.Store
	counts       *activity.Store
	refused      *rejections.Store
	accounts     *accounts.Store
	audit        *audit.Log
	sessions     *pgxstore.PostgresStore
	// control is this replica's copy of delivery_control, which the
	// queue's outcomes tell at once when the breaker opens or closes.
	control *worker.Control
	// ungenerated keeps Stripe's event-generation-failure notices;
	// pageUngenerated is the failures page's read of them.
	ungenerated     *ungenerated.Store
	pageUngenerated *ungenerated.Store
	// tokens authenticate /api/v1's requests; idempotency keeps its
	// answers to Idempotency-Keys.
	tokens      *tokens.Store
	idempotency *idempotency.Store
}

// openStores opens and migrates the database, opens the dashboard's pool,
// and makes the admin account HOOKD_ADMIN_EMAIL asks for.
func (s *server) openStores(ctx context.Context) (stores, error) {
	cfg, logger := s.cfg, s.logger
	pool, applied, err := openMigrated(ctx, cfg, traced(s.tracer))
	if err != nil {
		return stores{}, err
	}
	s.closers = append(s.closers, func() { closePool(pool, "main", poolCloseTimeout, logger) })
	for _, name := range applied {
		logger.Info("migration applied", "file", name)
	}
	storeOpts := storeOptions(cfg, logger)
	// The dashboard's reads have a pool of their own and a time limit, so
	// people loading pages, however many and however slow their filters,
	// never hold the connections deliveries need.
	dashPool, err := openDashboardPool(ctx, cfg, traced(s.tracer))
	if err != nil {
		return stores{}, err
	}
	s.closers = append(s.closers, func() { closePool(dashPool, "dashboard", poolCloseTimeout, logger) })
	pageReads := queue.TimedReads(dashPool, cfg.DashboardTimeout)
	// The queue's outcomes tell control what the breaker's count did;
	// control reads delivery_control on the same pool.
	control := worker.NewControl(queue.New(pool), logger)
	queueOpts := append(slices.Clone(storeOpts), queue.WithReplica(uuid.New()))
	if fanout.On(cfg) {
		// Each destination has a breaker of its own: one app down holds
		// its deliveries alone.
		queueOpts = append(queueOpts, queue.WithDestinationBreakers(int(cfg.BreakerFailures), cfg.BreakerProbe, control))
	} else {
		queueOpts = append(queueOpts, queue.WithBreaker(int(cfg.BreakerFailures), cfg.BreakerProbe, control))
	}
	st := stores{
		// Each start of hookd serve is a replica of its own, whose
		// heartbeat keeps its leases live.
		queue:           queue.New(pool, queueOpts...),
		reads:           queue.NewReader(dashPool, cfg.DashboardTimeout, storeOpts...),
		pageCounts:      activity.New(pageReads),
		pageRefusals:    rejections.New(pageReads),
		counts:          activity.New(pool),
		refused:         rejections.New(pool),
		accounts:        accounts.New(pool),
		audit:           audit.New(pageReads),
		ungenerated:     ungenerated.New(pool),
		pageUngenerated: ungenerated.New(pageReads),
		// The pruner deletes expired sessions; pgxstore's own cleanup
		// goroutine logs through the standard logger and races its own
		// StopCleanup.
		sessions:    pgxstore.NewWithCleanupInterval(pool, 0),
		tokens:      tokens.New(pool),
		idempotency: idempotency.New(pool),
	}
	st.control = control
	if err := ensureAdmin(ctx, cfg, st.accounts, logger); err != nil {
		return stores{}, err
	}
	return st, nil
}

// ensureAdmin creates HOOKD_ADMIN_EMAIL's account when it does not exist.
func ensureAdmin(ctx context.Context, cfg config.Config, accts *accounts.Store, logger *slog.Logger) error {
	if cfg.AdminEmail == "" {
		return nil
	}
	if cfg.AdminPassword == "" {
		return errors.New("HOOKD_ADMIN_PASSWORD: required with HOOKD_ADMIN_EMAIL")
	}
	u, created, err := accts.EnsureAdmin(ctx, cfg.AdminEmail, cfg.AdminPassword.Reveal())
	if err != nil {
		return fmt.Errorf("HOOKD_ADMIN_EMAIL: %v", err)
	}
	if created {
		logger.Info("dashboard admin created", "email", u.Email)
	} else {
		logger.Info("HOOKD_ADMIN_EMAIL's account exists: its password and role are left as they are, "+
			"HOOKD_ADMIN_PASSWORD is not applied", "email", u.Email, "role", u.Role)
	}
	return nil
}

// listen opens the listen address, and the metrics and API addresses
// when there are.
func (s *server) listen(handler http.Handler, reg *prometheus.Registry, apiOpts api.Options) error {
	cfg, logger := s.cfg, s.logger
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("HOOKD_ADDR: %v", err)
	}
	s.listeners = append(s.listeners, listener{newHTTPServer(cfg, handler, logger), ln})
	logger.Info("hookd listening", "addr", ln.Addr().String(), "version", buildVersion())
	if cfg.MetricsAddr != "" {
		mln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("HOOKD_METRICS_ADDR: %v; set it to a free address, or to off", err)
		}
		s.listeners = append(s.listeners, listener{newHTTPServer(cfg, web.NewMetricsHandler(reg), logger), mln})
		logger.Info("metrics listening", "addr", mln.Addr().String())
	}
	if cfg.APIAddr != "" {
		aln, err := net.Listen("tcp", cfg.APIAddr)
		if err != nil {
			return fmt.Errorf("HOOKD_API_ADDR: %v; set it to a free address, or unset it to serve /api/v1 on HOOKD_ADDR", err)
		}
		s.listeners = append(s.listeners, listener{newHTTPServer(cfg, api.NewHandler(apiOpts), logger), aln})
		logger.Info("api listening", "addr", aln.Addr().String(), "path", api.Prefix)
	}
	switch {
	case cfg.MetricsPublic:
		logger.Info("metrics on the listen address too, as HOOKD_METRICS_PUBLIC is true", "addr", ln.Addr().String())
	case cfg.MetricsAddr == "":
		logger.Info("metrics not served: HOOKD_METRICS_ADDR is off and HOOKD_METRICS_PUBLIC is false")
	}
	return nil
}

// run serves and runs every loop in one errgroup until ctx is cancelled or
// one of them fails, then stops them all with stop.
func (s *server) run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	// working counts what must have stopped before the last flush.
	var working sync.WaitGroup
	work := func(f func() error) {
		working.Add(1)
		g.Go(func() error {
			defer working.Done()
			return f()
		})
	}
	for _, l := range s.listeners {
		work(func() error {
			if err := l.srv.Serve(l.ln); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("http server on %s: %w", l.ln.Addr(), err)
			}
			return nil
		})
	}
	for _, loop := range s.loops {
		work(func() error { return loop(gctx) })
	}
	flushCtx, stopFlushing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopFlushing()
	for _, flush := range s.flushes {
		// A flush's failure is logged by the flush, and must not stop the
		// counting of what is still running.
		g.Go(func() error { _ = flush(flushCtx); return nil })
	}
	// The heartbeat, too, goes on until nothing holds a lease.
	g.Go(func() error { return s.heartbeat.Run(flushCtx) })
	g.Go(func() error {
		<-gctx.Done()
		return s.stop(working.Wait, stopFlushing)
	})
	return g.Wait()
}

// stop is hookd serve's one stop order, once run's context is done: the
// loops have been told already and stop claiming; the HTTP servers take no
// new requests and finish the ones in flight within
// HOOKD_SHUTDOWN_TIMEOUT; and once everything that counts has stopped, the
// counts and the rejection log are flushed a last time, so the last flush
// holds the last deliveries and retries, and the heartbeat ends, removing
// this replica.
func (s *server) stop(waitWorking, stopFlushing func()) error {
	s.logger.Info("shutting down: no new requests, finishing the ones in flight")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	var err error
	for _, l := range s.listeners {
		if err = l.srv.Shutdown(shutdownCtx); err != nil {
			err = fmt.Errorf("http shutdown: %w", err)
			break
		}
	}
	waitWorking()
	stopFlushing()
	return err
}

// maxHeaderBytes bounds a request's header. net/http's default, 1 MiB,
// is held per connection for as long as the header takes to arrive, outside
// HOOKD_MAX_BODY_MEMORY: 2,000 connections sending a header each and then
// nothing held 2 GiB. Stripe's headers are under 2 KB and a browser's,
// cookies included, well under this; a longer one is answered 431.
const maxHeaderBytes = 32 << 10

// newHTTPServer returns a server for handler whose timeouts keep a slow or
// silent client from holding a connection and its goroutine for long, and
// whose header bound keeps it from holding much memory meanwhile.
func newHTTPServer(cfg config.Config, handler http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           handler,
		MaxHeaderBytes:    maxHeaderBytes,
		ReadHeaderTimeout: 10 * time.Second,
		// The whole request, body included: a webhook body or a dashboard
		// form trickled in byte by byte is cut off after this, and gives
		// back what it held of HOOKD_MAX_BODY_MEMORY.
		ReadTimeout: 30 * time.Second,
		// From the end of the request's header to the end of the answer,
		// so it covers the handler: the longest waits HOOKD_FORWARD_TIMEOUT
		// for the app before it answers.
		WriteTimeout: cfg.ForwardTimeout + time.Minute,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// newProcessor returns the processor HOOKD_PROCESSOR chooses. Forwarding
// without a URL is refused rather than quietly discarding: every event would
// be answered 200 and marked processed, and Stripe would never redeliver it.
func newProcessor(cfg config.Config, logger *slog.Logger, tracer *tracing.Tracer) (worker.Processor, error) {
	if cfg.Processor == config.ProcessorDiscard {
		logger.Warn("HOOKD_PROCESSOR=discard: events are accepted and marked processed without being processed; for trials only")
		if cfg.ForwardURL != "" {
			logger.Warn("HOOKD_FORWARD_URL is ignored with HOOKD_PROCESSOR=discard")
		}
		return worker.Discard, nil
	}
	if fanout.On(cfg) {
		return nil, nil // fanout.New makes the destinations' processors
	}
	if cfg.ForwardURL == "" {
		return nil, errors.New("HOOKD_FORWARD_URL: not set, and the forward processor (the default) needs it: " +
			"set it to your app's webhook URL, or set HOOKD_PROCESSOR=discard to accept events without processing them (trials only)")
	}
	f, err := worker.NewForwarder(cfg.ForwardURL, cfg.ForwardSecret.Reveal())
	if err != nil {
		return nil, fmt.Errorf("HOOKD_FORWARD_SECRET: %v", err)
	}
	f.KeepConns(int(cfg.RetryConcurrency+cfg.InlineConcurrency) + worker.DefaultReplayConcurrency)
	f.CloseIdleAfter(cfg.ForwardIdleTimeout)
	f.Traced(tracer)
	return f, nil
}

// storeOptions turns the demo's settings into the queue's options, saying
// loudly when the demo backoff is on.
func storeOptions(cfg config.Config, logger *slog.Logger) []queue.Option {
	if !cfg.DemoBackoff {
		return nil
	}
	logger.Warn("HOOKD_DEMO_BACKOFF is on: retries wait seconds, not hours, so events go dead within a minute; never set it in production")
	return []queue.Option{queue.WithDemoBackoff()}
}
