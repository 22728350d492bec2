package worker

import (
	"context"
	"errors"
	"net"
	"net/http"
	"syscall"
)

// appDownError is a failure that says the app is down rather than that it
// refused the event: no connection, no answer in time, or a 502, 503 or
// 504 from what stands in front of it. The circuit breaker counts these,
// and only these: a 4xx or a 500 is the app answering, however wrongly.
type appDownError struct{ Err error }

func (e *appDownError) Error() string { return e.Err.Error() }

// Unwrap returns the failure itself.
func (e *appDownError) Unwrap() error { return e.Err }

// IsAppDown reports whether err says the app is down.
func IsAppDown(err error) bool {
	_, ok := errors.AsType[*appDownError](err)
	return ok
}

// downStatus reports whether an answer's status says the app behind a
// proxy or load balancer is not there: bad gateway, unavailable, gateway
// timeout.
func downStatus(code int) bool {
	return code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}

// downCause reports whether a request's error says the app is not
// reachable: the connection refused, or no answer in time.
func downCause(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	nerr, ok := errors.AsType[net.Error](err)
	return ok && nerr.Timeout()
}
