// Package doctor checks a hookd configuration end to end, the way the first
// day in production asks: is the database reachable and migrated, do its
// timeouts leave hookd's statements room, does a commit wait for a
// standby, is the signing secret Stripe's, does the app answer a signed
// test delivery, are the timeouts and the retention safe, does Stripe's API know the endpoint, and is the clock
// right. Each check says ok, warn or fail, and what to do.
//
// It changes nothing: it writes no row, applies no migration, and the one
// request it sends the app is a hookd.ping event, which apps may ignore.
package doctor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/migrations"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views/humanize"
	"github.com/hookd/hookd/worker"
	"github.com/hookd/hookd/worker/maintenance"
)

// Status is the verdict of one check.
type Status string

const (
	// OK: nothing to do.
	OK Status = "ok"
	// Warn: hookd works, but something deserves a look.
	Warn Status = "warn"
	// Fail: hookd will lose, refuse or mishandle events until it is fixed.
	Fail Status = "fail"
	// Skip: the check needs a setting that is not set.
	Skip Status = "skip"
)

// Result is the outcome of one check: its name, its verdict, and one line
// saying what was found and what to do.
type Result struct {
	Check  string
	Status Status
	Detail string
}

// Config is the configuration to check, as hookd serve would run with it.
type Config struct {
	DatabaseURL string
	// AdminEmail is HOOKD_ADMIN_EMAIL.
	AdminEmail string
	// StripeSecrets are STRIPE_WEBHOOK_SECRET's secrets.
	StripeSecrets []string
	// Endpoints, when set, are the labelled endpoints, each checked on
	// lines of its own (Endpoints) in place of StripeSecrets and
	// StripeEndpointID's.
	Endpoints []endpoint.Endpoint
	// Discard is set when HOOKD_PROCESSOR=discard.
	Discard        bool
	ForwardURL     string
	ForwardSecret  string
	ForwardTimeout time.Duration
	// MaxForwardTimeout bounds ForwardTimeout (worker.MaxForwardTimeout).
	MaxForwardTimeout time.Duration
	// PublicURL and SecureCookies are HOOKD_PUBLIC_URL and whether the
	// session cookie is Secure.
	PublicURL       string
	SecureCookies   bool
	MarkerRetention time.Duration
	DemoBackoff     bool
	// StripeAPIKey and StripeEndpointID are reconciliation's settings;
	// with the key, doctor reads the endpoint from Stripe's API.
	StripeAPIKey     string
	StripeEndpointID string
	// StripeAPIURL is where Stripe's API is; its Date header is also the
	// clock hookd's is compared with.
	StripeAPIURL string
	// HTTPClient reaches Stripe's API. Default: a client with a 10 s
	// timeout.
	HTTPClient *http.Client
	// StripeBudget is the rate of reads to Stripe's API doctor makes at
	// most, HOOKD_STRIPE_API_RATE. Default: stripeapi.DefaultRate.
	StripeBudget *stripeapi.Budget
	// Addr is HOOKD_ADDR; MetricsAddr is HOOKD_METRICS_ADDR, empty when it
	// is off; MetricsPublic is HOOKD_METRICS_PUBLIC.
	Addr          string
	MetricsAddr   string
	MetricsPublic bool
	// OIDC is the sign-in through the identity provider.
	OIDC OIDC
	// DestinationsHash is the hash of the destinations this configuration
	// gives (destinations.Set's Hash); "" when it gives none.
	DestinationsHash string
}

// Run runs every check, in order, and returns their results.
func Run(ctx context.Context, cfg Config) []Result {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	results := []Result{
		Database(ctx, cfg.DatabaseURL),
		SessionTimeouts(ctx, cfg.DatabaseURL),
		Replication(ctx, cfg.DatabaseURL),
		ReplicaDestinations(ctx, cfg.DatabaseURL, cfg.DestinationsHash),
		Accounts(ctx, cfg.DatabaseURL, cfg.AdminEmail),
		Forward(ctx, cfg),
		ForwardSignature(cfg),
		ForwardTimeout(cfg.ForwardTimeout, cfg.MaxForwardTimeout),
		Retention(cfg.MarkerRetention),
		Backoff(cfg.DemoBackoff),
	}
	if len(cfg.Endpoints) > 0 {
		results = append(results, Endpoints(ctx, cfg)...)
	} else {
		key, endpoint := Stripe(ctx, cfg)
		results = append(results, SigningSecret(cfg.StripeSecrets), key, endpoint)
	}
	results = append(results,
		Clock(ctx, cfg.HTTPClient, cfg.StripeAPIURL),
		Cookies(cfg.PublicURL, cfg.SecureCookies),
		Metrics(cfg.Addr, cfg.MetricsAddr, cfg.MetricsPublic))
	return append(results, IdentityProvider(ctx, cfg.HTTPClient, cfg.OIDC)...)
}

// Metrics says where /metrics is served. Queue depths, traffic and
// failures are for Prometheus, not for whoever reaches the receiver, so a
// public /metrics, or a metrics listener on every interface, is a warning.
func Metrics(addr, metricsAddr string, public bool) Result {
	const name = "metrics"
	if public {
		where := "on HOOKD_ADDR (" + addr + "/metrics)"
		if metricsAddr != "" {
			where = "on " + metricsAddr + "/metrics and " + where
		}
		return Result{name, Warn, "served " + where + ", where anyone who reaches the receiver can read them " +
			"(HOOKD_METRICS_PUBLIC=true): unset it and have Prometheus scrape HOOKD_METRICS_ADDR"}
	}
	if metricsAddr == "" {
		return Result{name, OK, "not served: HOOKD_METRICS_ADDR is off and HOOKD_METRICS_PUBLIC is false"}
	}
	if host, _, err := net.SplitHostPort(metricsAddr); err == nil && (host == "" || net.ParseIP(host).IsUnspecified()) {
		return Result{name, Warn, "served on " + metricsAddr + "/metrics, every interface: keep the port from " +
			"everyone but Prometheus, or give HOOKD_METRICS_ADDR one address, e.g. 127.0.0.1:9090"}
	}
	return Result{name, OK, "served on " + metricsAddr + "/metrics only, not on HOOKD_ADDR"}
}

// Cookies checks the session cookie is Secure when the dashboard is served
// over https: one that is not is also sent over plain HTTP, to whoever
// answers there.
func Cookies(publicURL string, secure bool) Result {
	const name = "session cookie"
	switch u, err := url.Parse(publicURL); {
	case publicURL == "" || err != nil:
		if secure {
			return Result{name, OK, "Secure: sent over TLS only"}
		}
		return Result{name, Skip, "HOOKD_PUBLIC_URL is not set, so doctor cannot tell whether the dashboard is served over TLS"}
	case strings.EqualFold(u.Scheme, "https") && !secure:
		return Result{name, Warn, "HOOKD_PUBLIC_URL is https but HOOKD_SECURE_COOKIES is false: the session cookie is also " +
			"sent over plain HTTP; unset HOOKD_SECURE_COOKIES, or set it to true"}
	case secure:
		return Result{name, OK, "Secure: sent over TLS only"}
	}
	return Result{name, OK, "not Secure, as HOOKD_PUBLIC_URL is plain http"}
}

// Write prints one line per result, then a summary, and returns how many
// checks failed. The check column is as wide as the longest check's name
// (an endpoint's checks carry its label), so every detail starts in the
// same column.
func Write(w io.Writer, results []Result) (failed int) {
	var warned, width int
	for _, r := range results {
		width = max(width, utf8.RuneCountInString(r.Check))
	}
	for _, r := range results {
		fmt.Fprintf(w, "%-5s %-*s %s\n", r.Status, width, r.Check, r.Detail)
		switch r.Status {
		case Fail:
			failed++
		case Warn:
			warned++
		}
	}
	fmt.Fprintf(w, "\n%d checks: %d failed, %d warnings\n", len(results), failed, warned)
	return failed
}

// withDatabase runs check on a connection to databaseURL, within 10 s, or
// says the check named name was skipped because the database does not
// answer.
func withDatabase(ctx context.Context, databaseURL, name string, check func(context.Context, *pgxpool.Pool) Result) Result {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pool, _, err := connect(ctx, databaseURL)
	if err != nil {
		return Result{name, Skip, "not checked: the database does not answer"}
	}
	defer pool.Close()
	return check(ctx, pool)
}

// connect opens a one-connection pool on databaseURL and checks it answers;
// where says which database, for the messages.
func connect(ctx context.Context, databaseURL string) (pool *pgxpool.Pool, where string, err error) {
	pcfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, "", fmt.Errorf("DATABASE_URL does not parse: %v", err)
	}
	pcfg.MaxConns = 1
	where = queue.DescribeDB(&pcfg.ConnConfig.Config)
	pool, err = pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, where, fmt.Errorf("cannot connect to %s: %v; check DATABASE_URL", where, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, where, fmt.Errorf("cannot connect to %s: %v; check DATABASE_URL and that PostgreSQL runs", where, err)
	}
	return pool, where, nil
}

// Database checks that the database answers and its schema is this
// binary's.
func Database(ctx context.Context, databaseURL string) Result {
	const name = "database"
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pool, where, err := connect(ctx, databaseURL)
	if err != nil {
		return Result{name, Fail, err.Error()}
	}
	defer pool.Close()
	st, err := migrations.Check(ctx, pool)
	if err != nil {
		return Result{name, Fail, fmt.Sprintf("reachable at %s, but %v", where, err)}
	}
	switch {
	case len(st.Unknown) > 0:
		return Result{name, Warn, fmt.Sprintf("reachable at %s; the schema has migrations this hookd does not know "+
			"(versions %v): a newer hookd migrated it, run that one", where, st.Unknown)}
	case len(st.Pending) == st.Known:
		return Result{name, Warn, fmt.Sprintf("reachable at %s, but not migrated yet: hookd serve migrates it at start, "+
			"or run hookd migrate first", where)}
	case len(st.Pending) > 0:
		return Result{name, Warn, fmt.Sprintf("reachable at %s; %d migrations pending (%s): hookd serve applies them at start, "+
			"or run hookd migrate first", where, len(st.Pending), strings.Join(st.Pending, ", "))}
	}
	return Result{name, OK, fmt.Sprintf("reachable at %s; schema up to date (%d migrations)", where, st.Known)}
}

// The shortest server-side timeouts hookd works under. Zero, PostgreSQL's
// default, turns a timeout off, which is fine too.
const (
	// MinStatementTimeout: hookd's longest statements are the pruner's
	// batched deletes of old markers, attempts and rejections, and the
	// dashboard's counts and charts over big tables: well under a second
	// normally, seconds on a cold cache or a busy disk. A shorter
	// statement_timeout cancels them, and a prune that keeps failing lets
	// the tables grow.
	MinStatementTimeout = 30 * time.Second
	// MinIdleInTransactionTimeout: hookd never keeps a transaction open
	// across a call to the app; between the statements of its own short
	// transactions it only runs Go code, milliseconds. Below a few seconds
	// a garbage collection, a busy CPU or a slow network turns into a
	// terminated session, the transaction's work lost and its delivery
	// answered 503.
	MinIdleInTransactionTimeout = 5 * time.Second
)

// SessionTimeouts checks that the server's statement_timeout and
// idle_in_transaction_session_timeout, as hookd's role sees them in its
// database (set in postgresql.conf, or with ALTER ROLE or ALTER DATABASE),
// are off or long enough for hookd. The fix it suggests, ALTER ROLE ... IN
// DATABASE, wins over all three.
func SessionTimeouts(ctx context.Context, databaseURL string) Result {
	return withDatabase(ctx, databaseURL, "session timeouts", func(ctx context.Context, pool *pgxpool.Pool) Result {
		const name = "session timeouts"
		cfg := pool.Config().ConnConfig
		var found, fixes []string
		for _, t := range []struct {
			setting string
			min     time.Duration
			needs   string
		}{
			{"statement_timeout", MinStatementTimeout, "hookd's prunes and dashboard reads may take"},
			{"idle_in_transaction_session_timeout", MinIdleInTransactionTimeout, "hookd's own transactions may pause"},
		} {
			// In milliseconds for both, where SHOW would print 1s or 5min.
			var ms int64
			var source string
			err := pool.QueryRow(ctx, `SELECT setting::bigint, source FROM pg_settings WHERE name = $1`, t.setting).Scan(&ms, &source)
			if err != nil {
				return Result{name, Warn, fmt.Sprintf("could not read %s: %v", t.setting, err)}
			}
			switch d := time.Duration(ms) * time.Millisecond; {
			case d == 0:
				found = append(found, t.setting+" off")
			case d >= t.min:
				found = append(found, t.setting+" "+durationSQL(d))
			default:
				found = append(found, fmt.Sprintf("%s %s (%s), shorter than the %s %s", t.setting, durationSQL(d),
					settingSource(source), durationSQL(t.min), t.needs))
				fixes = append(fixes, fmt.Sprintf("ALTER ROLE %s IN DATABASE %s SET %s = '%s'", pgx.Identifier{cfg.User}.Sanitize(),
					pgx.Identifier{cfg.Database}.Sanitize(), t.setting, durationSQL(t.min)))
			}
		}
		if len(fixes) > 0 {
			it := map[bool]string{true: "it", false: "them"}[len(fixes) == 1]
			return Result{name, Warn, strings.Join(found, "; ") + "; raise " + it + " for hookd (0 turns a timeout off): " +
				strings.Join(fixes, "; ")}
		}
		return Result{name, OK, fmt.Sprintf("%s: neither cuts hookd's statements (they need %s) or transactions (%s) short",
			strings.Join(found, ", "), durationSQL(MinStatementTimeout), durationSQL(MinIdleInTransactionTimeout))}
	})
}

// settingSource says where a pg_settings value comes from.
func settingSource(source string) string {
	switch source {
	case "configuration file":
		return "from postgresql.conf"
	case "database":
		return "set with ALTER DATABASE"
	case "user":
		return "set with ALTER ROLE"
	case "database user":
		return "set with ALTER ROLE ... IN DATABASE"
	case "client":
		return "set by DATABASE_URL's options"
	}
	return "source: " + source
}

// durationSQL writes a duration as PostgreSQL's SHOW does: 500ms, 30s, 5min.
func durationSQL(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dmin", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// Accounts checks someone can sign in to the dashboard, and someone can
// manage its accounts. adminEmail is HOOKD_ADMIN_EMAIL, whose account
// hookd serve makes at start.
func Accounts(ctx context.Context, databaseURL, adminEmail string) Result {
	return withDatabase(ctx, databaseURL, "dashboard accounts", func(ctx context.Context, pool *pgxpool.Pool) Result {
		const name = "dashboard accounts"
		users, err := accounts.New(pool).Users(ctx)
		if err != nil {
			return Result{name, Skip, "not checked: the schema is not migrated yet"}
		}
		admins := 0
		for _, u := range users {
			if u.Role == accounts.RoleAdmin {
				admins++
			}
		}
		switch {
		case adminEmail != "" && admins == 0:
			return Result{name, OK, fmt.Sprintf("%s; hookd serve makes %s an admin at start", count(len(users), "account"), adminEmail)}
		case len(users) == 0:
			return Result{name, Fail, "nobody can sign in to the dashboard: run hookd user add you@example.com -role admin, " +
				"or set HOOKD_ADMIN_EMAIL and HOOKD_ADMIN_PASSWORD"}
		case admins == 0:
			return Result{name, Warn, fmt.Sprintf("%s, none of them an admin: nobody can add, re-role or remove "+
				"accounts on the dashboard; hookd user add EMAIL -role admin makes one", count(len(users), "account"))}
		}
		return Result{name, OK, fmt.Sprintf("%s, %d of them %s", count(len(users), "account"), admins,
			map[bool]string{true: "an admin", false: "admins"}[admins == 1])}
	})
}

// stripeSecretShape is what follows whsec_ in the signing secrets Stripe
// shows: 32 letters and digits on an endpoint's page, 64 hex digits from
// the Stripe CLI. Anything else was most likely cut short or pasted with
// something around it.
var stripeSecretShape = regexp.MustCompile(`^whsec_[A-Za-z0-9]{24,}$`)

// SigningSecret checks STRIPE_WEBHOOK_SECRET's secrets have Stripe's shape.
func SigningSecret(secrets []string) Result {
	const name = "signing secret"
	if len(secrets) == 0 {
		return Result{name, Fail, "STRIPE_WEBHOOK_SECRET is not set: the receiver answers 503 to every delivery; " +
			"copy the endpoint's signing secret (whsec_...) from Stripe's dashboard"}
	}
	for i, s := range secrets {
		if !stripeSecretShape.MatchString(s) {
			return Result{name, Warn, fmt.Sprintf("secret %d of %d is not shaped like Stripe's (whsec_ and 32 letters "+
				"and digits, %d characters here): copy it again, whole, from the endpoint's page", i+1, len(secrets), len(s))}
		}
	}
	if len(secrets) > 1 {
		return Result{name, OK, fmt.Sprintf("%d secrets, shaped like Stripe's: any of them verifies a delivery; "+
			"remove the old one when Stripe's overlap ends", len(secrets))}
	}
	return Result{name, OK, "shaped like Stripe's (whsec_...)"}
}

// PingType is the event type of the test delivery Forward sends. Apps may
// ignore it; they must answer it 2xx.
const PingType = "hookd.ping"

// Forward sends the app a signed hookd.ping through hookd's own forwarder,
// exactly as an event would go, and checks it answers 2xx, without a
// redirect, well within HOOKD_FORWARD_TIMEOUT.
func Forward(ctx context.Context, cfg Config) Result {
	const name = "forward to app"
	if cfg.Discard {
		return Result{name, Warn, "HOOKD_PROCESSOR=discard: events are marked processed without reaching any app; " +
			"for trials only, set HOOKD_PROCESSOR=forward and HOOKD_FORWARD_URL for production"}
	}
	if cfg.ForwardURL == "" {
		return Result{name, Fail, "HOOKD_FORWARD_URL is not set: hookd serve refuses to start; set it to your app's webhook URL"}
	}
	// The URL's user, password and query may carry a secret: doctor's
	// output is pasted into tickets and chats.
	shown := worker.DisplayURL(cfg.ForwardURL)
	f, err := worker.NewForwarder(cfg.ForwardURL, cfg.ForwardSecret)
	if err != nil {
		return Result{name, Fail, fmt.Sprintf("HOOKD_FORWARD_SECRET: %v", err)}
	}
	id := "evt_hookd_ping_" + randomHex(8)
	payload := stripeevent.Event{ID: id, Type: PingType, Created: time.Now(),
		Object: []byte(`{"object":"hookd.ping","sent_by":"hookd doctor"}`)}.JSON()
	timeout := cfg.ForwardTimeout
	if timeout <= 0 {
		timeout = worker.DefaultProcessTimeout
	}
	pingCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	res := f.Process(pingCtx, worker.Delivery{EventID: id, EventType: PingType, Payload: payload})
	took := time.Since(start)
	switch {
	case res.HTTPStatus >= 300 && res.HTTPStatus < 400:
		return Result{name, Fail, fmt.Sprintf("%s redirects (%v): hookd never follows a redirect, so every event would fail; "+
			"set HOOKD_FORWARD_URL to the final URL", shown, res.Err)}
	case res.Err != nil:
		return Result{name, Fail, fmt.Sprintf("%s did not take a %s test delivery: %v; make the app answer 2xx "+
			"to %s (it may ignore the event)", shown, PingType, res.Err, PingType)}
	case took > timeout/2:
		return Result{name, Warn, fmt.Sprintf("%s answered %d, but took %s of HOOKD_FORWARD_TIMEOUT's %s: a slower "+
			"moment turns deliveries into retries; answer first, work later", shown, res.HTTPStatus,
			took.Round(time.Millisecond), short(timeout))}
	}
	return Result{name, OK, fmt.Sprintf("%s answered a signed %s with %d in %s", shown, PingType,
		res.HTTPStatus, took.Round(time.Millisecond))}
}

// ForwardSignature checks forwarded events are signed, so the app can tell
// them from anyone else's requests.
func ForwardSignature(cfg Config) Result {
	const name = "forward signature"
	switch {
	case cfg.Discard || cfg.ForwardURL == "":
		return Result{name, Skip, "nothing is forwarded"}
	case cfg.ForwardSecret == "":
		return Result{name, Warn, "HOOKD_FORWARD_SECRET is not set: your app cannot tell hookd's deliveries from " +
			"anyone's; set it (whsec_<base64>) and verify the webhook-signature header in the app"}
	}
	return Result{name, OK, "events carry a Standard Webhooks signature (webhook-signature) under HOOKD_FORWARD_SECRET"}
}

// ForwardTimeout checks HOOKD_FORWARD_TIMEOUT is below limit (the events
// of a replica that dies mid-retry wait a batch's worth of it), and is
// neither too short for an app nor long enough to keep Stripe waiting.
func ForwardTimeout(timeout, limit time.Duration) Result {
	const name = "forward timeout"
	switch {
	case timeout >= limit:
		return Result{name, Fail, fmt.Sprintf("HOOKD_FORWARD_TIMEOUT %s is not below %s: the retry loop's leases last "+
			"a batch's worth of it, and a replica that dies mid-batch keeps its events waiting that long; set it well below",
			short(timeout), short(limit))}
	case timeout < time.Second:
		return Result{name, Warn, fmt.Sprintf("HOOKD_FORWARD_TIMEOUT %s: an app that takes a second now and then "+
			"turns every such moment into a retry", short(timeout))}
	case timeout > 30*time.Second:
		return Result{name, Warn, fmt.Sprintf("HOOKD_FORWARD_TIMEOUT %s: the first attempt runs while Stripe waits for "+
			"hookd's answer, and Stripe gives up and redelivers long before; keep it at seconds", short(timeout))}
	}
	return Result{name, OK, fmt.Sprintf("%s, below the %s limit", short(timeout), short(limit))}
}

// Retention checks dedup markers outlive Stripe's redeliveries.
func Retention(retention time.Duration) Result {
	const name = "marker retention"
	stripeDays := humanize.Duration(stripeevent.RedeliveryWindow)
	switch {
	case retention < maintenance.MinMarkerRetention:
		return Result{name, Fail, fmt.Sprintf("HOOKD_MARKER_RETENTION %s is shorter than Stripe's %s of redeliveries: "+
			"a late redelivery would be processed twice; set at least %s", short(retention), stripeDays, short(maintenance.MinMarkerRetention))}
	case retention < maintenance.MinMarkerRetention+24*time.Hour:
		return Result{name, Warn, fmt.Sprintf("HOOKD_MARKER_RETENTION %s only just outlives Stripe's %s of "+
			"redeliveries; the default of %s leaves room for a manual retry days later", short(retention), stripeDays,
			short(maintenance.DefaultMarkerRetention))}
	}
	return Result{name, OK, fmt.Sprintf("%s, longer than Stripe's %s of redeliveries", short(retention), stripeDays)}
}

// Backoff says whether the retry schedule is the real one.
func Backoff(demo bool) Result {
	const name = "retry backoff"
	if demo {
		return Result{name, Warn, "HOOKD_DEMO_BACKOFF is on: retries wait seconds, not hours, and events go dead " +
			"within a minute; it is for make run's demo, unset it"}
	}
	waits := make([]string, 0, queue.MaxAttempts)
	for _, d := range queue.Backoff() {
		waits = append(waits, short(d))
	}
	return Result{name, OK, strings.Join(waits, ", ") + ", then dead"}
}

// Stripe reads the webhook endpoint STRIPE_WEBHOOK_ENDPOINT_ID with
// STRIPE_API_KEY, as reconciliation does, and returns two results: whether
// Stripe takes the key, and whether the endpoint is enabled and points at
// hookd's receiver.
func Stripe(ctx context.Context, cfg Config) (key, endpoint Result) {
	key, endpoint = Result{Check: "stripe api key"}, Result{Check: "stripe endpoint"}
	if cfg.StripeAPIKey == "" {
		key.Status, key.Detail = Skip, "STRIPE_API_KEY is not set: no reconciliation, and the endpoint is not checked"
		endpoint.Status, endpoint.Detail = Skip, "needs STRIPE_API_KEY"
		return key, endpoint
	}
	if cfg.StripeEndpointID == "" {
		key.Status, key.Detail = Skip, "not checked without an endpoint to read"
		endpoint.Status, endpoint.Detail = Fail, "STRIPE_WEBHOOK_ENDPOINT_ID is not set: set it to the we_... id of the endpoint hookd serves"
		return key, endpoint
	}
	client := stripeapi.New(stripeapi.Config{Key: cfg.StripeAPIKey, URL: cfg.StripeAPIURL, HTTPClient: cfg.HTTPClient, Budget: cfg.StripeBudget,
		// One retry at most: doctor reports what it finds, it does not
		// wait out an outage.
		MaxNetworkRetries: 1, RateLimitRetries: 1})
	ep, err := client.Endpoint(ctx, cfg.StripeEndpointID)
	var apiErr *stripeapi.APIError
	switch {
	case errors.Is(err, stripeapi.ErrNotFound):
		key.Status, key.Detail = OK, "Stripe takes it ("+keyKind(cfg.StripeAPIKey)+")"
		endpoint.Status, endpoint.Detail = Fail, err.Error()
		return key, endpoint
	case errors.As(err, &apiErr) && (apiErr.Status == http.StatusUnauthorized || apiErr.Status == http.StatusForbidden):
		key.Status, key.Detail = Fail, err.Error()
		endpoint.Status, endpoint.Detail = Skip, "not read: the key was refused"
		return key, endpoint
	case err != nil:
		key.Status, key.Detail = Warn, fmt.Sprintf("could not check it: %v", err)
		endpoint.Status, endpoint.Detail = Skip, "not read: Stripe's API did not answer"
		return key, endpoint
	}

	key.Status, key.Detail = OK, "Stripe takes it ("+keyKind(cfg.StripeAPIKey)+")"
	if strings.HasPrefix(cfg.StripeAPIKey, "sk_") {
		key.Status, key.Detail = Warn, "Stripe takes it, but it is a secret key, which can do anything in the account: "+
			"hookd only reads, so give it a restricted key (rk_...) with Read access to Events and Webhook Endpoints"
	}
	endpoint.Status, endpoint.Detail = webhookEndpointLine(ep)
	return key, endpoint
}

// webhookEndpointLine says whether webhook endpoint ep is enabled and
// sends to a path where hookd receives.
func webhookEndpointLine(ep stripeapi.Endpoint) (Status, string) {
	version := ep.APIVersion
	if version == "" {
		version = "the account's default"
	}
	types := fmt.Sprintf("%d event types", len(ep.EnabledEvents))
	if ep.Receives("*") && len(ep.EnabledEvents) == 1 {
		types = "every event type"
	}
	switch {
	case ep.Status != "enabled":
		return Fail, fmt.Sprintf("%s is %s: Stripe sends it nothing (it disables an endpoint "+
			"that keeps failing); enable it on its page in Stripe's dashboard, then run hookd reconcile for what it missed",
			ep.ID, ep.Status)
	case !strings.HasSuffix(strings.TrimRight(ep.URL, "/"), stripeevent.ReceiverPath):
		return Warn, fmt.Sprintf("%s sends to %s, which does not end in %s where hookd "+
			"receives: unless a proxy rewrites the path, change the endpoint's URL; API version %s", ep.ID, ep.URL,
			stripeevent.ReceiverPath, version)
	}
	return OK, fmt.Sprintf("%s is enabled and sends %s to %s; API version %s", ep.ID, types, ep.URL, version)
}

// keyKind says what sort of key an API key is, from its prefix.
func keyKind(key string) string {
	kind := "restricted"
	if strings.HasPrefix(key, "sk_") {
		kind = "secret"
	}
	mode := "live mode"
	if strings.Contains(key, "_test_") {
		mode = "test mode"
	}
	return kind + " key, " + mode
}

// Clock compares this machine's clock with the Date header of Stripe's API:
// the receiver refuses signatures older than receiver.SignatureTolerance by
// this clock, so a clock running ahead refuses Stripe's deliveries as stale.
func Clock(ctx context.Context, client *http.Client, apiURL string) Result {
	const name = "clock"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(apiURL, "/")+"/v1/", nil)
	if err != nil {
		return Result{name, Warn, fmt.Sprintf("HOOKD_STRIPE_API_URL %q: %v", apiURL, err)}
	}
	sent := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return Result{name, Warn, fmt.Sprintf("could not reach Stripe's API at %s to compare clocks (%v); "+
			"check outbound HTTPS, and that NTP keeps this clock right", apiURL, worker.WithoutURL(err))}
	}
	resp.Body.Close()
	received := time.Now()
	stripeNow, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		return Result{name, Warn, fmt.Sprintf("Stripe's API at %s sent no usable Date header to compare clocks with", apiURL)}
	}
	// Date has whole seconds and was stamped somewhere in the round trip.
	local := sent.Add(received.Sub(sent) / 2)
	ahead := local.Sub(stripeNow.Add(500 * time.Millisecond)).Round(time.Second)
	switch {
	case ahead > receiver.SignatureTolerance:
		return Result{name, Fail, fmt.Sprintf("this clock is %s ahead of Stripe's: every signature looks older than "+
			"%s and is refused; sync it with NTP", short(ahead), short(receiver.SignatureTolerance))}
	case ahead > 30*time.Second:
		return Result{name, Warn, fmt.Sprintf("this clock is %s ahead of Stripe's, which leaves a delivery %s of the "+
			"%s a signature is good for; sync it with NTP", short(ahead), short(receiver.SignatureTolerance-ahead), short(receiver.SignatureTolerance))}
	case ahead < -30*time.Second:
		return Result{name, Warn, fmt.Sprintf("this clock is %s behind Stripe's: replayed signatures stay good that "+
			"much longer, and times on the dashboard are off; sync it with NTP", short(-ahead))}
	}
	return Result{name, OK, fmt.Sprintf("%s off Stripe's, well within the %s a signature is good for",
		short(max(ahead, -ahead)), short(receiver.SignatureTolerance))}
}

// count is "1 account" or "3 accounts".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// short writes a duration as people do: 720h, 2m, 10s.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
