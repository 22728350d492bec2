package web

import (
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
)

// maxPauseReason bounds the reason a pause shows on every page.
const maxPauseReason = 200

// handlePauseDelivery pauses delivery to the app, with the reason every
// page's banner shows, and audits it. This replica holds delivery at once;
// the others within a second (worker.ControlRefresh).
func (d *dashboard) handlePauseDelivery() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		reason := strings.Join(strings.Fields(c.FormValue("reason")), " ")
		switch {
		case reason == "":
			return echo.NewHTTPError(http.StatusBadRequest, "Say why delivery is paused: everyone sees the reason in the banner.")
		case utf8.RuneCountInString(reason) > maxPauseReason:
			return echo.NewHTTPError(http.StatusBadRequest, "The reason is longer than 200 characters; shorten it.")
		}
		email := currentUser(c).Email
		return d.changeDelivery(c, func(tx *queue.Tx) error { return tx.PauseDelivery(ctx, email, reason) },
			audit.DeliveryPause, reason, deliveryFlash{
				unchanged: queue.ErrAlreadyPaused, was: "Delivery was paused already.",
				done: "Delivery paused: deliveries wait on the queue until it is resumed.",
			})
	}
}

// handleResumeDelivery ends a pause, or closes an open circuit breaker
// without waiting for its probe, and audits it. The queue then drains at
// the delivery rate.
func (d *dashboard) handleResumeDelivery() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		target := "pause"
		if before := d.opts.Control.State(); !before.Paused() && before.BreakerOpen() {
			target = "circuit breaker"
		}
		return d.changeDelivery(c, func(tx *queue.Tx) error { return tx.ResumeDelivery(ctx) },
			audit.DeliveryResume, target, deliveryFlash{
				unchanged: queue.ErrNotHeld, was: "Delivery was not paused.",
				done: "Delivery resumed: the queue drains at the delivery rate.",
			})
	}
}

// deliveryFlash is what the page after a pause or a resume says: was when
// the change returned unchanged (delivery was so already), done otherwise.
type deliveryFlash struct {
	unchanged error
	was, done string
}

// changeDelivery makes change to delivery_control and audits it as action
// on target, in one transaction, then shows the overview with what it did.
func (d *dashboard) changeDelivery(c echo.Context, change func(*queue.Tx) error, action audit.Action, target string,
	say deliveryFlash) error {
	ctx := c.Request().Context()
	err := d.store.InTx(ctx, func(tx *queue.Tx) error {
		if err := change(tx); err != nil {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), actor(c), action, target, 0)
	})
	switch {
	case errors.Is(err, say.unchanged):
		flash(c, say.was)
	case err != nil:
		return err
	default:
		flash(c, say.done)
	}
	d.refreshControl(c)
	return c.Redirect(http.StatusSeeOther, "/")
}

// refreshControl rereads delivery_control, so the page after the action
// shows what it did; the poll would within half a second anyway.
func (d *dashboard) refreshControl(c echo.Context) {
	if d.opts.Control == nil {
		return
	}
	if err := d.opts.Control.Refresh(c.Request().Context()); err != nil {
		d.logger.WarnContext(c.Request().Context(), "cannot reread delivery control", "err", err)
	}
}
