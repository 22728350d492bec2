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
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/store/tokens"
)

// Authenticator finds the token a bearer secret names: tokens.Store. A
// secret that names no token that may act now (unknown, expired, revoked,
// its account removed or its role fallen below the token's scope) is
// tokens.ErrRefused, wrapped with the reason, which the 401 says.
type Authenticator interface {
	Authenticate(ctx context.Context, secret string) (tokens.Token, error)
}

// tokenKey keys the request's token in its context, where the handlers,
// which see the context alone, find who acts.
type tokenKey struct{}

// tokenOf is the token the request was authenticated with.
func tokenOf(c echo.Context) tokens.Token {
	return tokenIn(c.Request().Context())
}

func tokenIn(ctx context.Context) tokens.Token {
	t, _ := ctx.Value(tokenKey{}).(tokens.Token)
	return t
}

// actor is who the request acts as: its token, for the token's account.
func actor(ctx context.Context) actions.Actor {
	t := tokenIn(ctx)
	return actions.Actor{Account: audit.Account{ID: t.AccountID, Email: t.AccountEmail},
		Token: &actions.Token{ID: t.ID, Name: t.Name}}
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
		t, err := s.opts.Tokens.Authenticate(c.Request().Context(), strings.TrimSpace(secret))
		switch {
		case errors.Is(err, tokens.ErrRefused):
			msg := err.Error()
			return unauthorized(strings.ToUpper(msg[:1]) + msg[1:] + ".")
		case err != nil:
			return err
		}
		c.SetRequest(c.Request().WithContext(context.WithValue(c.Request().Context(), tokenKey{}, t)))
		return next(c)
	}
}

// requireScope refuses, with a 403, a token whose scope is below need.
func requireScope(need tokens.Scope) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			t := tokenOf(c)
			if !t.Scope.Allows(need) {
				return problem(http.StatusForbidden, "", fmt.Sprintf("Token %s has the %s scope; %s %s needs %s.",
					t.Name, t.Scope, c.Request().Method, c.Request().URL.Path, need))
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
		t := tokenOf(c)
		r := s.limits.of(t.ID).ReserveN(time.Now(), 1)
		if delay := r.Delay(); delay > 0 {
			r.Cancel()
			pe := problem(http.StatusTooManyRequests, "", fmt.Sprintf(
				"Token %s made more than %g requests a second (HOOKD_API_RATE); try again in a moment.", t.Name, s.limits.rate))
			pe.header.Set("Retry-After", strconv.Itoa(int(math.Ceil(delay.Seconds()))))
			return pe
		}
		return next(c)
	}
}
