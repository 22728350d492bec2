package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/accounts"
	"github.com/hookd/hookd/queue/activity"
	"github.com/hookd/hookd/queue/audit"
	"github.com/hookd/hookd/queue/rejections"
	"github.com/hookd/hookd/web"
	"github.com/hookd/hookd/worker"
	"github.com/hookd/hookd/worker/receiver"
	"github.com/hookd/hookd/worker/telemetry"
)

// serve runs `hookd serve` until ctx is cancelled: it wires the stores, the
// receiver, the loops and the HTTP servers together, then shuts them down
// in order, letting work in flight finish within HOOKD_SHUTDOWN_TIMEOUT.
func serve(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	proc, err := newProcessor(cfg, logger)
	if err != nil {
		return err
	}

	pool, applied, err := openMigrated(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	for _, name := range applied {
		logger.Info("migration applied", "file", name)
	}
	storeOpts := storeOptions(cfg, logger)
	store := queue.New(pool, storeOpts...)
	// The dashboard's reads have a pool of their own and a time limit, so
	// people loading pages, however many and however slow their filters,
	// never hold the connections deliveries need.
	dashPool, err := openDashboardPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer dashPool.Close()
	reads := queue.NewReader(dashPool, cfg.DashboardTimeout, storeOpts...)
	pageReads := queue.TimedReads(dashPool, cfg.DashboardTimeout)
	accts := accounts.New(pool)
	counts, refused := activity.New(pool), rejections.New(pool)
	pageCounts, pageRefusals := activity.New(pageReads), rejections.New(pageReads)
	if cfg.AdminEmail != "" {
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
	}
	// The pruner deletes expired sessions; pgxstore's own cleanup goroutine
	// logs through the standard logger and races its own StopCleanup.
	sessions := pgxstore.NewWithCleanupInterval(pool, 0)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		telemetry.NewQueueCollector(logger, store, telemetry.DefaultQueueStatsMaxAge))
	activity := telemetry.NewActivity(counts, logger, telemetry.ActivityConfig{})
	metrics := telemetry.NewMetrics(reg, activity)
	receiver := receiver.New(store, logger, receiver.Config{
		Secrets: reveal(cfg.StripeSecrets), Processor: proc, ProcessTimeout: cfg.ForwardTimeout, Metrics: metrics,
		InlineConcurrency: int(cfg.InlineConcurrency)})
	retrier := worker.NewRetrier(store, logger, worker.RetrierConfig{
		Interval: cfg.RetryInterval, BatchSize: int(cfg.RetryBatch), Concurrency: int(cfg.RetryConcurrency),
		ProcessTimeout: cfg.ForwardTimeout, StopTimeout: cfg.ShutdownTimeout, Processor: proc, Metrics: metrics})
	pruner := worker.NewPruner(store, accts, counts, refused, logger, worker.PrunerConfig{Retention: cfg.MarkerRetention, Metrics: metrics})
	rejections := telemetry.NewRejectionLog(refused, logger, telemetry.RejectionLogConfig{Secrets: reveal(cfg.StripeSecrets)})
	reconciler := newReconciler(cfg, store, receiver, logger)

	// /metrics tells queue depths, traffic and failures: on the main
	// address whoever reaches the receiver could read them, so it is there
	// only when asked for.
	var mainGatherer prometheus.Gatherer
	if cfg.MetricsPublic {
		mainGatherer = reg
	}
	handler := web.NewServer(web.Options{
		Logger: logger,
		Stores: web.Stores{Queue: store, Reads: reads, Accounts: accts, Audit: audit.New(dashPool),
			Activity: pageCounts, Rejections: pageRefusals},
		Receiver:        receiver,
		Metrics:         metrics,
		Gatherer:        mainGatherer,
		MaxBody:         cfg.MaxBody,
		MaxBodyMemory:   cfg.MaxBodyMemory,
		Sessions:        sessions,
		SecureCookies:   cfg.SecureCookies,
		TrustedProxies:  cfg.TrustedProxies,
		MarkerRetention: cfg.MarkerRetention,
		RetryInterval:   cfg.RetryInterval,
		Rejections:      rejections,
		Reconciler:      reconciler,
	})

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("HOOKD_ADDR: %v", err)
	}
	type listener struct {
		srv *http.Server
		ln  net.Listener
	}
	listeners := []listener{{newHTTPServer(cfg, handler, logger), ln}}
	logger.Info("hookd listening", "addr", ln.Addr().String(), "version", buildVersion())
	if cfg.MetricsAddr != "" {
		mln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			ln.Close()
			return fmt.Errorf("HOOKD_METRICS_ADDR: %v; set it to a free address, or to off", err)
		}
		listeners = append(listeners, listener{newHTTPServer(cfg, web.NewMetricsHandler(reg), logger), mln})
		logger.Info("metrics listening", "addr", mln.Addr().String())
	}
	switch {
	case cfg.MetricsPublic:
		logger.Info("metrics on the listen address too, as HOOKD_METRICS_PUBLIC is true", "addr", ln.Addr().String())
	case cfg.MetricsAddr == "":
		logger.Info("metrics not served: HOOKD_METRICS_ADDR is off and HOOKD_METRICS_PUBLIC is false")
	}

	g, gctx := errgroup.WithContext(ctx)
	for _, l := range listeners {
		g.Go(func() error {
			if err := l.srv.Serve(l.ln); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("http server on %s: %w", l.ln.Addr(), err)
			}
			return nil
		})
	}
	g.Go(func() error { return retrier.Run(gctx) })
	g.Go(func() error { return pruner.Run(gctx) })
	if cfg.AlertURL != "" {
		alerter := worker.NewAlerter(store, logger, worker.AlerterConfig{
			URL: cfg.AlertURL.Reveal(), PublicURL: cfg.PublicURL, PendingAge: cfg.AlertPendingAge,
			StalledAfter: worker.RetrierStalledAfter(cfg.RetryInterval)})
		g.Go(func() error { return alerter.Run(gctx) })
	}
	// The counts are flushed until everything that counts has stopped, so
	// the last flush holds the last deliveries and retries.
	flushCtx, stopFlushing := context.WithCancel(context.WithoutCancel(ctx))
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		_ = activity.Run(flushCtx)
	}()
	rejectionsFlushed := make(chan struct{})
	go func() {
		defer close(rejectionsFlushed)
		_ = rejections.Run(flushCtx)
	}()
	defer func() { stopFlushing(); <-flushed; <-rejectionsFlushed }()
	if reconciler != nil {
		g.Go(func() error { return reconciler.Run(gctx) })
	}
	g.Go(func() error {
		<-gctx.Done()
		logger.Info("shutting down: no new requests, finishing the ones in flight")
		shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		for _, l := range listeners {
			if err := l.srv.Shutdown(shutdownCtx); err != nil {
				return fmt.Errorf("http shutdown: %w", err)
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return err
	}
	logger.Info("stopped")
	return nil
}

// newHTTPServer returns a server for handler whose timeouts keep a slow or
// silent client from holding a connection and its goroutine for long.
func newHTTPServer(cfg Config, handler http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           handler,
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
func newProcessor(cfg Config, logger *slog.Logger) (worker.Processor, error) {
	if cfg.Processor == processorDiscard {
		logger.Warn("HOOKD_PROCESSOR=discard: events are accepted and marked processed without being processed; for trials only")
		if cfg.ForwardURL != "" {
			logger.Warn("HOOKD_FORWARD_URL is ignored with HOOKD_PROCESSOR=discard")
		}
		return worker.Discard, nil
	}
	if cfg.ForwardURL == "" {
		return nil, errors.New("HOOKD_FORWARD_URL: not set, and the forward processor (the default) needs it: " +
			"set it to your app's webhook URL, or set HOOKD_PROCESSOR=discard to accept events without processing them (trials only)")
	}
	f, err := worker.NewForwarder(cfg.ForwardURL, cfg.ForwardSecret.Reveal())
	if err != nil {
		return nil, fmt.Errorf("HOOKD_FORWARD_SECRET: %v", err)
	}
	return f, nil
}

// storeOptions turns the demo's settings into the queue's options, saying
// loudly when the demo backoff is on.
func storeOptions(cfg Config, logger *slog.Logger) []queue.Option {
	if !cfg.DemoBackoff {
		return nil
	}
	logger.Warn("HOOKD_DEMO_BACKOFF is on: retries wait seconds, not hours, so events go dead within a minute; never set it in production")
	return []queue.Option{queue.WithDemoBackoff()}
}
