package worker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
)

// TestFailureClass names each kind of failure a span's error.type says,
// from the processor's result alone: never from the app's answer.
func TestFailureClass(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	for _, c := range []struct {
		res  Result
		want string
	}{
		{Result{Err: errors.New("app answered 500: customer jane@example.com"), HTTPStatus: 500}, "app_status"},
		{Result{Err: fmt.Errorf("post: %w", context.DeadlineExceeded)}, "timeout"},
		{Result{Err: &appDownError{Err: fmt.Errorf("post: %w", refused)}}, "connection_refused"},
		{Result{Err: fmt.Errorf("post: %w", reset)}, "connection"},
		{Result{Err: fmt.Errorf("%w: boom", errPanicked)}, "panic"},
		{Result{Err: errors.New("the handler's own error")}, "processor_error"},
	} {
		if got := FailureClass(c.res); got != c.want {
			t.Errorf("FailureClass(%v) = %q, want %q", c.res.Err, got, c.want)
		}
	}
}
