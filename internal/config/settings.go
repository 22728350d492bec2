package config

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/idp"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views/humanize"
	"github.com/hookd/hookd/web"
	"github.com/hookd/hookd/web/api"
	"github.com/hookd/hookd/worker"
	"github.com/hookd/hookd/worker/maintenance"
	"github.com/hookd/hookd/worker/reconcile"
)

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
	// essential settings are the few a first deployment sets, which the
	// README's short table lists (docs.go).
	essential bool
	set       func(c *Config, v string) error
}

var settings = []setting{
	{flag: "database-url", env: "DATABASE_URL", essential: true, usage: "PostgreSQL connection string (default: libpq's PG* variables)", secret: true,
		set: func(c *Config, v string) error { c.DatabaseURL = v; return nil }},
	{flag: "migrate-database-url", env: "HOOKD_MIGRATE_DATABASE_URL", usage: "PostgreSQL connection string for migrations, e.g. with a role that may change the schema (default: DATABASE_URL)", secret: true,
		set: func(c *Config, v string) error { c.MigrateDatabaseURL = v; return nil }},
	{flag: "addr", env: "HOOKD_ADDR", essential: true, def: ":8080", usage: "listen address",
		set: func(c *Config, v string) error { c.Addr = v; return nil }},
	{flag: "metrics-addr", env: "HOOKD_METRICS_ADDR", def: "127.0.0.1:9090", usage: "listen address serving /metrics alone, or off",
		set: func(c *Config, v string) error { return parseMetricsAddr(&c.MetricsAddr, v) }},
	{flag: "metrics-public", env: "HOOKD_METRICS_PUBLIC", def: "false", boolean: true, usage: "also serve /metrics on the listen address, to whoever reaches the receiver",
		set: func(c *Config, v string) error { return parseBool(&c.MetricsPublic, v) }},
	{flag: "stripe-webhook-secret", env: "STRIPE_WEBHOOK_SECRET", essential: true, usage: "Stripe signing secrets whsec_..., comma-separated to roll them (none: the receiver answers 503)", secret: true,
		set: func(c *Config, v string) error { return parseSecrets(&c.StripeSecrets, v) }},
	{flag: "stripe-webhook-secrets", env: "STRIPE_WEBHOOK_SECRETS", usage: "several Stripe endpoints, each labelled with its signing secrets: label=whsec_...[,whsec_...];label=whsec_... (instead of STRIPE_WEBHOOK_SECRET); the secret a delivery's signature matches decides its endpoint", secret: true,
		set: func(c *Config, v string) error { return parseEndpointSecrets(&c.Endpoints, v) }},
	{flag: "endpoints", env: "HOOKD_ENDPOINTS", usage: "each endpoint's settings: label:kind=snapshot|thin,connect=true,stripe_id=we_...|ed_...,test_events=forward|discard|queue-only,quiet=6h;label:... (the one-endpoint form's label is " + endpoint.DefaultLabel + ")",
		set: func(c *Config, v string) error { c.endpointSettings = v; return nil }},
	{flag: "test-events", env: "HOOKD_TEST_EVENTS", def: string(endpoint.ForwardTestEvents), usage: "test-mode events (livemode false) of an endpoint whose settings say nothing: forward; discard (answered 200, marked processed, never forwarded); queue-only (answered 200, held on the queue for a person to retry)",
		set: func(c *Config, v string) error { return parseTestEvents(&c.TestEvents, v) }},
	{flag: "snapshot-alias", env: "HOOKD_SNAPSHOT_ALIAS", def: string(receiver.DefaultSnapshotAlias), usage: "a thin v1.* event and the snapshot event it mirrors: forward-both, or dedup (the second to arrive is answered 200 as a duplicate of the first)",
		set: func(c *Config, v string) error { return parseSnapshotAlias(&c.SnapshotAlias, v) }},
	{flag: "processor", env: "HOOKD_PROCESSOR", def: ProcessorForward, usage: "forward: POST each event to the forward URL; discard: accept and mark processed without processing (trials only)",
		set: func(c *Config, v string) error { c.Processor = v; return checkProcessor(v) }},
	{flag: "forward-url", env: "HOOKD_FORWARD_URL", essential: true, usage: "where the forward processor POSTs each event (required with -processor forward)",
		set: func(c *Config, v string) error { c.ForwardURL = v; return checkURL(v) }},
	{flag: "destinations-file", env: "HOOKD_DESTINATIONS_FILE", usage: "a YAML file of the destinations events are forwarded to, each with its URL, route (types, livemode, accounts, endpoints, a CEL filter) and settings, instead of HOOKD_FORWARD_URL, which is the one destination default taking every event (hookd destinations check -f FILE validates one)",
		set: func(c *Config, v string) error { c.DestinationsFile = v; return nil }},
	{flag: "destinations-key", env: "HOOKD_DESTINATIONS_KEY", usage: "base64 of 32 random bytes (openssl rand -base64 32): the key the signing secrets and headers of the destinations managed on the dashboard are kept encrypted under (none: those destinations can have neither)", secret: true,
		set: func(c *Config, v string) error { return parseDestinationsKey(&c.DestinationsKey, v) }},
	{flag: "forward-secret", env: "HOOKD_FORWARD_SECRET", essential: true, usage: "whsec_<base64> key for the Standard Webhooks signature on forwarded events (none: unsigned)", secret: true,
		set: func(c *Config, v string) error { c.ForwardSecret = Secret(v); return checkForwardSecret(v) }},
	{flag: "forward-timeout", env: "HOOKD_FORWARD_TIMEOUT", def: humanize.Typed(worker.DefaultProcessTimeout), usage: "how long the processor waits for the forward URL",
		set: func(c *Config, v string) error { return parsePositiveDuration(&c.ForwardTimeout, v) }},
	{flag: "forward-idle-timeout", env: "HOOKD_FORWARD_IDLE_TIMEOUT", def: humanize.Typed(worker.DefaultForwardIdleTimeout), usage: "how long a kept connection to the app may sit idle before hookd closes it: set it under the app server's own keep-alive (gunicorn 2s, Node and uvicorn 5s), so the app never closes one as a call goes out on it",
		set: func(c *Config, v string) error { return parsePositiveDuration(&c.ForwardIdleTimeout, v) }},
	{flag: "retry-interval", env: "HOOKD_RETRY_INTERVAL", def: humanize.Typed(worker.DefaultRetryInterval), usage: "how often the retry loop looks for due events when idle",
		set: func(c *Config, v string) error { return parsePositiveDuration(&c.RetryInterval, v) }},
	{flag: "marker-retention", env: "HOOKD_MARKER_RETENTION", def: humanize.Typed(maintenance.DefaultMarkerRetention), usage: "age after which dedup markers are pruned (Stripe redelivers for up to " + humanize.Duration(stripeevent.RedeliveryWindow) + ")",
		set: func(c *Config, v string) error { return parseMarkerRetention(&c.MarkerRetention, v) }},
	{flag: "payload-retention", env: "HOOKD_PAYLOAD_RETENTION", def: humanize.Typed(maintenance.DefaultPayloadRetention), usage: "age after which the event log clears each event's payload (its metadata stays as long as the marker)",
		set: func(c *Config, v string) error { return parsePositiveDuration(&c.PayloadRetention, v) }},
	{flag: "admin-email", env: "HOOKD_ADMIN_EMAIL", essential: true, usage: "dashboard admin account created at start when no account has this email (never changed afterwards)",
		set: func(c *Config, v string) error { c.AdminEmail = v; return nil }},
	{flag: "admin-password", env: "HOOKD_ADMIN_PASSWORD", essential: true, usage: "password of that account", secret: true,
		set: func(c *Config, v string) error { c.AdminPassword = Secret(v); return nil }},
	{flag: "secure-cookies", env: "HOOKD_SECURE_COOKIES", def: "false", boolean: true, usage: "mark the session cookie Secure on plain HTTP too (set when TLS ends at a reverse proxy; default: true when HOOKD_PUBLIC_URL is https)",
		set: func(c *Config, v string) error { return parseBool(&c.SecureCookies, v) }},
	{flag: "trusted-proxies", env: "HOOKD_TRUSTED_PROXIES", essential: true, usage: "comma-separated CIDRs of reverse proxies whose X-Forwarded-For is believed (none: the connection's address is the client's)",
		set: func(c *Config, v string) error { return parseCIDRs(&c.TrustedProxies, v) }},
	{flag: "max-body", env: "HOOKD_MAX_BODY", def: strconv.Itoa(web.DefaultMaxBody), usage: "largest webhook body accepted, in bytes",
		set: func(c *Config, v string) error { return parsePositiveInt(&c.MaxBody, v) }},
	{flag: "max-body-memory", env: "HOOKD_MAX_BODY_MEMORY", def: strconv.Itoa(web.DefaultMaxBodyMemory), usage: "bytes the webhook bodies being read may hold at once, over all connections (at least HOOKD_MAX_BODY); past it a delivery waits a second, then gets 503 with Retry-After",
		set: func(c *Config, v string) error { return parsePositiveInt(&c.MaxBodyMemory, v) }},
	{flag: "retry-batch", env: "HOOKD_RETRY_BATCH", def: strconv.Itoa(worker.DefaultRetryBatch), usage: "due events the retry loop claims and settles together (at most " + strconv.Itoa(worker.MaxRetryBatch) + "); after a turn whose every retry failed a loop claims half as many, down to one, an interval apart, and doubles back after each turn with a success",
		set: func(c *Config, v string) error { return parseRetryBatch(&c.RetryBatch, v) }},
	{flag: "retry-concurrency", env: "HOOKD_RETRY_CONCURRENCY", def: strconv.Itoa(worker.DefaultRetryConcurrency), usage: "processors the retry loop runs at once, across its two batches in flight: the most retries your app gets together",
		set: func(c *Config, v string) error { return parsePositiveInt(&c.RetryConcurrency, v) }},
	{flag: "inline-concurrency", env: "HOOKD_INLINE_CONCURRENCY", def: strconv.Itoa(receiver.DefaultInlineConcurrency), usage: "deliveries waiting for the app at once while Stripe waits, a bound on the memory they hold; past it a new event is queued at once and answered 200",
		set: func(c *Config, v string) error { return parsePositiveInt(&c.InlineConcurrency, v) }},
	{flag: "breaker-failures", env: "HOOKD_BREAKER_FAILURES", def: strconv.Itoa(worker.DefaultBreakerFailures), usage: "failures in a row that say the app is down (no connection, a timeout, 502, 503, 504; across replicas) after which delivery pauses itself and probes the app",
		set: func(c *Config, v string) error { return parsePositiveInt(&c.BreakerFailures, v) }},
	{flag: "breaker-probe", env: "HOOKD_BREAKER_PROBE", def: humanize.Typed(worker.DefaultBreakerProbe), usage: "while the circuit breaker is open, how long until the first probe of the app with one event; the wait doubles after each, up to " + humanize.Typed(worker.MaxProbeWait),
		set: func(c *Config, v string) error { return parseBreakerProbe(&c.BreakerProbe, v) }},
	{flag: "forward-rate", env: "HOOKD_FORWARD_RATE", def: rateUnlimited, usage: "deliveries to the app a second over every replica, the receiver, the retry loop, replays and reconciliation together (the replicas reserve their calls in the database), or " + rateUnlimited + "; with HOOKD_DESTINATIONS_FILE, each destination's rate unless it sets its own",
		set: func(c *Config, v string) error { return parseForwardRate(&c.ForwardRate, v) }},
	{flag: "dashboard-conns", env: "HOOKD_DASHBOARD_CONNS", def: strconv.Itoa(DefaultDashboardConns), usage: "connections of the dashboard's own pool for its pages' reads, apart from the receiver's: however many people load pages, they hold no more",
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
	{flag: "public-url", env: "HOOKD_PUBLIC_URL", essential: true, usage: "the dashboard's external URL, which makes the links in alerts absolute and gives the identity provider's redirect URL, + " + idp.CallbackPath + " (none: paths)",
		set: func(c *Config, v string) error { c.PublicURL = v; return checkURL(v) }},
	{flag: "oidc-issuer", env: "HOOKD_OIDC_ISSUER", usage: "the identity provider's issuer URL, whose /.well-known/openid-configuration hookd reads, to sign in with OpenID Connect (none: passwords only)",
		set: func(c *Config, v string) error { c.OIDCIssuer = v; return checkIssuer(v) }},
	{flag: "oidc-client-id", env: "HOOKD_OIDC_CLIENT_ID", usage: "the client id hookd is registered with at the identity provider",
		set: func(c *Config, v string) error { c.OIDCClientID = v; return nil }},
	{flag: "oidc-client-secret", env: "HOOKD_OIDC_CLIENT_SECRET", usage: "its client secret (none: a public client, PKCE alone)", secret: true,
		set: func(c *Config, v string) error { c.OIDCClientSecret = Secret(v); return nil }},
	{flag: "oidc-groups-claim", env: "HOOKD_OIDC_GROUPS_CLAIM", def: idp.DefaultGroupsClaim, usage: "the ID token or userinfo claim holding the person's groups (a list of strings, or one string)",
		set: func(c *Config, v string) error { c.OIDCGroupsClaim = v; return checkClaim(v) }},
	{flag: "oidc-roles", env: "HOOKD_OIDC_ROLES", usage: "which groups give which role, highest wins: admin:hookd-admins,operator:support,viewer:staff (required with HOOKD_OIDC_ISSUER; * stands for every person the provider signs in, which doctor warns of)",
		set: func(c *Config, v string) error { return parseOIDCRoles(&c.OIDCRoles, v) }},
	oidcRecheckSetting, oidcAllowedDomainsSetting,
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
		set: func(c *Config, v string) error { return ParseReconcileWindow(&c.ReconcileWindow, v) }},
	{flag: "reconcile-accounts", env: "HOOKD_RECONCILE_ACCOUNTS", usage: "comma-separated connected accounts acct_... whose events a Connect endpoint's reconciliation always lists, besides those hookd saw events from in the window",
		set: func(c *Config, v string) error { return parseAccounts(&c.ReconcileAccounts, v) }},
	{flag: "stripe-api-rate", env: "HOOKD_STRIPE_API_RATE", def: strconv.Itoa(stripeapi.DefaultRate), usage: "reads per second hookd makes to Stripe's API at most, shared by reconciliation, doctor and the dashboard (Stripe allows 100 in live mode, 25 in test mode, to the app too)",
		set: func(c *Config, v string) error { return parseAPIRate(&c.StripeAPIRate, v) }},
	{flag: "api-addr", env: "HOOKD_API_ADDR", usage: "listen address serving /api/v1 alone, off the listen address the receiver and the dashboard share (default: /api/v1 on the listen address)",
		set: func(c *Config, v string) error { return parseAddr(&c.APIAddr, v) }},
	{flag: "api-rate", env: "HOOKD_API_RATE", def: strconv.Itoa(api.DefaultRate), usage: "requests per second each API token may make to each replica, in bursts of twice as many; past it a 429 with Retry-After",
		set: func(c *Config, v string) error {
			return parseRate(&c.APIRate, v, math.Inf(1), "requests per second greater than zero, like 10 or 0.5")
		}},
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

// ReadSettings reads only the settings of the variables envs, from the
// environment or their defaults, through the settings table: for the
// commands that need a few of hookd's settings (send-test-event, demo-app)
// and must not stop on a bad value of one they do not use.
func ReadSettings(getenv func(string) string, envs ...string) (Config, error) {
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

// parseFlags reads the settings of table for cmd, each from its flag, its
// variable or its default, and says which flags were given.
func parseFlags(cmd string, table []setting, args []string, getenv func(string) string, stderr io.Writer,
	extra ...func(*flag.FlagSet)) (Config, map[string]bool, error) {
	fs := NewFlagSet(cmd, "Each flag overrides the environment variable in brackets.", stderr)
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

// NewFlagSet returns the flag set of `hookd cmd`, whose -h prints a usage
// line, about, and the flags.
func NewFlagSet(cmd, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("hookd "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: hookd %s [flags]\n\n%s\n\n", cmd, about)
		fs.PrintDefaults()
	}
	return fs
}

// DefaultDashboardConns is HOOKD_DASHBOARD_CONNS's default: enough for a
// few people's pages at once, each page's queries running one after
// another on one connection.
const DefaultDashboardConns = 4

// ParseOnly builds the Config of a command that needs only the settings of
// the variables envs, whose -h lists those and its own flags (extra), no
// other.
func ParseOnly(cmd string, envs []string, args []string, getenv func(string) string, stderr io.Writer,
	extra ...func(*flag.FlagSet)) (Config, error) {
	cfg, _, err := parseFlags(cmd, settingsOf(envs...), args, getenv, stderr, extra...)
	return cfg, err
}
