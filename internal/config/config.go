// Package config reads hookd's settings once, from the environment and the
// command line, into one Config. The settings table (settings.go) is the one
// source of every variable, flag and default: `hookd serve -h` prints it, and
// the docs' tables are rendered from it (docs.go).
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/hookd/hookd/internal/destinations"
	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/forwardsig"
	"github.com/hookd/hookd/internal/idp"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/worker"
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
	// APIAddr is HOOKD_API_ADDR, a listener serving /api/v1 alone, which
	// Addr then does not serve; empty serves /api/v1 on Addr. APIRate is
	// HOOKD_API_RATE, each token's requests a second on each replica.
	APIAddr       string
	APIRate       float64
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
	SnapshotAlias receiver.SnapshotAlias
	Processor     string
	ForwardURL    string
	// DestinationsFile is HOOKD_DESTINATIONS_FILE; empty when unset.
	DestinationsFile string
	// Destinations are the destinations events are forwarded to: the
	// file's, or HOOKD_FORWARD_URL's one (destinations.Single); nil with
	// neither set.
	Destinations *destinations.Set
	// DestinationsKey is HOOKD_DESTINATIONS_KEY decoded (32 bytes): the
	// key the dashboard's destinations' signing secrets and headers are
	// sealed under; nil when unset.
	DestinationsKey SecretBytes
	ForwardSecret   Secret
	ForwardTimeout  time.Duration
	// ForwardIdleTimeout closes a kept connection to the app idle this long.
	ForwardIdleTimeout time.Duration
	RetryInterval      time.Duration
	RetryBatch         int64
	RetryConcurrency   int64
	MarkerRetention    time.Duration
	PayloadRetention   time.Duration
	AdminEmail         string
	AdminPassword      Secret
	SecureCookies      bool
	TrustedProxies     []*net.IPNet
	MaxBody            int64
	MaxBodyMemory      int64
	ShutdownTimeout    time.Duration
	LogLevel           slog.Level
	AlertURL           Secret
	AlertPendingAge    time.Duration
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
	// OIDCRecheck (HOOKD_OIDC_RECHECK, 0: off) and OIDCAllowedDomains
	// (HOOKD_OIDC_ALLOWED_DOMAINS): see signin.go.
	OIDCRecheck        time.Duration
	OIDCAllowedDomains []string
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

// SecretBytes is a secret key: it says REDACTED when logged or printed.
type SecretBytes []byte

// LogValue redacts the key in slog output.
func (SecretBytes) LogValue() slog.Value { return slog.StringValue("REDACTED") }

// String redacts the key when formatted with %v or %s.
func (SecretBytes) String() string { return "REDACTED" }

// Parse builds the Config for a command: a flag overrides its
// environment variable, which overrides the built-in default. A bad value is
// an error naming the variable and the value (unless it is a secret).
//
// extra adds a command's own flags, such as reconcile's -since.
func Parse(cmd string, args []string, getenv func(string) string, stderr io.Writer,
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
	if err := LoadDestinations(&cfg, getenv); err != nil {
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
		e.Secrets, e.StripeID = Reveal(cfg.StripeSecrets), cfg.StripeEndpointID
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

// isHTTPS reports whether raw is an https URL.
func isHTTPS(raw string) bool {
	return len(raw) > len("https://") && strings.EqualFold(raw[:len("https://")], "https://")
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
		e.Secrets, e.StripeID = Reveal(cfg.StripeSecrets), cfg.StripeEndpointID
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

// LoadDestinations makes cfg.Destinations: HOOKD_DESTINATIONS_FILE's,
// its endpoints held to the endpoints hookd serves, or HOOKD_FORWARD_URL's
// one destination. Both set is refused, as either could be taken for the
// truth; neither leaves it nil, and the forward processor refuses to start
// as it always has. hookd serve calls it again on SIGHUP, to read the file
// anew.
func LoadDestinations(cfg *Config, getenv func(string) string) error {
	switch {
	case cfg.DestinationsFile != "" && cfg.ForwardURL != "":
		return errors.New("HOOKD_DESTINATIONS_FILE and HOOKD_FORWARD_URL are both set: the file names every destination, " +
			"HOOKD_FORWARD_URL the one destination " + destinations.DefaultName + "; unset one (to keep the URL, make it a destination of the file)")
	case cfg.DestinationsFile != "":
		set, err := destinations.Load(cfg.DestinationsFile, getenv)
		if err != nil {
			return fmt.Errorf("HOOKD_DESTINATIONS_FILE: %w", err)
		}
		if len(cfg.Endpoints) > 0 {
			labels := make([]string, len(cfg.Endpoints))
			for i, e := range cfg.Endpoints {
				labels[i] = e.Label
			}
			if err := set.CheckEndpoints(labels); err != nil {
				return fmt.Errorf("HOOKD_DESTINATIONS_FILE: %s: %w", cfg.DestinationsFile, err)
			}
		}
		cfg.Destinations = set
	case cfg.ForwardURL != "":
		cfg.Destinations = destinations.Single(cfg.ForwardURL)
	}
	return nil
}

// EndpointLabels are the labels of the endpoints STRIPE_WEBHOOK_SECRETS
// names, which a destination's endpoints must name; none without it.
func (c Config) EndpointLabels() []string {
	var labels []string
	for _, e := range c.Endpoints {
		labels = append(labels, e.Label)
	}
	return labels
}

// EndpointSecrets are every endpoint's secrets, for what checks a
// signature against all of them (the rejection log's stale signatures).
func EndpointSecrets(eps []endpoint.Endpoint) []string {
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

func Reveal(secrets []Secret) []string {
	out := make([]string, len(secrets))
	for i, s := range secrets {
		out[i] = s.Reveal()
	}
	return out
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
		return errors.New("HOOKD_OIDC_ROLES: required with HOOKD_OIDC_ISSUER, e.g. admin:hookd-admins,operator:support,viewer:staff " +
			"(without it every sign-in would be refused)")
	case cfg.PublicURL == "":
		return errors.New("HOOKD_PUBLIC_URL: required with HOOKD_OIDC_ISSUER: the redirect URL registered at the provider is " +
			"HOOKD_PUBLIC_URL + " + idp.CallbackPath + ", never taken from a request")
	}
	return nil
}

// OIDCProvider is the identity provider the configuration names, or nil.
func OIDCProvider(cfg Config) *idp.Provider {
	if cfg.OIDCIssuer == "" {
		return nil
	}
	return idp.New(idp.Config{Issuer: cfg.OIDCIssuer, ClientID: cfg.OIDCClientID, ClientSecret: cfg.OIDCClientSecret.Reveal(),
		RedirectURL: OIDCRedirectURL(cfg), GroupsClaim: cfg.OIDCGroupsClaim, Roles: cfg.OIDCRoles,
		AllowedDomains: cfg.OIDCAllowedDomains, Offline: OIDCRechecks(cfg)})
}

// OIDCRedirectURL is where the identity provider sends the browser back:
// HOOKD_PUBLIC_URL's callback, whatever a request's headers say.
func OIDCRedirectURL(cfg Config) string {
	return strings.TrimRight(cfg.PublicURL, "/") + idp.CallbackPath
}

// MigrateURL is where migrations run, and the setting it comes from:
// HOOKD_MIGRATE_DATABASE_URL, or DATABASE_URL when that is unset.
func (c Config) MigrateURL() (setting, connString string) {
	if c.MigrateDatabaseURL != "" {
		return "HOOKD_MIGRATE_DATABASE_URL", c.MigrateDatabaseURL
	}
	return "DATABASE_URL", c.DatabaseURL
}
