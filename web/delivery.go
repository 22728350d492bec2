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
		err := d.store.InTx(ctx, func(tx *queue.Tx) error {
			if err := tx.PauseDelivery(ctx, email, reason); err != nil {
				return err
			}
			return audit.Record(ctx, tx.PgxTx(), email, audit.DeliveryPause, reason, 0)
		})
		switch {
		case errors.Is(err, queue.ErrAlreadyPaused):
			flash(c, "Delivery was paused already.")
		case err != nil:
			return err
		default:
			flash(c, "Delivery paused: deliveries wait on the queue until it is resumed.")
		}
		d.refreshControl(c)
		return c.Redirect(http.StatusSeeOther, "/")
	}
}

// handleResumeDelivery ends a pause, or closes an open circuit breaker
// without waiting for its probe, and audits it. The queue then drains at
// the delivery rate.
func (d *dashboard) handleResumeDelivery() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		before := d.opts.Control.State()
		email := currentUser(c).Email
		err := d.store.InTx(ctx, func(tx *queue.Tx) error {
			if err := tx.ResumeDelivery(ctx); err != nil {
				return err
			}
			target := "pause"
			if !before.Paused() && before.BreakerOpen() {
				target = "circuit breaker"
			}
			return audit.Record(ctx, tx.PgxTx(), email, audit.DeliveryResume, target, 0)
		})
		switch {
		case errors.Is(err, queue.ErrNotHeld):
			flash(c, "Delivery was not paused.")
		case err != nil:
			return err
		default:
			flash(c, "Delivery resumed: the queue drains at the delivery rate.")
		}
		d.refreshControl(c)
		return c.Redirect(http.StatusSeeOther, "/")
	}
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
