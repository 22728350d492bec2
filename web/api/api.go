// Package api is hookd's /api/v1: the dashboard's actions (internal/actions)
// for scripts and the command line, described by openapi.yaml, from which
// oapi-codegen generates api.gen.go. It stays thin: each handler translates
// HTTP to an action and back, and the middleware authenticates the bearer
// token, checks its scope and rate, validates the request against the
// document and keeps the answers of Idempotency-Keys.
package api

//go:generate go tool oapi-codegen -config oapi-codegen.yaml openapi.yaml

import (
	"fmt"
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
	RegisterHandlersWithBaseURL(&router{e: e, chains: s.middleware()}, NewStrictHandler(s, nil), Prefix)
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

// router registers each of the generated code's routes with the chain of
// its operation in the document (middleware), found by method and path;
// a route the document does not have is a mistake, caught at start.
type router struct {
	e      *echo.Echo
	chains map[string][]echo.MiddlewareFunc
}

func (r *router) add(method, path string, h echo.HandlerFunc, m []echo.MiddlewareFunc) *echo.Route {
	chain, ok := r.chains[method+" "+path]
	if !ok {
		panic(fmt.Sprintf("api: %s %s is not an operation of openapi.yaml: run make api", method, path))
	}
	return r.e.Add(method, path, h, append(append([]echo.MiddlewareFunc{}, chain...), m...)...)
}

func (r *router) CONNECT(p string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return r.add(http.MethodConnect, p, h, m)
}
func (r *router) DELETE(p string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return r.add(http.MethodDelete, p, h, m)
}
func (r *router) GET(p string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return r.add(http.MethodGet, p, h, m)
}
func (r *router) HEAD(p string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return r.add(http.MethodHead, p, h, m)
}
func (r *router) OPTIONS(p string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return r.add(http.MethodOptions, p, h, m)
}
func (r *router) PATCH(p string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return r.add(http.MethodPatch, p, h, m)
}
func (r *router) POST(p string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return r.add(http.MethodPost, p, h, m)
}
func (r *router) PUT(p string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return r.add(http.MethodPut, p, h, m)
}
func (r *router) TRACE(p string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return r.add(http.MethodTrace, p, h, m)
}
