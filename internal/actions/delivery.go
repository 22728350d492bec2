package actions

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
)

// MaxPauseReason bounds the reason a pause shows on every page.
const MaxPauseReason = 200

// DeliveryResult is what a pause or a resume did: Changed is false when
// delivery was so already; State is delivery control after it.
type DeliveryResult struct {
	Changed bool
	State   queue.DeliveryControl
}

// Pause holds delivery to the app, with the reason every page's banner
// shows, and audits it. This replica holds delivery at once, the others
// within a second (worker.ControlRefresh).
func (a *Actions) Pause(ctx context.Context, who Actor, reason string) (DeliveryResult, error) {
	reason = strings.Join(strings.Fields(reason), " ")
	switch {
	case reason == "":
		return DeliveryResult{}, &InvalidError{Field: "reason", Detail: "Say why delivery is paused: everyone sees the reason in the banner."}
	case utf8.RuneCountInString(reason) > MaxPauseReason:
		return DeliveryResult{}, &InvalidError{Field: "reason", Detail: "The reason is longer than 200 characters; shorten it."}
	}
	return a.changeDelivery(ctx, who, func(tx *queue.Tx) error { return tx.PauseDelivery(ctx, who.Name(), reason) },
		queue.ErrAlreadyPaused, audit.DeliveryPause, reason)
}

// Resume ends a pause, or closes an open circuit breaker without waiting
// for its probe, and audits it. The queue then drains at the delivery rate.
func (a *Actions) Resume(ctx context.Context, who Actor) (DeliveryResult, error) {
	target := "pause"
	if before := a.control.State(); !before.Paused() && before.BreakerOpen() {
		target = "circuit breaker"
	}
	return a.changeDelivery(ctx, who, func(tx *queue.Tx) error { return tx.ResumeDelivery(ctx) },
		queue.ErrNotHeld, audit.DeliveryResume, target)
}

// changeDelivery makes change to delivery_control and audits it as action
// on target, in one transaction; change returning unchanged is no change,
// and no entry. This replica's copy of delivery control is reread at
// once, so that what follows sees the change.
func (a *Actions) changeDelivery(ctx context.Context, who Actor, change func(*queue.Tx) error, unchanged error,
	action audit.Action, target string) (DeliveryResult, error) {
	err := a.queue.InTx(ctx, func(tx *queue.Tx) error {
		if err := change(tx); err != nil {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), action, target, 0)
	})
	r := DeliveryResult{Changed: err == nil}
	if err != nil && !errors.Is(err, unchanged) {
		return DeliveryResult{}, err
	}
	if a.control == nil {
		r.State, err = a.queue.ReadDeliveryControl(ctx)
		return r, err
	}
	if err := a.control.Refresh(ctx); err != nil {
		a.logger.WarnContext(ctx, "cannot reread delivery control", "err", err)
	}
	r.State = a.control.State()
	return r, nil
}
