// Package web is hookd's HTTP surface: the Stripe receiver, the operations
// endpoints and the support dashboard. It stays thin: the receiver's pipeline
// lives in internal/receiver, every query in the store packages (queue and below it),
// every page in views.
//
// Its guarantee to Stripe: a 2xx means the event was processed or is durably
// queued; anything else is a 4xx saying why it was refused, or a 503 asking
// Stripe to deliver it again.
package web

import (
	"cmp"
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/idp"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/activity"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/store/rejections"
	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/internal/store/ungenerated"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/internal/telemetry"
	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/web/api"
	"github.com/hookd/hookd/worker"
	"github.com/hookd/hookd/worker/maintenance"
	"github.com/hookd/hookd/worker/reconcile"
)

// Stores are the stores the server reads and writes, all over one database.
type Stores struct {
	Queue *queue.Store
	// Reads is the queue as the dashboard's pages read it: a reader
	// (queue.NewReader) on a small pool of its own with a time limit per
	// query. Nil reads from Queue.
	Reads    *queue.Store
	Accounts *accounts.Store
	// Tokens are the accounts' API tokens, which the accounts page lists,
	// creates and revokes.
	Tokens *tokens.Store
	Audit  *audit.Log
	// Activity and Rejections are read by the pages: over the reader's
	// pool and limit too (queue.TimedReads) when the server has one.
	Activity   *activity.Store
	Rejections *rejections.Store
	// Ungenerated is read by the failures page: the events Stripe could
	// not generate. Nil reads them from Queue's database.
	Ungenerated *ungenerated.Store
}

// Options is everything NewServer needs: what it serves from, and the
// receiver's limits and the dashboard's settings. One struct, so a new
// dependency is one field and the call sites name what they pass.
type Options struct {
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// Stores are the stores the dashboard and /readyz read and write.
	Stores Stores
	// Receiver runs a webhook through the pipeline; nil only in tests that
	// serve the dashboard alone, which must not post to /webhooks/stripe.
	Receiver *receiver.Receiver
	// Metrics counts the receiver's answers; nil counts nothing.
	Metrics *telemetry.Metrics
	// Gatherer is what /metrics serves; nil serves no /metrics here, as is
	// hookd's default: the metrics have a listener of their own
	// (NewMetricsHandler), away from whoever reaches the receiver.
	Gatherer prometheus.Gatherer

	// MaxBody is the largest webhook body accepted, in bytes; larger ones
	// get a 413. Zero means DefaultMaxBody.
	MaxBody int64
	// MaxBodyMemory bounds the bytes held by the webhook bodies being
	// read, over all connections; past it a delivery waits briefly, then
	// gets a 503 with Retry-After. Zero means DefaultMaxBodyMemory; below
	// MaxBody counts as MaxBody.
	MaxBodyMemory int64
	// Sessions keeps the dashboard's sessions; in production the pgxstore
	// over the same database, so any replica serves any session.
	Sessions scs.Store
	// SecureCookies marks the session cookie Secure on plain HTTP requests
	// too: set it when TLS ends at a reverse proxy in front of hookd.
	// Requests that arrive over TLS always get a Secure cookie.
	SecureCookies bool
	// MarkerRetention is the pruner's retention; the manual prune offers
	// it, in days, as its default. Zero means maintenance.DefaultMarkerRetention.
	MarkerRetention time.Duration
	// PayloadRetention is how long the event log keeps payloads, which the
	// history says. Zero means maintenance.DefaultPayloadRetention.
	PayloadRetention time.Duration
	// RetryInterval is the retry loop's idle interval; the overview calls
	// the loop stalled when it has not ticked for several of them (and at
	// least 30 seconds). Zero means worker.DefaultRetryInterval.
	RetryInterval time.Duration
	// TrustedProxies are the reverse proxies whose X-Forwarded-For is
	// believed: the client address, which sign-in throttling counts by, is
	// the nearest address in it that is not one of them. Without any, it is
	// the connection's address, as a client can set the header itself.
	TrustedProxies []*net.IPNet
	// Rejections, when set, records the deliveries the receiver refuses
	// with a 4xx, for the rejection log.
	Rejections *telemetry.RejectionLog
	// FormKeys signs the sign-in form's CSRF token, rereading the keys
	// every minute so a `hookd keys rotate` reaches every replica; nil
	// means a key ring with the defaults over Stores.Accounts.
	FormKeys *accounts.KeyRing
	// Reconciler, when set, lets operators reconcile with Stripe's Events
	// API and pull single events from it; nil hides those actions.
	Reconciler *reconcile.Reconciler
	// Stripe, when set, reads Stripe's API for the dashboard ("Show it in
	// Stripe now"), on the budget it shares with reconciliation; nil
	// without STRIPE_API_KEY.
	Stripe *stripeapi.Client
	// Control is this replica's copy of delivery_control: every page's
	// banner while delivery is held, and the pause and resume actions.
	// nil shows no banner.
	Control *worker.Control
	// Pace is HOOKD_FORWARD_RATE, which the overview's backlog estimate
	// divides by; nil for no bound.
	Pace *worker.Pace
	// Replayer is this replica's runner of replays, which a start wakes and
	// a cancel stops at once; nil leaves them to the runners' polls.
	Replayer *worker.Replayer
	// Tracer, when set, makes each delivery's request a server span
	// (tracing.Tracer.StartServer); nil traces nothing.
	Tracer *tracing.Tracer
	// TraceURL (HOOKD_TRACE_URL), when set, links each attempt's trace id
	// on an event's page to the tracing backend: the id replaces
	// {trace_id}. "" shows the id alone.
	TraceURL string
	// Endpoints are the labelled endpoints, whose declarations the
	// overview and each endpoint's event list check against what arrives
	// through them.
	Endpoints []endpoint.Endpoint
	// OIDC, when set, signs people in through the identity provider at
	// /auth/oidc; nil offers passwords alone.
	OIDC *idp.Provider
	// PublicURL is HOOKD_PUBLIC_URL. When it is https, every response
	// says Strict-Transport-Security, the cookies are __Host- ones and
	// always Secure; sign-out at the provider comes back to it.
	PublicURL string
	// OIDCRecheck is HOOKD_OIDC_RECHECK: how long after a sign-in through
	// the provider its re-check is due, when OIDC.Offline.
	OIDCRecheck time.Duration
	// Alert, when set, posts an alert through HOOKD_ALERT_URL: the
	// emergency admin's sign-ins.
	Alert func(ctx context.Context, text string)
	// PasswordSignInOff (HOOKD_PASSWORD_SIGNIN=off) refuses password
	// sign-ins to every account but EmergencyAdmin's (an email).
	PasswordSignInOff bool
	EmergencyAdmin    string
	// Actions are the actions the dashboard and /api/v1 share; nil means
	// actions over Stores.
	Actions *actions.Actions
	// Destinations is what the pages that add, edit and remove a
	// destination know of the configuration (HOOKD_DESTINATIONS_FILE,
	// HOOKD_FORWARD_URL, HOOKD_DESTINATIONS_KEY), for the Actions made
	// when Actions is nil.
	Destinations actions.ManagedDestinations
	// API, when set, serves /api/v1 here; nil serves it elsewhere
	// (HOOKD_API_ADDR) or not at all. Its Actions are Actions when nil.
	API *api.Options
	// SessionMaxAge is the longest a session lasts after its sign-in,
	// however busy it is. Zero means DefaultSessionMaxAge.
	SessionMaxAge time.Duration
}

// DefaultSessionMaxAge is HOOKD_SESSION_MAX_AGE's default: a working day.
const DefaultSessionMaxAge = 12 * time.Hour

// DefaultMaxBody is HOOKD_MAX_BODY's default, 1 MiB: Stripe's events are a
// few KB, and its largest stay far below it.
const DefaultMaxBody = 1 << 20

// NewServer returns the handler serving every route of hookd.
func NewServer(opts Options) http.Handler {
	opts = withDefaults(opts)
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.IPExtractor = clientAddress(opts.TrustedProxies)
	e.Use(recoverPanics(opts.Logger))
	e.Use(middleware.RequestID())
	e.Use(securityHeaders(isHTTPS(opts.PublicURL), providerOrigin(opts.OIDC)))

	d := newDashboard(opts)
	e.HTTPErrorHandler = d.handleError
	addRoutes(e, opts, d)
	return e
}

// recoverPanics turns a handler's panic into a 500 that the error handler
// writes (a problem under /api/v1, the error page on the dashboard), and
// logs it with its stack: without it net/http would drop the connection
// and the client would see no answer at all.
func recoverPanics(logger *slog.Logger) echo.MiddlewareFunc {
	return middleware.RecoverWithConfig(middleware.RecoverConfig{
		DisableStackAll: true, // the panicking goroutine's stack, not every one's
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			logger.ErrorContext(c.Request().Context(), "handler panicked",
				"method", c.Request().Method, "path", c.Path(), "err", err, "stack", string(stack))
			return err
		},
	})
}

// securityHeaders sets on every response what keeps the dashboard's pages
// from running injected script, being framed or leaking their URLs; with
// an https public URL (hsts), Strict-Transport-Security too, for a year,
// for this host alone: hookd does not decide for its parent domain's
// other hosts. Forms post to hookd alone, and their redirects stay there,
// but for the sign-out's to the identity provider (provider, its origin).
func securityHeaders(hsts bool, provider string) echo.MiddlewareFunc {
	formAction := "'self'"
	if provider != "" {
		formAction += " " + provider
	}
	csp := "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
		"frame-ancestors 'none'; form-action " + formAction + "; base-uri 'none'"
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			h := c.Response().Header()
			if hsts {
				h.Set("Strict-Transport-Security", "max-age=31536000")
			}
			h.Set("Content-Security-Policy", csp)
			h.Set("X-Frame-Options", "DENY")
			h.Set("Referrer-Policy", "same-origin")
			h.Set("X-Content-Type-Options", "nosniff")
			return next(c)
		}
	}
}

// providerOrigin is the identity provider's origin, "" without one: the
// sign-out form's redirect goes to its end_session_endpoint, which the
// browser follows only when the page's form-action allows it.
func providerOrigin(p *idp.Provider) string {
	if p == nil {
		return ""
	}
	return idp.Origin(p.Issuer())
}

// clientAddress returns how the client's address is found. It counts
// sign-in attempts, so a header a client can set itself decides it only
// when it comes from a trusted proxy; echo's own defaults, which trust every
// private and loopback address, are switched off.
func clientAddress(trusted []*net.IPNet) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range trusted {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

func withDefaults(opts Options) Options {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.MaxBody = cmp.Or(opts.MaxBody, DefaultMaxBody)
	opts.MaxBodyMemory = cmp.Or(opts.MaxBodyMemory, DefaultMaxBodyMemory)
	opts.MarkerRetention = cmp.Or(opts.MarkerRetention, maintenance.DefaultMarkerRetention)
	opts.PayloadRetention = cmp.Or(opts.PayloadRetention, maintenance.DefaultPayloadRetention)
	opts.RetryInterval = cmp.Or(opts.RetryInterval, worker.DefaultRetryInterval)
	opts.SessionMaxAge = cmp.Or(opts.SessionMaxAge, DefaultSessionMaxAge)
	if opts.Stores.Ungenerated == nil && opts.Stores.Queue != nil {
		opts.Stores.Ungenerated = ungenerated.New(opts.Stores.Queue.DB())
	}
	if opts.Actions == nil && opts.Stores.Queue != nil {
		opts.Actions = actions.New(actions.Stores{Queue: opts.Stores.Queue, Reads: opts.Stores.Reads,
			Audit: opts.Stores.Audit, Control: opts.Control, Logger: opts.Logger,
			Accounts: opts.Stores.Accounts, Rejections: opts.Stores.Rejections, Reconciler: opts.Reconciler,
			Replayer: opts.Replayer, Stripe: opts.Stripe, Destinations: opts.Destinations})
	}
	if opts.API != nil && opts.API.Actions == nil {
		withActions := *opts.API
		withActions.Actions = opts.Actions
		opts.API = &withActions
	}
	if opts.FormKeys == nil && opts.Stores.Accounts != nil {
		opts.FormKeys = accounts.NewKeyRing(opts.Stores.Accounts, accounts.SignInFormKey, accounts.KeyRingConfig{})
	}
	return opts
}
