package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/hookd/hookd/internal/actions"
)

// Bearer is what a token is to the API: the actor its actions are
// audited as (its account and the token), and its scope.
type Bearer struct {
	Actor actions.Actor
	// Scope is read, operate or admin: what the token's account may do on
	// the dashboard as a viewer, an operator or an admin.
	Scope string
}

// ErrRefused is an Authenticator's answer for a secret that names no
// token that may act now: unknown, expired or revoked, or its account
// removed or its role fallen below the token's scope. It is wrapped with
// the reason, which the 401 says.
var ErrRefused = errors.New("the token was refused")

// Authenticator finds the token a bearer secret names.
type Authenticator interface {
	Authenticate(ctx context.Context, secret string) (Bearer, error)
}

// scopeRank orders the scopes: a token may do what its scope or a lower
// one allows.
var scopeRank = map[string]int{scopeRead: 1, scopeOperate: 2, scopeAdmin: 3}

// bearerKey keys the request's Bearer in its context, where the
// handlers, which see the context alone, find who acts.
type bearerKey struct{}

// bearerOf is the token the request was authenticated with.
func bearerOf(c echo.Context) Bearer {
	return bearerIn(c.Request().Context())
}

func bearerIn(ctx context.Context) Bearer {
	b, _ := ctx.Value(bearerKey{}).(Bearer)
	return b
}

// unauthorized is the 401 that asks for a token.
func unauthorized(detail string) *problemError {
	pe := problem(http.StatusUnauthorized, "", detail)
	pe.header.Set("WWW-Authenticate", `Bearer realm="hookd"`)
	return pe
}

// authenticate finds the request's token: none, or one that is refused,
// is a 401. The dashboard's session cookie plays no part.
func (s *server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		scheme, secret, ok := strings.Cut(c.Request().Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
			return unauthorized("This API takes an API token: send Authorization: Bearer hkd_... " +
				"(hookd tokens create makes one). A dashboard session does not authorize it.")
		}
		b, err := s.opts.Tokens.Authenticate(c.Request().Context(), strings.TrimSpace(secret))
		switch {
		case errors.Is(err, ErrRefused):
			return unauthorized(err.Error() + ".")
		case err != nil:
			return err
		}
		if b.Actor.Token == nil {
			return errors.New("an authenticated bearer names no token")
		}
		c.SetRequest(c.Request().WithContext(context.WithValue(c.Request().Context(), bearerKey{}, b)))
		return next(c)
	}
}

// requireScope refuses, with a 403, a token whose scope is below need.
func requireScope(need string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			b := bearerOf(c)
			if scopeRank[b.Scope] < scopeRank[need] {
				return problem(http.StatusForbidden, "", fmt.Sprintf("Token %s has the %s scope; %s %s needs %s.",
					b.Actor.Token.Name, b.Scope, c.Request().Method, c.Request().URL.Path, need))
			}
			return next(c)
		}
	}
}

// rateLimits bounds each token's requests, on this replica, at rate a
// second with bursts of twice as many.
type rateLimits struct {
	rate float64
	mu   sync.Mutex
	by   map[int64]*rate.Limiter
}

func newRateLimits(r float64) *rateLimits {
	return &rateLimits{rate: r, by: map[int64]*rate.Limiter{}}
}

func (l *rateLimits) of(token int64) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.by[token]
	if !ok {
		lim = rate.NewLimiter(rate.Limit(l.rate), max(1, int(math.Ceil(2*l.rate))))
		l.by[token] = lim
	}
	return lim
}

// limit answers 429, with Retry-After, once the token has used up its rate.
func (s *server) limit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		b := bearerOf(c)
		r := s.limits.of(b.Actor.Token.ID).ReserveN(time.Now(), 1)
		if delay := r.Delay(); delay > 0 {
			r.Cancel()
			pe := problem(http.StatusTooManyRequests, "", fmt.Sprintf(
				"Token %s made more than %g requests a second (HOOKD_API_RATE); try again in a moment.", b.Actor.Token.Name, s.limits.rate))
			pe.header.Set("Retry-After", strconv.Itoa(int(math.Ceil(delay.Seconds()))))
			return pe
		}
		return next(c)
	}
}
