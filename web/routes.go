package web

import (
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/idp"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/web/api"
)

// addRoutes maps the entire HTTP surface of hookd.
func addRoutes(e *echo.Echo, opts Options, d *dashboard) {
	e.GET("/healthz", handleHealthz())
	e.GET("/readyz", handleReadyz(opts.Logger, opts.Stores.Queue))
	e.GET("/static/*", handleStatic())
	if opts.Gatherer != nil {
		e.GET("/metrics", echo.WrapHandler(metricsHandler(opts.Gatherer)))
	}
	e.POST(stripeevent.ReceiverPath, handleStripeWebhook(opts.Logger, opts.Receiver, opts.Metrics,
		newBodyReader(opts.MaxBody, opts.MaxBodyMemory, opts.Metrics), opts.Rejections), traced(opts.Tracer, stripeevent.ReceiverPath)...)
	e.Match([]string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions},
		stripeevent.ReceiverPath, handleStripeWebhookMethod(opts.Rejections))
	// /api/v1, with its own middleware (a bearer token) and none of the
	// dashboard's: a session cookie never authorizes it, so it has no
	// CSRF to guard against.
	if opts.API != nil {
		api.Register(e, *opts.API)
	}

	// The dashboard, its middleware given per route (see chains).
	session, viewer, operator, admin := d.chains()
	e.GET("/login", d.handleLoginPage(), session...)
	e.POST("/login", d.handleLogin(), session...)
	if opts.OIDC != nil {
		e.GET("/auth/oidc", d.handleOIDCStart(), session...)
		e.GET(idp.CallbackPath, d.handleOIDCCallback(), session...)
		// Back from signing out at the provider.
		e.GET(idp.SignedOutPath, func(c echo.Context) error { return c.Redirect(http.StatusSeeOther, "/login?signed_out=1") })
	}
	e.POST("/logout", d.handleLogout(), viewer...)
	e.GET("/", d.handleOverview(), viewer...)
	e.GET("/overview/stats", d.handleOverviewStats(), viewer...)
	e.GET("/overview/activity", d.handleOverviewActivity(), viewer...)
	e.POST("/prune/preview", d.handlePrunePreview(), admin...)
	e.POST("/prune", d.handlePrune(), admin...)
	e.POST("/erase", d.handleErase(), admin...)
	e.GET("/events", d.handleEvents(), viewer...)
	e.GET("/events/:id", d.handleEvent(), viewer...)
	e.POST("/events/:id/stripe", d.handleEventInStripe(), viewer...)
	e.POST("/events/:id/retry", d.handleRetry(), operator...)
	e.POST("/events/:id/retry-now", d.handleRetryNow(), operator...)
	e.POST("/events/retry-all/preview", d.handleRetryAllPreview(), operator...)
	e.POST("/events/retry-all", d.handleRetryAll(), operator...)
	e.GET("/search", d.handleSearch(), viewer...)
	e.GET("/failures", d.handleFailures(), viewer...)
	e.GET("/rejections", d.handleRejections(), viewer...)
	e.POST("/failures/retry/preview", d.handleRetryGroupPreview(), operator...)
	e.POST("/failures/retry", d.handleRetryGroup(), operator...)
	e.POST("/reconcile/preview", d.handleReconcilePreview(), operator...)
	e.POST("/reconcile", d.handleReconcile(), operator...)
	e.POST("/events/pull", d.handlePull(), operator...)
	e.POST("/delivery/pause", d.handlePauseDelivery(), operator...)
	e.POST("/delivery/resume", d.handleResumeDelivery(), operator...)
	e.GET("/destinations", d.handleDestinations(), viewer...)
	e.POST("/destinations/:name/pause", d.handlePauseDestination(), operator...)
	e.POST("/destinations/:name/resume", d.handleResumeDestination(), operator...)
	e.POST("/destinations/:name/move", d.handleMoveDeliveries(), operator...)
	e.POST("/destinations/:name/drop", d.handleDropDeliveries(), operator...)
	e.POST("/destinations/:name/release/preview", d.handleReleasePreview(), operator...)
	e.POST("/destinations/:name/release", d.handleRelease(), operator...)
	e.GET("/replays", d.handleReplays(), viewer...)
	e.POST("/replays/preview", d.handleReplayPreview(), operator...)
	e.POST("/replays", d.handleStartReplay(), operator...)
	e.GET("/replays/:id", d.handleReplay(), viewer...)
	e.GET("/replays/:id/progress", d.handleReplayProgress(), viewer...)
	e.POST("/replays/:id/cancel", d.handleCancelReplay(), operator...)
	e.GET("/audit", d.handleAudit(), viewer...)
	e.GET("/destinations/add", d.handleAddDestinationPage(), admin...)
	e.POST("/destinations/add", d.handleAddDestination(), admin...)
	e.GET("/destinations/:name/edit", d.handleEditDestinationPage(), admin...)
	e.POST("/destinations/:name/edit", d.handleEditDestination(), admin...)
	e.POST("/destinations/:name/remove/preview", d.handleRemoveDestinationPreview(), admin...)
	e.POST("/destinations/:name/remove", d.handleRemoveDestination(), admin...)
	e.GET("/accounts", d.handleAccounts(), admin...)
	e.POST("/accounts", d.handleAddAccount(), admin...)
	e.POST("/accounts/:id/role", d.handleSetRole(), admin...)
	e.POST("/accounts/:id/remove/preview", d.handleRemovePreview(), admin...)
	e.POST("/accounts/:id/remove", d.handleRemove(), admin...)
	e.POST("/accounts/:id/sessions/end", d.handleEndSessions(), admin...)
	e.POST("/accounts/:id/tokens", d.handleCreateToken(), admin...)
	e.POST("/accounts/:id/tokens/:token/revoke/preview", d.handleRevokeTokenPreview(), admin...)
	e.POST("/accounts/:id/tokens/:token/revoke", d.handleRevokeToken(), admin...)
}

// chains are the dashboard's middleware: session for the pages anyone may
// load (the sign-in), and the session with a role check for the rest. It is
// given per route, not per echo group: a group with middleware also claims
// every unmatched path and method, which would turn the receiver's 405s
// into redirects to /login.
func (d *dashboard) chains() (session, viewer, operator, admin []echo.MiddlewareFunc) {
	session = []echo.MiddlewareFunc{d.loadSession, d.checkCSRF}
	role := func(r accounts.Role) []echo.MiddlewareFunc {
		return slices.Concat(session, []echo.MiddlewareFunc{d.requireRole(r)})
	}
	return session, role(accounts.RoleViewer), role(accounts.RoleOperator), role(accounts.RoleAdmin)
}

// traced is the middleware that makes each request to route a server
// span, with tracing on; none with it off. The span's client.address is
// the client's as hookd believes it (echo's RealIP, HOOKD_TRUSTED_PROXIES):
// a sender could write any X-Forwarded-For it likes. An error the route
// returns is answered here (as echo's logger middleware does), so that the
// span has the status that was sent.
func traced(t *tracing.Tracer, route string) []echo.MiddlewareFunc {
	if t == nil {
		return nil
	}
	return []echo.MiddlewareFunc{func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			ctx, span := t.StartServer(c.Request(), route, c.RealIP())
			c.SetRequest(c.Request().WithContext(ctx))
			err := next(c)
			if err != nil {
				c.Error(err)
			}
			tracing.EndServer(span, c.Response().Status)
			return err
		}
	}}
}
