package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/forwardsig"
	"github.com/hookd/hookd/internal/idp"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views/humanize"
	"github.com/hookd/hookd/web"
	"github.com/hookd/hookd/worker"
	"github.com/hookd/hookd/worker/maintenance"
	"github.com/hookd/hookd/worker/reconcile"
)

// Config is every setting of hookd, parsed once, here, from the environment
// and the command line; the packages get what they need as parameters.
type Config struct {
	DatabaseURL string
	// MigrateDatabaseURL is HOOKD_MIGRATE_DATABASE_URL, a connection of
	// its own for migrations (a role that may change the schema, say);
	// empty when unset. migrateURL says which URL migrations use.
	MigrateDatabaseURL string

	Addr string
	// MetricsAddr is the listener that serves /metrics alone; empty when
	// HOOKD_METRICS_ADDR is off. MetricsPublic also serves /metrics on Addr.
	MetricsAddr   string
	MetricsPublic bool
	StripeSecrets []Secret
	// Endpoints are the Stripe endpoints hookd serves, each with its
	// secrets: from STRIPE_WEBHOOK_SECRETS with HOOKD_ENDPOINTS' settings,
	// or the one STRIPE_WEBHOOK_SECRET configures. Their secrets never
	// reach a log or an error (endpoint.Endpoint redacts them).
	Endpoints []endpoint.Endpoint
	// endpointSettings is HOOKD_ENDPOINTS, applied once every setting is
	// read.
	endpointSettings string
	// TestEvents is what becomes of test-mode events of an endpoint
	// HOOKD_ENDPOINTS gives no test_events.
	TestEvents endpoint.TestEvents
	// SnapshotAlias is HOOKD_SNAPSHOT_ALIAS.
	SnapshotAlias    receiver.SnapshotAlias
	Processor        string
	ForwardURL       string
	ForwardSecret    Secret
	ForwardTimeout   time.Duration
	RetryInterval    time.Duration
	RetryBatch       int64
	RetryConcurrency int64
	MarkerRetention  time.Duration
	PayloadRetention time.Duration
	AdminEmail       string
	AdminPassword    Secret
	SecureCookies    bool
	TrustedProxies   []*net.IPNet
	MaxBody          int64
	MaxBodyMemory    int64
	ShutdownTimeout  time.Duration
	LogLevel         slog.Level
	AlertURL         Secret
	AlertPendingAge  time.Duration
	// AlertQuiet is HOOKD_ALERT_QUIET: the quiet period of an endpoint
	// without its own; 0 is off.
	AlertQuiet   time.Duration
	PublicURL    string
	DemoBackoff  bool
	StripeAPIURL string
	// Reconciliation with Stripe's Events API: off without the key and the
	// endpoint id.
	StripeAPIKey      Secret
	StripeEndpointID  string
	ReconcileInterval time.Duration
	ReconcileWindow   time.Duration
	// ReconcileAccounts are connected accounts whose events every Connect
	// endpoint's reconciliation lists, besides those seen in the window.
	ReconcileAccounts []string
	// StripeAPIRate is the reads per second to Stripe's API the process
	// makes at most, over reconciliation, the dashboard and doctor.
	StripeAPIRate float64

	InlineConcurrency int64
	// BreakerFailures app-down failures in a row open the circuit breaker,
	// which probes the app every BreakerProbe, doubling up to
	// worker.MaxProbeWait. ForwardRate bounds the deliveries to the app a
	// second, per replica; 0 for no bound.
	BreakerFailures int64
	BreakerProbe    time.Duration
	ForwardRate     float64
	// DashboardConns and DashboardTimeout bound the dashboard's reads: the
	// connections of their own pool and how long one query may run.
	DashboardConns   int64
	DashboardTimeout time.Duration

	// Sign-in through the identity provider (OpenID Connect): off without
	// OIDCIssuer. Its redirect URL is PublicURL + idp.CallbackPath.
	OIDCIssuer       string
	OIDCClientID     string
	OIDCClientSecret Secret
	OIDCGroupsClaim  string
	OIDCRoles        idp.Roles
	// SessionMaxAge is how long a session lasts after its sign-in.
	SessionMaxAge time.Duration
	// PasswordSignInOff leaves password sign-in to EmergencyAdmin alone.
	PasswordSignInOff bool
	EmergencyAdmin    string

	// Trace is where traces are exported: off unless
	// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
	// is set; the SDK reads the other OTEL_* variables itself.
	Trace tracing.Export
	// TraceURL (HOOKD_TRACE_URL) links an attempt's trace id on the
	// dashboard to the tracing backend, {trace_id} standing for the id.
	TraceURL string
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
	{flag: "migrate-database-url", env: "HOOKD_MIGRATE_DATABASE_URL", usage: "PostgreSQL connection string for migrations, e.g. with a role that may change the schema (default: DATABASE_URL)", secret: true,
		set: func(c *Config, v string) error { c.MigrateDatabaseURL = v; return nil }},
	{flag: "addr", env: "HOOKD_ADDR", def: ":8080", usage: "listen address",
		set: func(c *Config, v string) error { c.Addr = v; return nil }},
	{flag: "metrics-addr", env: "HOOKD_METRICS_ADDR", def: "127.0.0.1:9090", usage: "listen address serving /metrics alone, or off",
		set: func(c *Config, v string) error { return parseMetricsAddr(&c.MetricsAddr, v) }},
	{flag: "metrics-public", env: "HOOKD_METRICS_PUBLIC", def: "false", boolean: true, usage: "also serve /metrics on the listen address, to whoever reaches the receiver",
		set: func(c *Config, v string) error { return parseBool(&c.MetricsPublic, v) }},
	{flag: "stripe-webhook-secret", env: "STRIPE_WEBHOOK_SECRET", usage: "Stripe signing secrets whsec_..., comma-separated to roll them (none: the receiver answers 503)", secret: true,
		set: func(c *Config, v string) error { return parseSecrets(&c.StripeSecrets, v) }},
	{flag: "stripe-webhook-secrets", env: "STRIPE_WEBHOOK_SECRETS", usage: "several Stripe endpoints, each labelled with its signing secrets: label=whsec_...[,whsec_...];label=whsec_... (instead of STRIPE_WEBHOOK_SECRET); the secret a delivery's signature matches decides its endpoint", secret: true,
		set: func(c *Config, v string) error { return parseEndpointSecrets(&c.Endpoints, v) }},
	{flag: "endpoints", env: "HOOKD_ENDPOINTS", usage: "each endpoint's settings: label:kind=snapshot|thin,connect=true,stripe_id=we_...|ed_...,test_events=forward|discard|queue-only,quiet=6h;label:... (the one-endpoint form's label is " + endpoint.DefaultLabel + ")",
		set: func(c *Config, v string) error { c.endpointSettings = v; return nil }},
	{flag: "test-events", env: "HOOKD_TEST_EVENTS", def: string(endpoint.ForwardTestEvents), usage: "test-mode events (livemode false) of an endpoint whose settings say nothing: forward; discard (answered 200, marked processed, never forwarded); queue-only (answered 200, held on the queue for a person to retry)",
		set: func(c *Config, v string) error { return parseTestEvents(&c.TestEvents, v) }},
	{flag: "snapshot-alias", env: "HOOKD_SNAPSHOT_ALIAS", def: string(receiver.DefaultSnapshotAlias), usage: "a thin v1.* event and the snapshot event it mirrors: forward-both, or dedup (the second to arrive is answered 200 as a duplicate of the first)",
		set: func(c *Config, v string) error { return parseSnapshotAlias(&c.SnapshotAlias, v) }},
	{flag: "processor", env: "HOOKD_PROCESSOR", def: processorForward, usage: "forward: POST each event to the forward URL; discard: accept and mark processed without processing (trials only)",
		set: func(c *Config, v string) error { c.Processor = v; return checkProcessor(v) }},
	{flag: "forward-url", env: "HOOKD_FORWARD_URL", usage: "where the forward processor POSTs each event (required with -processor forward)",
		set: func(c *Config, v string) error { c.ForwardURL = v; return checkURL(v) }},
	{flag: "forward-secret", env: "HOOKD_FORWARD_SECRET", usage: "whsec_<base64> key for the Standard Webhooks signature on forwarded events (none: unsigned)", secret: true,
		set: func(c *Config, v string) error { c.ForwardSecret = Secret(v); return checkForwardSecret(v) }},
	{flag: "forward-timeout", env: "HOOKD_FORWARD_TIMEOUT", def: humanize.Typed(worker.DefaultProcessTimeout), usage: "how long the processor waits for the forward URL",
		set: func(c *Config, v string) error { return parsePositiveDuration(&c.ForwardTimeout, v) }},
	{flag: "retry-interval", env: "HOOKD_RETRY_INTERVAL", def: humanize.Typed(worker.DefaultRetryInterval), usage: "how often the retry loop looks for due events when idle",
		set: func(c *Config, v string) error { return parsePositiveDuration(&c.RetryInterval, v) }},
	{flag: "marker-retention", env: "HOOKD_MARKER_RETENTION", def: humanize.Typed(maintenance.DefaultMarkerRetention), usage: "age after which dedup markers are pruned (Stripe redelivers for up to " + humanize.Duration(stripeevent.RedeliveryWindow) + ")",
		set: func(c *Config, v string) error { return parseMarkerRetention(&c.MarkerRetention, v) }},
	{flag: "payload-retention", env: "HOOKD_PAYLOAD_RETENTION", def: humanize.Typed(maintenance.DefaultPayloadRetention), usage: "age after which the event log clears each event's payload (its metadata stays as long as the marker)",
		set: func(c *Config, v string) error { return parsePositiveDuration(&c.PayloadRetention, v) }},
	{flag: "admin-email", env: "HOOKD_ADMIN_EMAIL", usage: "dashboard admin account created at start when no account has this email (never changed afterwards)",
		set: func(c *Config, v string) error { c.AdminEmail = v; return nil }},
	{flag: "admin-password", env: "HOOKD_ADMIN_PASSWORD", usage: "password of that account", secret: true,
		set: func(c *Config, v string) error { c.AdminPassword = Secret(v); return nil }},
	{flag: "secure-cookies", env: "HOOKD_SECURE_COOKIES", def: "false", boolean: true, usage: "mark the session cookie Secure on plain HTTP too (set when TLS ends at a reverse proxy; default: true when HOOKD_PUBLIC_URL is https)",
		set: func(c *Config, v string) error { return parseBool(&c.SecureCookies, v) }},
	{flag: "trusted-proxies", env: "HOOKD_TRUSTED_PROXIES", usage: "comma-separated CIDRs of reverse proxies whose X-Forwarded-For is believed (none: the connection's address is the client's)",
		set: func(c *Config, v string) error { return parseCIDRs(&c.TrustedProxies, v) }},
	{flag: "max-body", env: "HOOKD_MAX_BODY", def: strconv.Itoa(web.DefaultMaxBody), usage: "largest webhook body accepted, in bytes",
		set: func(c *Config, v string) error { return parsePositiveInt(&c.MaxBody, v) }},
	{flag: "max-body-memory", env: "HOOKD_MAX_BODY_MEMORY", def: strconv.Itoa(web.DefaultMaxBodyMemory), usage: "bytes the webhook bodies being read may hold at once, over all connections (at least HOOKD_MAX_BODY); past it a delivery waits a second, then gets 503 with Retry-After",
		set: func(c *Config, v string) error { return parsePositiveInt(&c.MaxBodyMemory, v) }},
	{flag: "retry-batch", env: "HOOKD_RETRY_BATCH", def: strconv.Itoa(worker.DefaultRetryBatch), usage: "due events the retry loop claims and settles together (at most " + strconv.Itoa(worker.MaxRetryBatch) + ")",
		set: func(c *Config, v string) error { return parseRetryBatch(&c.RetryBatch, v) }},
	{flag: "retry-concurrency", env: "HOOKD_RETRY_CONCURRENCY", def: strconv.Itoa(worker.DefaultRetryConcurrency), usage: "processors the retry loop runs at once, across its two batches in flight: the most retries your app gets together",
		set: func(c *Config, v string) error { return parsePositiveInt(&c.RetryConcurrency, v) }},
	{flag: "inline-concurrency", env: "HOOKD_INLINE_CONCURRENCY", def: strconv.Itoa(receiver.DefaultInlineConcurrency), usage: "deliveries waiting for the app at once while Stripe waits, a bound on the memory they hold; past it a new event is queued at once and answered 200",
		set: func(c *Config, v string) error { return parsePositiveInt(&c.InlineConcurrency, v) }},
	{flag: "breaker-failures", env: "HOOKD_BREAKER_FAILURES", def: strconv.Itoa(worker.DefaultBreakerFailures), usage: "failures in a row that say the app is down (no connection, a timeout, 502, 503, 504; across replicas) after which delivery pauses itself and probes the app",
		set: func(c *Config, v string) error { return parsePositiveInt(&c.BreakerFailures, v) }},
	{flag: "breaker-probe", env: "HOOKD_BREAKER_PROBE", def: humanize.Typed(worker.DefaultBreakerProbe), usage: "while the circuit breaker is open, how long until the first probe of the app with one event; the wait doubles after each, up to " + humanize.Typed(worker.MaxProbeWait),
		set: func(c *Config, v string) error { return parseBreakerProbe(&c.BreakerProbe, v) }},
	{flag: "forward-rate", env: "HOOKD_FORWARD_RATE", def: rateUnlimited, usage: "deliveries to the app a second, per replica, over the receiver, the retry loop and reconciliation together (with N replicas the app sees up to N times it), or " + rateUnlimited,
		set: func(c *Config, v string) error { return parseForwardRate(&c.ForwardRate, v) }},
	{flag: "dashboard-conns", env: "HOOKD_DASHBOARD_CONNS", def: strconv.Itoa(defaultDashboardConns), usage: "connections of the dashboard's own pool for its pages' reads, apart from the receiver's: however many people load pages, they hold no more",
		set: func(c *Config, v string) error { return parseDashboardConns(&c.DashboardConns, v) }},
	{flag: "dashboard-timeout", env: "HOOKD_DASHBOARD_TIMEOUT", def: humanize.Typed(queue.DefaultReadTimeout), usage: "longest a query of a dashboard page may run before it is stopped and the page asks for a narrower filter",
		set: func(c *Config, v string) error { return parseDashboardTimeout(&c.DashboardTimeout, v) }},
	{flag: "shutdown-timeout", env: "HOOKD_SHUTDOWN_TIMEOUT", def: "15s", usage: "how long in-flight work may take to finish on SIGTERM",
		set: func(c *Config, v string) error { return parsePositiveDuration(&c.ShutdownTimeout, v) }},
	{flag: "alert-url", env: "HOOKD_ALERT_URL", usage: "Slack-compatible incoming webhook that alerts are posted to (none: no alerts)", secret: true,
		set: func(c *Config, v string) error { c.AlertURL = Secret(v); return checkURL(v) }},
	{flag: "alert-pending-age", env: "HOOKD_ALERT_PENDING_AGE", def: humanize.Typed(maintenance.DefaultAlertPendingAge), usage: "alert when the oldest pending event is older than this",
		set: func(c *Config, v string) error { return parsePositiveDuration(&c.AlertPendingAge, v) }},
	{flag: "alert-quiet", env: "HOOKD_ALERT_QUIET", def: "0", usage: "alert when no event has come through an endpoint for this long, unless HOOKD_ENDPOINTS gives it a quiet period of its own; 0 turns it off",
		set: func(c *Config, v string) error { return parseInterval(&c.AlertQuiet, v) }},
	{flag: "public-url", env: "HOOKD_PUBLIC_URL", usage: "the dashboard's external URL, which makes the links in alerts absolute and gives the identity provider's redirect URL, + " + idp.CallbackPath + " (none: paths)",
		set: func(c *Config, v string) error { c.PublicURL = v; return checkURL(v) }},
	{flag: "oidc-issuer", env: "HOOKD_OIDC_ISSUER", usage: "the identity provider's issuer URL, whose /.well-known/openid-configuration hookd reads, to sign in with OpenID Connect (none: passwords only)",
		set: func(c *Config, v string) error { c.OIDCIssuer = v; return checkURL(v) }},
	{flag: "oidc-client-id", env: "HOOKD_OIDC_CLIENT_ID", usage: "the client id hookd is registered with at the identity provider",
		set: func(c *Config, v string) error { c.OIDCClientID = v; return nil }},
	{flag: "oidc-client-secret", env: "HOOKD_OIDC_CLIENT_SECRET", usage: "its client secret (none: a public client, PKCE alone)", secret: true,
		set: func(c *Config, v string) error { c.OIDCClientSecret = Secret(v); return nil }},
	{flag: "oidc-groups-claim", env: "HOOKD_OIDC_GROUPS_CLAIM", def: idp.DefaultGroupsClaim, usage: "the ID token or userinfo claim holding the person's groups (a list of strings, or one string)",
		set: func(c *Config, v string) error { c.OIDCGroupsClaim = v; return checkClaim(v) }},
	{flag: "oidc-roles", env: "HOOKD_OIDC_ROLES", usage: "which groups give which role, highest wins, * for everyone: admin:hookd-admins,operator:support,viewer:* (required with HOOKD_OIDC_ISSUER)",
		set: func(c *Config, v string) error { return parseOIDCRoles(&c.OIDCRoles, v) }},
	{flag: "session-max-age", env: "HOOKD_SESSION_MAX_AGE", def: humanize.Typed(web.DefaultSessionMaxAge), usage: "the longest a dashboard session lasts after its sign-in, however active",
		set: func(c *Config, v string) error { return parsePositiveDuration(&c.SessionMaxAge, v) }},
	{flag: "password-signin", env: "HOOKD_PASSWORD_SIGNIN", def: passwordSignInOn, usage: "on, or off once the identity provider signs people in: then only HOOKD_EMERGENCY_ADMIN signs in with a password",
		set: func(c *Config, v string) error { return parsePasswordSignIn(&c.PasswordSignInOff, v) }},
	{flag: "emergency-admin", env: "HOOKD_EMERGENCY_ADMIN", usage: "email of the password account that still signs in with HOOKD_PASSWORD_SIGNIN=off, so a broken identity provider locks nobody out",
		set: func(c *Config, v string) error {
			c.EmergencyAdmin = strings.TrimSpace(v)
			return checkEmergencyAdmin(c.EmergencyAdmin)
		}},
	{flag: "otlp-endpoint", env: "OTEL_EXPORTER_OTLP_ENDPOINT", usage: "OpenTelemetry collector (or Jaeger, Tempo, ...) that traces are sent to over OTLP/HTTP, e.g. http://127.0.0.1:4318; the other standard OTEL_* variables apply (OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, OTEL_EXPORTER_OTLP_HEADERS, ...) (none: no traces)",
		set: func(c *Config, v string) error { c.Trace.Endpoint = v; return checkURL(v) }},
	{flag: "trace-url", env: "HOOKD_TRACE_URL", usage: "link from an attempt's trace id on the dashboard to the tracing backend, {trace_id} standing for the id, e.g. https://tempo.example/trace/{trace_id} (none: the id alone)",
		set: func(c *Config, v string) error { c.TraceURL = v; return checkTraceURL(v) }},
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
	{flag: "reconcile-window", env: "HOOKD_RECONCILE_WINDOW", def: humanize.Typed(reconcile.DefaultWindow), usage: "how far back a scheduled reconciliation looks (at most " + humanize.Typed(reconcile.MaxWindow) + ": Stripe keeps events 30 days)",
		set: func(c *Config, v string) error { return parseReconcileWindow(&c.ReconcileWindow, v) }},
	{flag: "reconcile-accounts", env: "HOOKD_RECONCILE_ACCOUNTS", usage: "comma-separated connected accounts acct_... whose events a Connect endpoint's reconciliation always lists, besides those hookd saw events from in the window",
		set: func(c *Config, v string) error { return parseAccounts(&c.ReconcileAccounts, v) }},
	{flag: "stripe-api-rate", env: "HOOKD_STRIPE_API_RATE", def: strconv.Itoa(stripeapi.DefaultRate), usage: "reads per second hookd makes to Stripe's API at most, shared by reconciliation, doctor and the dashboard (Stripe allows 100 in live mode, 25 in test mode, to the app too)",
		set: func(c *Config, v string) error { return parseAPIRate(&c.StripeAPIRate, v) }},
}

// apply sets the setting to v, read from from (its variable or its
// flag), and says which when v is refused, echoing v unless it is secret.
func (s setting) apply(cfg *Config, v, from string) error {
	if err := s.set(cfg, v); err != nil {
		if s.secret {
			return fmt.Errorf("%s: %v", from, err)
		}
		return fmt.Errorf("%s: %v (got %q)", from, err, v)
	}
	return nil
}

// readSettings reads only the settings of the variables envs, from the
// environment or their defaults, through the settings table: for the
// commands that need a few of hookd's settings (send-test-event, demo-app)
// and must not stop on a bad value of one they do not use.
func readSettings(getenv func(string) string, envs ...string) (Config, error) {
	var cfg Config
	for _, s := range settings {
		if !slices.Contains(envs, s.env) {
			continue
		}
		if err := s.apply(&cfg, cmp.Or(getenv(s.env), s.def), s.env); err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

// parseConfig builds the Config for a command: a flag overrides its
// environment variable, which overrides the built-in default. A bad value is
// an error naming the variable and the value (unless it is a secret).
//
// extra adds a command's own flags, such as reconcile's -since.
func parseConfig(cmd string, args []string, getenv func(string) string, stderr io.Writer,
	extra ...func(*flag.FlagSet)) (Config, error) {
	cfg, explicit, err := parseFlags(cmd, settings, args, getenv, stderr, extra...)
	if err != nil {
		return Config{}, err
	}
	if cfg.ForwardTimeout >= worker.MaxForwardTimeout {
		return Config{}, fmt.Errorf("HOOKD_FORWARD_TIMEOUT: must be shorter than %s, or a replica that dies mid-retry "+
			"keeps its events waiting for a batch's worth of it (got %s)", worker.MaxForwardTimeout, cfg.ForwardTimeout)
	}
	// A body of HOOKD_MAX_BODY that cannot fit in the budget could never
	// be read: every such delivery would be answered 503.
	if cfg.MaxBodyMemory < cfg.MaxBody {
		return Config{}, fmt.Errorf("HOOKD_MAX_BODY_MEMORY: must be at least HOOKD_MAX_BODY (%d), or a body of that size could never be read (got %d)",
			cfg.MaxBody, cfg.MaxBodyMemory)
	}
	if err := buildEndpoints(&cfg); err != nil {
		return Config{}, err
	}
	if err := checkReconcile(cfg); err != nil {
		return Config{}, err
	}
	if err := checkOIDC(cfg); err != nil {
		return Config{}, err
	}
	if err := readTraceExport(&cfg.Trace, getenv); err != nil {
		return Config{}, err
	}
	if cfg.Endpoints == nil && len(cfg.StripeSecrets) > 0 {
		e := endpoint.New(endpoint.DefaultLabel)
		e.Secrets, e.StripeID = reveal(cfg.StripeSecrets), cfg.StripeEndpointID
		cfg.Endpoints = []endpoint.Endpoint{e}
	}
	// Behind an https public URL the dashboard is only ever reached over
	// TLS, so the session cookie is Secure unless HOOKD_SECURE_COOKIES says
	// otherwise (doctor warns when it does).
	if !explicit["secure-cookies"] && getenv("HOOKD_SECURE_COOKIES") == "" && isHTTPS(cfg.PublicURL) {
		cfg.SecureCookies = true
	}
	return cfg, nil
}

// parseFlags reads the settings of table for cmd, each from its flag, its
// variable or its default, and says which flags were given.
func parseFlags(cmd string, table []setting, args []string, getenv func(string) string, stderr io.Writer,
	extra ...func(*flag.FlagSet)) (Config, map[string]bool, error) {
	fs := newFlagSet(cmd, "Each flag overrides the environment variable in brackets.", stderr)
	for _, add := range extra {
		add(fs)
	}
	values := make([]*string, len(table))
	for i, s := range table {
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
		return Config{}, nil, err
	}
	if fs.NArg() > 0 {
		return Config{}, nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })

	var cfg Config
	for i, s := range table {
		v, from := *values[i], "-"+s.flag
		if !explicit[s.flag] {
			from = s.env
			if env := getenv(s.env); env != "" {
				v = env
			}
		}
		if err := s.apply(&cfg, v, from); err != nil {
			return Config{}, nil, err
		}
	}
	return cfg, explicit, nil
}

// settingsOf are the settings of the variables envs: the flags of a
// command that needs only those, whose -h lists them and no other.
func settingsOf(envs ...string) []setting {
	var table []setting
	for _, s := range settings {
		if slices.Contains(envs, s.env) {
			table = append(table, s)
		}
	}
	return table
}

// isHTTPS reports whether raw is an https URL.
func isHTTPS(raw string) bool {
	return len(raw) > len("https://") && strings.EqualFold(raw[:len("https://")], "https://")
}

// metricsOff is HOOKD_METRICS_ADDR's value for no metrics listener.
const metricsOff = "off"

func parseMetricsAddr(dst *string, v string) error {
	if v == metricsOff {
		*dst = ""
		return nil
	}
	if _, _, err := net.SplitHostPort(v); err != nil {
		return errors.New("not a listen address like 127.0.0.1:9090, or off")
	}
	*dst = v
	return nil
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
	if *dst < maintenance.MinMarkerRetention {
		return fmt.Errorf("must be at least %s: Stripe redelivers an event for up to %s, "+
			"and a redelivery whose marker was pruned is processed again",
			humanize.Typed(maintenance.MinMarkerRetention), humanize.Duration(stripeevent.RedeliveryWindow))
	}
	return nil
}

func parseDashboardConns(dst *int64, v string) error {
	if err := parsePositiveInt(dst, v); err != nil {
		return err
	}
	if *dst > 100 {
		return errors.New("at most 100, PostgreSQL's default max_connections; a few are enough, as each page runs its queries one after another")
	}
	return nil
}

// parseDashboardTimeout reads a statement timeout, which PostgreSQL counts
// in whole milliseconds and where 0 would mean no limit at all.
func parseDashboardTimeout(dst *time.Duration, v string) error {
	if err := parsePositiveDuration(dst, v); err != nil {
		return err
	}
	if *dst < time.Millisecond {
		return errors.New("at least 1ms: PostgreSQL counts the limit in milliseconds")
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

// checkTraceURL checks HOOKD_TRACE_URL: an absolute http(s) URL with a
// {trace_id} to put the id in.
func checkTraceURL(v string) error {
	if v == "" {
		return nil
	}
	if !strings.Contains(v, "{trace_id}") {
		return errors.New("must hold {trace_id}, where the trace's id goes")
	}
	return checkURL(strings.ReplaceAll(v, "{trace_id}", "0"))
}

// readTraceExport completes the trace export from the standard variables
// that decide whether there is one and how it is sent: the SDK reads the
// rest itself. OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn it
// off, as the specification says; hookd sends OTLP over HTTP only, so
// another protocol stops it rather than sending nowhere.
func readTraceExport(e *tracing.Export, getenv func(string) string) error {
	e.TracesEndpoint = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if err := checkURL(e.TracesEndpoint); err != nil {
		return fmt.Errorf("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: %v (got %q)", err, e.TracesEndpoint)
	}
	if !e.On() {
		return nil
	}
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		*e = tracing.Export{}
		return nil
	}
	switch v := getenv("OTEL_TRACES_EXPORTER"); v {
	case "", "otlp":
	case "none":
		*e = tracing.Export{}
		return nil
	default:
		return fmt.Errorf("OTEL_TRACES_EXPORTER: hookd exports traces with otlp, or none (got %q)", v)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := getenv(name); v != "" && v != "http/protobuf" {
			return fmt.Errorf("%s: hookd sends OTLP over HTTP, http/protobuf, only (got %q)", name, v)
		}
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

func parseEndpointSecrets(dst *[]endpoint.Endpoint, v string) error {
	eps, err := endpoint.ParseSecrets(v)
	if err != nil {
		return err
	}
	*dst = eps
	return nil
}

func parseTestEvents(dst *endpoint.TestEvents, v string) error {
	t, err := endpoint.ParseTestEvents(v)
	if err != nil {
		return errors.New("forward, discard or queue-only")
	}
	*dst = t
	return nil
}

func parseSnapshotAlias(dst *receiver.SnapshotAlias, v string) error {
	a, err := receiver.ParseSnapshotAlias(v)
	if err != nil {
		return err
	}
	*dst = a
	return nil
}

// buildEndpoints makes cfg.Endpoints from STRIPE_WEBHOOK_SECRETS or
// STRIPE_WEBHOOK_SECRET (one or the other: two sources of secrets would
// leave it unclear which endpoint a delivery came through), then gives
// each HOOKD_TEST_EVENTS and HOOKD_ENDPOINTS' settings.
func buildEndpoints(cfg *Config) error {
	if cfg.Endpoints != nil && len(cfg.StripeSecrets) > 0 {
		return errors.New("STRIPE_WEBHOOK_SECRET and STRIPE_WEBHOOK_SECRETS are both set: set one, STRIPE_WEBHOOK_SECRETS " +
			"to label several endpoints (write the one-endpoint secret as " + endpoint.DefaultLabel + "=whsec_...)")
	}
	if cfg.Endpoints != nil && cfg.StripeEndpointID != "" {
		// It names the one endpoint of STRIPE_WEBHOOK_SECRET; taken for
		// one of several labelled ones it would be a guess.
		return errors.New("STRIPE_WEBHOOK_ENDPOINT_ID goes with STRIPE_WEBHOOK_SECRET: with STRIPE_WEBHOOK_SECRETS, give each " +
			"endpoint its id in HOOKD_ENDPOINTS instead, e.g. HOOKD_ENDPOINTS='label:stripe_id=we_...'")
	}
	if cfg.Endpoints == nil && len(cfg.StripeSecrets) > 0 {
		e := endpoint.New(endpoint.DefaultLabel)
		e.Secrets, e.StripeID = reveal(cfg.StripeSecrets), cfg.StripeEndpointID
		// Its kind and connect are learned from what arrives, unless
		// HOOKD_ENDPOINTS names it.
		e.Undeclared = true
		cfg.Endpoints = []endpoint.Endpoint{e}
	}
	for i := range cfg.Endpoints {
		cfg.Endpoints[i].TestEvents = cfg.TestEvents
	}
	if cfg.endpointSettings != "" && len(cfg.Endpoints) == 0 {
		return errors.New("HOOKD_ENDPOINTS: no endpoint to apply it to: set STRIPE_WEBHOOK_SECRETS (or STRIPE_WEBHOOK_SECRET)")
	}
	if err := endpoint.Configure(cfg.Endpoints, cfg.endpointSettings); err != nil {
		return fmt.Errorf("HOOKD_ENDPOINTS: %w", err)
	}
	return nil
}

// endpointSecrets are every endpoint's secrets, for what checks a
// signature against all of them (the rejection log's stale signatures).
func endpointSecrets(eps []endpoint.Endpoint) []string {
	var out []string
	for _, e := range eps {
		out = append(out, e.Secrets...)
	}
	return out
}

func checkForwardSecret(v string) error {
	_, err := forwardsig.ParseSecret(v)
	return err
}

func reveal(secrets []Secret) []string {
	out := make([]string, len(secrets))
	for i, s := range secrets {
		out[i] = s.Reveal()
	}
	return out
}

func checkAPIKey(v string) error {
	if v == "" {
		return nil
	}
	for _, prefix := range []string{"rk_live_", "rk_test_", "sk_live_", "sk_test_"} {
		if strings.HasPrefix(v, prefix) {
			return nil
		}
	}
	return errors.New("must be a restricted key rk_... (or a secret key sk_...) from Stripe's dashboard, Developers → API keys")
}

func checkEndpointID(v string) error {
	if v != "" && !strings.HasPrefix(v, "we_") {
		return errors.New("must be a webhook endpoint id we_..., shown on the endpoint's page in Stripe's dashboard")
	}
	return nil
}

// parseAccounts reads comma-separated connected account ids.
func parseAccounts(dst *[]string, v string) error {
	*dst = nil
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.HasPrefix(part, "acct_") || strings.ContainsAny(part, " /?#") {
			return fmt.Errorf("%q is not a connected account id (acct_...)", part)
		}
		*dst = append(*dst, part)
	}
	return nil
}

// rateUnlimited is HOOKD_FORWARD_RATE's value for no bound.
const rateUnlimited = "unlimited"

func parseForwardRate(dst *float64, v string) error {
	if v == rateUnlimited {
		*dst = 0
		return nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || f > 1e6 {
		return errors.New("not a number of deliveries a second greater than zero, like 50 or 0.5, or " + rateUnlimited)
	}
	*dst = f
	return nil
}

func parseBreakerProbe(dst *time.Duration, v string) error {
	if err := parsePositiveDuration(dst, v); err != nil {
		return err
	}
	if *dst > worker.MaxProbeWait {
		return fmt.Errorf("at most %s, the longest the probes come apart", humanize.Typed(worker.MaxProbeWait))
	}
	return nil
}

// parseAPIRate reads a rate of requests per second, which may be below
// one.
func parseAPIRate(dst *float64, v string) error {
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || r <= 0 || math.IsInf(r, 0) || math.IsNaN(r) {
		return errors.New("not a number of reads per second greater than zero, like 20 or 0.5")
	}
	if r > 100 {
		return errors.New("at most 100: Stripe's own limit in live mode, which the app shares")
	}
	*dst = r
	return nil
}

// parseInterval reads a schedule's interval, where 0 turns it off.
func parseInterval(dst *time.Duration, v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return errors.New("not a duration like 30m or 1h (0 turns it off)")
	}
	if d < 0 {
		return errors.New("must not be negative (0 turns it off)")
	}
	*dst = d
	return nil
}

func parseReconcileWindow(dst *time.Duration, v string) error {
	if err := parsePositiveDuration(dst, v); err != nil {
		return err
	}
	if *dst > reconcile.MaxWindow {
		return fmt.Errorf("at most %s: Stripe keeps events for 30 days", humanize.Typed(reconcile.MaxWindow))
	}
	return nil
}

// checkReconcile refuses half a reconciliation setup, and a window that
// reaches past the markers: an event whose marker was pruned would look
// never seen, and be processed again.
func checkReconcile(cfg Config) error {
	switch {
	case cfg.StripeAPIKey != "" && cfg.StripeEndpointID == "" &&
		!slices.ContainsFunc(cfg.Endpoints, func(e endpoint.Endpoint) bool { return e.StripeID != "" }):
		return errors.New("STRIPE_WEBHOOK_ENDPOINT_ID: required with STRIPE_API_KEY, or a stripe_id for an endpoint in " +
			"HOOKD_ENDPOINTS (reconciliation reads which events each endpoint receives)")
	case cfg.StripeAPIKey == "" && cfg.StripeEndpointID != "":
		return errors.New("STRIPE_API_KEY: required with STRIPE_WEBHOOK_ENDPOINT_ID (a restricted key with Read access to Events and Webhook Endpoints)")
	}
	return reconcile.CheckWindow("HOOKD_RECONCILE_WINDOW", cfg.ReconcileWindow, cfg.MarkerRetention)
}

// HOOKD_PASSWORD_SIGNIN's values.
const (
	passwordSignInOn  = "on"
	passwordSignInOff = "off"
)

func parsePasswordSignIn(off *bool, v string) error {
	switch v {
	case passwordSignInOn, passwordSignInOff:
		*off = v == passwordSignInOff
		return nil
	}
	return errors.New("on or off")
}

func parseOIDCRoles(dst *idp.Roles, v string) error {
	roles, err := idp.ParseRoles(v)
	if err != nil {
		return err
	}
	*dst = roles
	return nil
}

// checkClaim refuses what cannot be a claim's name.
func checkClaim(v string) error {
	if v == "" || strings.ContainsFunc(v, unicode.IsSpace) {
		return errors.New("not a claim name, like groups or roles")
	}
	return nil
}

func checkEmergencyAdmin(v string) error {
	if local, domain, ok := strings.Cut(v, "@"); v != "" && (!ok || local == "" || domain == "") {
		return errors.New("not an email address: the email of a password account")
	}
	return nil
}

// checkOIDC refuses half an identity provider's setup, and password
// sign-in turned off with nothing else to sign in with.
func checkOIDC(cfg Config) error {
	if cfg.OIDCIssuer == "" {
		switch {
		case cfg.OIDCClientID != "" || cfg.OIDCClientSecret != "" || len(cfg.OIDCRoles) > 0:
			return errors.New("HOOKD_OIDC_ISSUER: required with HOOKD_OIDC_CLIENT_ID, HOOKD_OIDC_CLIENT_SECRET and HOOKD_OIDC_ROLES " +
				"(the identity provider's issuer URL)")
		case cfg.PasswordSignInOff:
			return errors.New("HOOKD_PASSWORD_SIGNIN: off needs HOOKD_OIDC_ISSUER, or nobody could sign in")
		}
		return nil
	}
	switch {
	case cfg.OIDCClientID == "":
		return errors.New("HOOKD_OIDC_CLIENT_ID: required with HOOKD_OIDC_ISSUER (the client id hookd is registered with)")
	case len(cfg.OIDCRoles) == 0:
		return errors.New("HOOKD_OIDC_ROLES: required with HOOKD_OIDC_ISSUER, e.g. admin:hookd-admins,operator:support,viewer:* " +
			"(without it every sign-in would be refused)")
	case cfg.PublicURL == "":
		return errors.New("HOOKD_PUBLIC_URL: required with HOOKD_OIDC_ISSUER: the redirect URL registered at the provider is " +
			"HOOKD_PUBLIC_URL + " + idp.CallbackPath + ", never taken from a request")
	}
	return nil
}

// oidcProvider is the identity provider the configuration names, or nil.
func oidcProvider(cfg Config) *idp.Provider {
	if cfg.OIDCIssuer == "" {
		return nil
	}
	return idp.New(idp.Config{Issuer: cfg.OIDCIssuer, ClientID: cfg.OIDCClientID, ClientSecret: cfg.OIDCClientSecret.Reveal(),
		RedirectURL: oidcRedirectURL(cfg), GroupsClaim: cfg.OIDCGroupsClaim, Roles: cfg.OIDCRoles})
}

// oidcRedirectURL is where the identity provider sends the browser back:
// HOOKD_PUBLIC_URL's callback, whatever a request's headers say.
func oidcRedirectURL(cfg Config) string {
	return strings.TrimRight(cfg.PublicURL, "/") + idp.CallbackPath
}
