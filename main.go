// Command hookd receives Stripe webhooks, makes sure each is processed once,
// keeps the ones that fail on a durable retry queue in PostgreSQL, and shows
// support staff what failed.
//
// Usage:
//
//	hookd [serve]   run the receiver, the retry loop, the pruner and the dashboard
//	hookd migrate   apply the database migrations and exit
//	hookd send-test-event [-n 50] [-type invoice.paid] [-url http://localhost:8080/webhooks/stripe]
//	hookd user add EMAIL [-role viewer|operator|admin]
//	                add a dashboard account; the password is read from the terminal or stdin
//	hookd user passwd EMAIL
//	                set an account's password, read the same way
//	hookd demo-app  run the app `make run` forwards to, which fails some events on purpose
//	hookd doctor    check the configuration end to end, one line per check
//	hookd reconcile [-since 72h] [-dry-run] [-event evt_...]
//	                recover the events Stripe could not deliver, from its Events API
//	hookd version   print the version
//
// Every setting comes from an environment variable, overridable by a flag;
// `hookd serve -h` lists them.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	"golang.org/x/term"

	"github.com/hookd/hookd/migrations"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/accounts"
	"github.com/hookd/hookd/queue/audit"
	"github.com/hookd/hookd/web"
	"github.com/hookd/hookd/worker"
	"github.com/hookd/hookd/worker/forwardsig"
	"github.com/hookd/hookd/worker/reconcile"
	"github.com/hookd/hookd/worker/stripeapi"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "hookd:", err)
		}
		os.Exit(2)
	}
}

// run is the whole program; main only gives it the process's environment, so
// tests can run it with their own.
func run(ctx context.Context, args []string, getenv func(string) string,
	stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && !isFlag(args[0]) {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		cfg, err := parseConfig("serve", args, getenv, stderr)
		if err != nil {
			return err
		}
		return serve(ctx, cfg, stdout, stderr)
	case "migrate":
		cfg, err := parseConfig("migrate", args, getenv, stderr)
		if err != nil {
			return err
		}
		return migrate(ctx, cfg, stdout)
	case "send-test-event":
		return sendTestEvent(ctx, args, getenv, stdout, stderr)
	case "demo-app":
		return demoApp(ctx, args, getenv, stdout, stderr)
	case "doctor":
		return doctorCommand(ctx, args, getenv, stdout, stderr)
	case "user":
		return userCommand(ctx, args, getenv, stdin, stdout, stderr)
	case "reconcile":
		return reconcileCommand(ctx, args, getenv, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "hookd", buildVersion())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		return fmt.Errorf("unknown command %q\n%s", cmd, usage)
	}
}

const usage = `Usage: hookd <command> [flags]

Commands:
  serve            run the webhook receiver, retry loop, pruner and dashboard (default)
  migrate          apply the database migrations and exit
  send-test-event  post signed sample Stripe events to a receiver (-n 50: a realistic mix)
  user add EMAIL [-role viewer|operator|admin]
                   add a dashboard account (the password is read from the terminal or stdin)
  user passwd EMAIL
                   set an account's password, read the same way
  demo-app         run the demo app make run forwards to, which fails some events on purpose
  doctor           check the configuration end to end: database, secret, app, timeouts, Stripe, clock
  reconcile [-since 72h] [-dry-run] [-event evt_...]
                   run the events Stripe could not deliver through the pipeline,
                   read from its Events API (needs STRIPE_API_KEY)
  version          print the version

Run "hookd <command> -h" for a command's flags.
`

func isFlag(arg string) bool { return len(arg) > 0 && arg[0] == '-' }

// newFlagSet returns the flag set of `hookd cmd`, whose -h prints a usage
// line, about, and the flags.
func newFlagSet(cmd, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("hookd "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: hookd %s [flags]\n\n%s\n\n", cmd, about)
		fs.PrintDefaults()
	}
	return fs
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
		if info.Main.Version != "" && info.Main.Version != "(devel)" {
			return info.Main.Version
		}
	}
	return "dev"
}

// openPool connects to the database and checks it answers: pgxpool.New does
// not connect, and a wrong DATABASE_URL should stop the program at start.
func openPool(ctx context.Context, cfg Config) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %v", err)
	}
	// Each webhook being processed holds a connection, since its transaction
	// holds the event's lock; pgxpool's default of max(4, CPUs) would cap
	// concurrent deliveries at 4. pool_max_conns in DATABASE_URL still wins.
	if !strings.Contains(cfg.DatabaseURL, "pool_max_conns") {
		pcfg.MaxConns = defaultMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %v", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database at %s: %v", describeDB(pcfg), err)
	}
	return pool, nil
}

// defaultMaxConns leaves room for three replicas under PostgreSQL's default
// max_connections of 100.
const defaultMaxConns = 30

// inlineConcurrency is how many deliveries may be processed while Stripe
// waits, each holding a pooled connection for as long as the app takes. The
// default is half the pool: the other half stays free for what must keep
// answering while the app is slow, namely the deliveries deferred to the
// queue (a few milliseconds each), the retry loop's claim and batch, the
// pruner, the dashboard and /readyz. A setting that leaves no connection
// free is refused.
func inlineConcurrency(configured int64, maxConns int32) (int, error) {
	if configured == 0 {
		return max(1, int(maxConns)/2), nil
	}
	if configured >= int64(maxConns) {
		return 0, fmt.Errorf("HOOKD_INLINE_CONCURRENCY: must be below the database pool's %d connections, "+
			"so a slow app leaves some for the dashboard, the retry loop and /readyz (got %d)", maxConns, configured)
	}
	return int(configured), nil
}

func describeDB(c *pgxpool.Config) string {
	return fmt.Sprintf("%s:%d/%s as %s", c.ConnConfig.Host, c.ConnConfig.Port, c.ConnConfig.Database, c.ConnConfig.User)
}

// openMigrated opens the pool and applies the pending migrations, returning
// the files it applied: every command that touches the database starts so.
func openMigrated(ctx context.Context, cfg Config) (*pgxpool.Pool, []string, error) {
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	applied, err := migrations.Up(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return pool, applied, nil
}

func migrate(ctx context.Context, cfg Config, stdout io.Writer) error {
	pool, applied, err := openMigrated(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if len(applied) == 0 {
		fmt.Fprintln(stdout, "migrate: schema is up to date")
	}
	for _, name := range applied {
		fmt.Fprintln(stdout, "migrate: applied", name)
	}
	return nil
}

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
	inline, err := inlineConcurrency(cfg.InlineConcurrency, pool.Config().MaxConns)
	if err != nil {
		return err
	}
	store := queue.New(pool, storeOptions(cfg, logger)...)
	accts := accounts.New(pool)
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
		web.NewQueueCollector(logger, store, web.DefaultQueueStatsMaxAge))
	activity := worker.NewActivity(store, logger, worker.ActivityConfig{})
	metrics := worker.NewMetrics(reg, activity)
	receiver := worker.NewReceiver(store, logger, worker.ReceiverConfig{
		Secrets: reveal(cfg.StripeSecrets), Processor: proc, ProcessTimeout: cfg.ForwardTimeout, Metrics: metrics,
		InlineConcurrency: inline})
	retrier := worker.NewRetrier(store, logger, worker.RetrierConfig{
		Interval: cfg.RetryInterval, BatchSize: int(cfg.RetryBatch), Concurrency: int(cfg.RetryConcurrency),
		ProcessTimeout: cfg.ForwardTimeout, StopTimeout: cfg.ShutdownTimeout, Processor: proc, Metrics: metrics})
	pruner := worker.NewPruner(store, accts, logger, worker.PrunerConfig{Retention: cfg.MarkerRetention, Metrics: metrics})
	rejections := worker.NewRejectionLog(store, logger, worker.RejectionLogConfig{Secrets: reveal(cfg.StripeSecrets)})
	reconciler := newReconciler(cfg, store, receiver, logger)

	// With a listener of its own, /metrics is not on the main address,
	// where whoever reaches the receiver could scrape it.
	var mainGatherer prometheus.Gatherer = reg
	if cfg.MetricsAddr != "" {
		mainGatherer = nil
	}
	handler := web.NewServer(web.Options{
		Logger:          logger,
		Stores:          web.Stores{Queue: store, Accounts: accts, Audit: audit.New(pool)},
		Receiver:        receiver,
		Metrics:         metrics,
		Gatherer:        mainGatherer,
		MaxBody:         cfg.MaxBody,
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
			return fmt.Errorf("HOOKD_METRICS_ADDR: %v", err)
		}
		listeners = append(listeners, listener{newHTTPServer(cfg, web.NewMetricsHandler(reg), logger), mln})
		logger.Info("metrics listening", "addr", mln.Addr().String())
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
		// form trickled in byte by byte is cut off after this.
		ReadTimeout: 30 * time.Second,
		// From the end of the request's header to the end of the answer,
		// so it covers the handler: the longest waits HOOKD_FORWARD_TIMEOUT
		// for the app before it answers.
		WriteTimeout: cfg.ForwardTimeout + time.Minute,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// Config is every setting of hookd, parsed once, here, from the environment
// and the command line; the packages get what they need as parameters.
type Config struct {
	DatabaseURL      string
	Addr             string
	MetricsAddr      string
	StripeSecrets    []Secret
	Processor        string
	ForwardURL       string
	ForwardSecret    Secret
	ForwardTimeout   time.Duration
	RetryInterval    time.Duration
	RetryBatch       int64
	RetryConcurrency int64
	MarkerRetention  time.Duration
	AdminEmail       string
	AdminPassword    Secret
	SecureCookies    bool
	TrustedProxies   []*net.IPNet
	MaxBody          int64
	ShutdownTimeout  time.Duration
	LogLevel         slog.Level
	AlertURL         Secret
	AlertPendingAge  time.Duration
	PublicURL        string
	DemoBackoff      bool
	StripeAPIURL     string
	// Reconciliation with Stripe's Events API: off without the key and the
	// endpoint id.
	StripeAPIKey      Secret
	StripeEndpointID  string
	ReconcileInterval time.Duration
	ReconcileWindow   time.Duration

	// InlineConcurrency is 0 unless set: serve then derives it from the
	// pool size.
	InlineConcurrency int64
}

// Secret is a configuration value that must never reach a log or an error.
type Secret string

// LogValue redacts the secret in slog output.
func (Secret) LogValue() slog.Value { return slog.StringValue("REDACTED") }

// String redacts the secret when formatted with %v or %s.
func (Secret) String() string { return "REDACTED" }

// Reveal returns the secret's value, for the one place that uses it.
func (s Secret) Reveal() string { return string(s) }

// setting is one configuration value: its flag, its environment variable, its
// built-in default and how to store it in the Config.
//
// Where a default lives: a setting that only main uses (the listen address,
// the shutdown timeout, the log level) has its default here, as a literal. A
// setting that configures a package has its default there, as an exported
// DefaultX constant the package also falls back to when the field is zero,
// and the table renders that constant: so `hookd serve -h`, a test that
// builds a worker with a zero config, and a deployment without the variable
// all get the same value, from one line.
type setting struct {
	flag, env, def, usage string
	// secret settings show no value in -h and never echo the value in errors.
	secret bool
	// boolean settings are flags that need no value: -secure-cookies.
	boolean bool
	set     func(c *Config, v string) error
}

var settings = []setting{
	{flag: "database-url", env: "DATABASE_URL", usage: "PostgreSQL connection string (default: libpq's PG* variables)", secret: true,
		set: func(c *Config, v string) error { c.DatabaseURL = v; return nil }},
	{flag: "addr", env: "HOOKD_ADDR", def: ":8080", usage: "listen address",
		set: func(c *Config, v string) error { c.Addr = v; return nil }},
	{flag: "metrics-addr", env: "HOOKD_METRICS_ADDR", usage: "listen address serving /metrics alone (none: /metrics is on the listen address)",
		set: func(c *Config, v string) error { c.MetricsAddr = v; return nil }},
	{flag: "stripe-webhook-secret", env: "STRIPE_WEBHOOK_SECRET", usage: "Stripe signing secrets whsec_..., comma-separated to roll them (none: the receiver answers 503)", secret: true,
		set: func(c *Config, v string) error { return parseSecrets(&c.StripeSecrets, v) }},
	{flag: "processor", env: "HOOKD_PROCESSOR", def: processorForward, usage: "forward: POST each event to the forward URL; discard: accept and mark processed without processing (trials only)",
		set: func(c *Config, v string) error { c.Processor = v; return checkProcessor(v) }},
	{flag: "forward-url", env: "HOOKD_FORWARD_URL", usage: "where the forward processor POSTs each event (required with -processor forward)",
		set: func(c *Config, v string) error { c.ForwardURL = v; return checkURL(v) }},
	{flag: "forward-secret", env: "HOOKD_FORWARD_SECRET", usage: "whsec_<base64> key for the Standard Webhooks signature on forwarded events (none: unsigned)", secret: true,
		set: func(c *Config, v string) error { c.ForwardSecret = Secret(v); return checkForwardSecret(v) }},
	{flag: "forward-timeout", env: "HOOKD_FORWARD_TIMEOUT", def: durationText(worker.DefaultProcessTimeout), usage: "how long the processor waits for the forward URL",
		set: func(c *Config, v string) error { return parsePositiveDuration(&c.ForwardTimeout, v) }},
	{flag: "retry-interval", env: "HOOKD_RETRY_INTERVAL", def: durationText(worker.DefaultRetryInterval), usage: "how often the retry loop looks for due events when idle",
		set: func(c *Config, v string) error { return parsePositiveDuration(&c.RetryInterval, v) }},
	{flag: "marker-retention", env: "HOOKD_MARKER_RETENTION", def: durationText(worker.DefaultMarkerRetention), usage: "age after which dedup markers are pruned (Stripe redelivers for up to 3 days)",
		set: func(c *Config, v string) error { return parseMarkerRetention(&c.MarkerRetention, v) }},
	{flag: "admin-email", env: "HOOKD_ADMIN_EMAIL", usage: "dashboard admin account created at start when no account has this email (never changed afterwards)",
		set: func(c *Config, v string) error { c.AdminEmail = v; return nil }},
	{flag: "admin-password", env: "HOOKD_ADMIN_PASSWORD", usage: "password of that account", secret: true,
		set: func(c *Config, v string) error { c.AdminPassword = Secret(v); return nil }},
	{flag: "secure-cookies", env: "HOOKD_SECURE_COOKIES", def: "false", boolean: true, usage: "mark the session cookie Secure on plain HTTP too (set when TLS ends at a reverse proxy)",
		set: func(c *Config, v string) error { return parseBool(&c.SecureCookies, v) }},
	{flag: "trusted-proxies", env: "HOOKD_TRUSTED_PROXIES", usage: "comma-separated CIDRs of reverse proxies whose X-Forwarded-For is believed (none: the connection's address is the client's)",
		set: func(c *Config, v string) error { return parseCIDRs(&c.TrustedProxies, v) }},
	{flag: "max-body", env: "HOOKD_MAX_BODY", def: strconv.Itoa(web.DefaultMaxBody), usage: "largest webhook body accepted, in bytes",
		set: func(c *Config, v string) error { return parsePositiveInt(&c.MaxBody, v) }},
	{flag: "retry-batch", env: "HOOKD_RETRY_BATCH", def: strconv.Itoa(worker.DefaultRetryBatch), usage: "due events the retry loop claims and settles together (at most " + strconv.Itoa(worker.MaxRetryBatch) + ")",
		set: func(c *Config, v string) error { return parseRetryBatch(&c.RetryBatch, v) }},
	{flag: "retry-concurrency", env: "HOOKD_RETRY_CONCURRENCY", def: strconv.Itoa(worker.DefaultRetryConcurrency), usage: "processors the retry loop runs at once",
		set: func(c *Config, v string) error { return parsePositiveInt(&c.RetryConcurrency, v) }},
	{flag: "inline-concurrency", env: "HOOKD_INLINE_CONCURRENCY", usage: "deliveries processed at once while Stripe waits; past it a new event is queued at once and answered 200 (default: half the database pool's connections, 15 of the default 30)",
		set: func(c *Config, v string) error {
			if v == "" {
				return nil
			}
			return parsePositiveInt(&c.InlineConcurrency, v)
		}},
	{flag: "shutdown-timeout", env: "HOOKD_SHUTDOWN_TIMEOUT", def: "15s", usage: "how long in-flight work may take to finish on SIGTERM",
		set: func(c *Config, v string) error { return parsePositiveDuration(&c.ShutdownTimeout, v) }},
	{flag: "alert-url", env: "HOOKD_ALERT_URL", usage: "Slack-compatible incoming webhook that alerts are posted to (none: no alerts)", secret: true,
		set: func(c *Config, v string) error { c.AlertURL = Secret(v); return checkURL(v) }},
	{flag: "alert-pending-age", env: "HOOKD_ALERT_PENDING_AGE", def: durationText(worker.DefaultAlertPendingAge), usage: "alert when the oldest pending event is older than this",
		set: func(c *Config, v string) error { return parsePositiveDuration(&c.AlertPendingAge, v) }},
	{flag: "public-url", env: "HOOKD_PUBLIC_URL", usage: "the dashboard's external URL, which makes the links in alerts absolute (none: paths)",
		set: func(c *Config, v string) error { c.PublicURL = v; return checkURL(v) }},
	{flag: "log-level", env: "HOOKD_LOG_LEVEL", def: "info", usage: "debug, info, warn or error",
		set: func(c *Config, v string) error { return c.LogLevel.UnmarshalText([]byte(v)) }},
	{flag: "stripe-api-url", env: "HOOKD_STRIPE_API_URL", def: stripeapi.DefaultURL, usage: "Stripe API base URL (for an egress proxy, or tests)",
		set: func(c *Config, v string) error { c.StripeAPIURL = v; return checkURL(v) }},
	{flag: "demo-backoff", env: "HOOKD_DEMO_BACKOFF", def: "false", boolean: true, usage: "for make run's demo only: retries wait seconds, not hours (24h becomes 24s)",
		set: func(c *Config, v string) error { return parseBool(&c.DemoBackoff, v) }},
	{flag: "stripe-api-key", env: "STRIPE_API_KEY", usage: "restricted key rk_... with read access to Events and Webhook Endpoints, for reconciliation (none: no reconciliation)", secret: true,
		set: func(c *Config, v string) error { c.StripeAPIKey = Secret(v); return checkAPIKey(v) }},
	{flag: "stripe-webhook-endpoint-id", env: "STRIPE_WEBHOOK_ENDPOINT_ID", usage: "we_..., the Stripe webhook endpoint hookd serves, for reconciliation",
		set: func(c *Config, v string) error { c.StripeEndpointID = v; return checkEndpointID(v) }},
	{flag: "reconcile-interval", env: "HOOKD_RECONCILE_INTERVAL", def: "1h", usage: "how often hookd serve reconciles with Stripe's Events API, across replicas; 0 turns it off",
		set: func(c *Config, v string) error { return parseInterval(&c.ReconcileInterval, v) }},
	{flag: "reconcile-window", env: "HOOKD_RECONCILE_WINDOW", def: durationText(reconcile.DefaultWindow), usage: "how far back a scheduled reconciliation looks (at most " + durationText(reconcile.MaxWindow) + ": Stripe keeps events 30 days)",
		set: func(c *Config, v string) error { return parseReconcileWindow(&c.ReconcileWindow, v) }},
}

// parseConfig builds the Config for a command: a flag overrides its
// environment variable, which overrides the built-in default. A bad value is
// an error naming the variable and the value (unless it is a secret).
//
// extra adds a command's own flags, such as reconcile's -since.
func parseConfig(cmd string, args []string, getenv func(string) string, stderr io.Writer,
	extra ...func(*flag.FlagSet)) (Config, error) {
	fs := newFlagSet(cmd, "Each flag overrides the environment variable in brackets.", stderr)
	for _, add := range extra {
		add(fs)
	}
	values := make([]*string, len(settings))
	for i, s := range settings {
		usage := s.usage + " [$" + s.env + "]"
		if s.boolean {
			v := s.def
			values[i] = &v
			fs.BoolFunc(s.flag, usage+" (default "+s.def+")", func(arg string) error { v = arg; return nil })
			continue
		}
		values[i] = fs.String(s.flag, s.def, usage)
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })

	var cfg Config
	for i, s := range settings {
		v, from := *values[i], "-"+s.flag
		if !explicit[s.flag] {
			from = s.env
			if env := getenv(s.env); env != "" {
				v = env
			}
		}
		if err := s.set(&cfg, v); err != nil {
			if s.secret {
				return Config{}, fmt.Errorf("%s: %v", from, err)
			}
			return Config{}, fmt.Errorf("%s: %v (got %q)", from, err, v)
		}
	}
	// A retry that may run longer than its claim lasts would be claimed
	// again while it runs; the lock keeps the runs apart, but the second
	// claim only wastes a slot, so the setting is refused outright.
	if cfg.ForwardTimeout >= queue.DefaultClaimWindow {
		return Config{}, fmt.Errorf("HOOKD_FORWARD_TIMEOUT: must be shorter than the retry loop's claim window of %s (got %s)",
			queue.DefaultClaimWindow, cfg.ForwardTimeout)
	}
	if err := checkReconcile(cfg); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// durationText writes a default duration as people type it, in its largest
// whole unit: 720h, 10s, not 720h0m0s.
func durationText(d time.Duration) string {
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if d%u.unit == 0 {
			return strconv.FormatInt(int64(d/u.unit), 10) + u.name
		}
	}
	return d.String()
}

func parsePositiveDuration(dst *time.Duration, v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return errors.New("not a duration like 10s, 5m or 720h")
	}
	if d <= 0 {
		return errors.New("must be greater than zero")
	}
	*dst = d
	return nil
}

func parseMarkerRetention(dst *time.Duration, v string) error {
	if err := parsePositiveDuration(dst, v); err != nil {
		return err
	}
	if *dst < worker.MinMarkerRetention {
		return errors.New("must be at least 72h: Stripe redelivers an event for up to 3 days, " +
			"and a redelivery whose marker was pruned is processed again")
	}
	return nil
}

func parsePositiveInt(dst *int64, v string) error {
	var n int64
	if _, err := fmt.Sscan(v, &n); err != nil || fmt.Sprint(n) != v {
		return errors.New("not a whole number")
	}
	if n <= 0 {
		return errors.New("must be greater than zero")
	}
	*dst = n
	return nil
}

func parseBool(dst *bool, v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return errors.New("not true or false")
	}
	*dst = b
	return nil
}

// The processors HOOKD_PROCESSOR chooses from.
const (
	processorForward = "forward"
	processorDiscard = "discard"
)

func checkProcessor(v string) error {
	if v != processorForward && v != processorDiscard {
		return errors.New("must be forward or discard")
	}
	return nil
}

// parseCIDRs reads comma-separated CIDRs; a bare address stands for
// itself alone.
func parseCIDRs(dst *[]*net.IPNet, v string) error {
	*dst = nil
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if ip := net.ParseIP(part); ip != nil {
			bits := 8 * len(ip.To16())
			if ip.To4() != nil {
				ip, bits = ip.To4(), 32
			}
			*dst = append(*dst, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		_, n, err := net.ParseCIDR(part)
		if err != nil {
			return fmt.Errorf("%q is not a CIDR like 10.0.0.0/8 or an address", part)
		}
		*dst = append(*dst, n)
	}
	return nil
}

func checkURL(v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("not an absolute http(s) URL")
	}
	return nil
}

func parseRetryBatch(dst *int64, v string) error {
	if err := parsePositiveInt(dst, v); err != nil {
		return err
	}
	if *dst > worker.MaxRetryBatch {
		return fmt.Errorf("at most %d: each event of a batch holds a slot of PostgreSQL's shared lock table", worker.MaxRetryBatch)
	}
	return nil
}

func parseSecrets(dst *[]Secret, v string) error {
	*dst = nil
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.HasPrefix(part, "whsec_") {
			return errors.New("each secret must start with whsec_ (Stripe's signing secret, from the webhook endpoint's page)")
		}
		*dst = append(*dst, Secret(part))
	}
	return nil
}

func checkForwardSecret(v string) error {
	_, err := forwardsig.ParseSecret(v)
	return err
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

func reveal(secrets []Secret) []string {
	out := make([]string, len(secrets))
	for i, s := range secrets {
		out[i] = s.Reveal()
	}
	return out
}

// userCommand runs `hookd user add EMAIL [-role ROLE]` and `hookd user
// passwd EMAIL`. The password never comes from the command line, where
// other users of the machine and the shell history would see it: it is read
// from the terminal without echo, or as the first line of stdin when that is
// not a terminal.
func userCommand(ctx context.Context, args []string, getenv func(string) string,
	stdin io.Reader, stdout, stderr io.Writer) error {
	const userUsage = "usage: hookd user add EMAIL [-role viewer|operator|admin] | hookd user passwd EMAIL"
	if len(args) < 2 || isFlag(args[1]) {
		return errors.New(userUsage)
	}
	sub, email, rest := args[0], args[1], slices.Clone(args[2:])
	if sub != "add" && sub != "passwd" {
		return errors.New(userUsage)
	}
	roleName := string(accounts.RoleViewer)
	for i := 0; sub == "add" && i < len(rest); i++ {
		switch a := rest[i]; {
		case a == "-role" || a == "--role":
			if i+1 == len(rest) {
				return errors.New("-role needs a value: viewer, operator or admin")
			}
			roleName = rest[i+1]
			rest = slices.Delete(rest, i, i+2)
			i--
		case strings.HasPrefix(a, "-role=") || strings.HasPrefix(a, "--role="):
			_, roleName, _ = strings.Cut(a, "=")
			rest = slices.Delete(rest, i, i+1)
			i--
		}
	}
	role, err := accounts.ParseRole(roleName)
	if err != nil {
		return err
	}
	cfg, err := parseConfig("user "+sub, rest, getenv, stderr)
	if err != nil {
		return err
	}
	password, err := readPassword(stdin, stderr)
	if err != nil {
		return err
	}
	// Migrated because the first account is often added before the first start.
	pool, _, err := openMigrated(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	accts := accounts.New(pool)
	if sub == "add" {
		u, err := accts.CreateUser(ctx, email, password, role)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "added %s (%s)\n", u.Email, u.Role)
		return nil
	}
	if err := accts.SetPassword(ctx, email, password); errors.Is(err, accounts.ErrNotFound) {
		return fmt.Errorf("no account for %s", email)
	} else if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "password of %s changed\n", email)
	return nil
}

func readPassword(stdin io.Reader, stderr io.Writer) (string, error) {
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(stderr, "Password: ")
		first, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(stderr)
		if err != nil {
			return "", fmt.Errorf("read password: %w", err)
		}
		fmt.Fprint(stderr, "Again: ")
		again, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(stderr)
		if err != nil {
			return "", fmt.Errorf("read password: %w", err)
		}
		if string(first) != string(again) {
			return "", errors.New("the passwords differ")
		}
		return string(first), nil
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && (!errors.Is(err, io.EOF) || line == "") {
		return "", errors.New("read password: expected it on the first line of stdin")
	}
	return strings.TrimRight(line, "\r\n"), nil
}
