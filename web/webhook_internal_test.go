package web

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/hookd/hookd/internal/telemetry"
	"github.com/hookd/hookd/queue"
)

// Each 503 the receiver sends says which of its causes it is, in its
// body and its metrics label: an operator told "locked" looks for another
// delivery, one told "unavailable" at the database.
func TestReceiveAnswer_EachUnavailableSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		err   error
		label telemetry.Outcome
		body  string
	}{
		{queue.ErrEventLocked, telemetry.OutcomeLocked, "event is being handled by another delivery"},
		{queue.ErrNotGranted, telemetry.OutcomeUnavailable, "cannot take the event's lease yet; deliver it again shortly"},
		{errors.New("connection refused"), telemetry.OutcomeUnavailable, "temporarily unavailable"},
	} {
		status, label, body := receiveAnswer(0, fmt.Errorf("deliver: %w", tc.err))
		if status != http.StatusServiceUnavailable || label != tc.label || body != tc.body {
			t.Errorf("%v: got %d %s %q, want 503 %s %q", tc.err, status, label, body, tc.label, tc.body)
		}
	}
}
