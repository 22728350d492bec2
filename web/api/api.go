// Package api is hookd's /api/v1: the dashboard's actions (internal/actions)
// for scripts and the command line, described by openapi.yaml, from which
// oapi-codegen generates api.gen.go. It stays thin: each handler translates
// HTTP to an action and back, and the middleware authenticates the bearer
// token, checks its scope and rate, validates the request against the
// document and keeps the answers of Idempotency-Keys.
package api

//go:generate go tool oapi-codegen -config oapi-codegen.yaml openapi.yaml

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/internal/store/idempotency"
)

// Prefix is where the API is served.
const Prefix = "/api/v1"

// DefaultRate is HOOKD_API_RATE's default: requests a second per token,
// on each replica.
const DefaultRate = 10

// Options is what the API serves from.
type Options struct {
	Logger  *slog.Logger
	Actions *actions.Actions
	// Tokens finds the token a bearer secret names.
	Tokens Authenticator
	// Idempotency keeps the answers of Idempotency-Keys.
	Idempotency *idempotency.Store
	// Rate is how many requests a second each token may make (HOOKD_API_RATE),
	// with bursts of twice as many; zero means DefaultRate.
	Rate float64
}

// Register adds the API's routes to e under Prefix, each with the API's
// middleware and none of the dashboard's: a session cookie never
// authorizes the API. e's error handler must send the errors of paths
// under Prefix to HandleError.
func Register(e *echo.Echo, opts Options) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Rate <= 0 {
		opts.Rate = DefaultRate
	}
	s := &server{opts: opts, limits: newRateLimits(opts.Rate)}
	RegisterHandlersWithOptions(e, NewStrictHandler(s, nil), RegisterHandlersOptions{
		BaseURL: Prefix, OperationMiddlewares: s.middleware()})
}

// NewHandler returns a server of the API alone, for a listener of its own
// (HOOKD_API_ADDR).
func NewHandler(opts Options) http.Handler {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = HandleError(opts.Logger)
	Register(e, opts)
	return e
}

// Serves says whether path is the API's, whose errors are problems.
func Serves(path string) bool {
	return path == Prefix || strings.HasPrefix(path, Prefix+"/")
}

// server implements the operations (StrictServerInterface).
type server struct {
	opts   Options
	limits *rateLimits
}
