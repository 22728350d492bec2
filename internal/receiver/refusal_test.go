package receiver_test

import (
	"fmt"
	"testing"

	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/store/rejections"
)

// Every refusal error maps to its own reason, wrapped or not, and whatever
// else a 4xx carries counts as a body the receiver could not use.
func TestRejectReason(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]rejections.Reason{
		receiver.ErrTooLarge:           rejections.TooLarge,
		receiver.ErrMethodNotAllowed:   rejections.MethodNotAllowed,
		receiver.ErrUnreadableBody:     rejections.UnreadableBody,
		receiver.ErrNoSignature:        rejections.NoSignature,
		receiver.ErrMalformedSignature: rejections.MalformedSignature,
		receiver.ErrStaleSignature:     rejections.StaleSignature,
		receiver.ErrWrongSignature:     rejections.WrongSignature,
		receiver.ErrNotJSON:            rejections.BadJSON,
		receiver.ErrBadEventID:         rejections.BadID,
		receiver.ErrBadEventType:       rejections.BadType,
		fmt.Errorf("elsewhere"):        rejections.UnreadableBody,
	} {
		if got := receiver.RejectReason(fmt.Errorf("%w: why", err)); got != want {
			t.Errorf("RejectReason(%v) = %q, want %q", err, got, want)
		}
	}
}
