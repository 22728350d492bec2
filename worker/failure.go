package worker

import (
	"context"
	"errors"
	"net"
	"syscall"
)

// FailureClass is the kind of a processor's failure, for a span's
// error.type and status, which must never hold the app's answer: app_status
// (the app answered with an error status), timeout, connection_refused,
// connection (any other failure to reach the app), panic (an in-process
// processor panicked) or processor_error (an in-process processor's own
// error).
func FailureClass(res Result) string {
	var nerr net.Error
	switch {
	case res.HTTPStatus != 0:
		return "app_status"
	case errors.Is(res.Err, context.DeadlineExceeded) || errors.As(res.Err, &nerr) && nerr.Timeout():
		return "timeout"
	case errors.Is(res.Err, syscall.ECONNREFUSED):
		return "connection_refused"
	case nerr != nil || IsAppDown(res.Err):
		return "connection"
	case errors.Is(res.Err, errPanicked):
		return "panic"
	default:
		return "processor_error"
	}
}
