package web

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/actions"
)

// handlePauseDelivery pauses delivery to the app, with the reason every
// page's banner shows (actions.Pause), and shows the overview with what it
// did.
func (d *dashboard) handlePauseDelivery() echo.HandlerFunc {
	return func(c echo.Context) error {
		r, err := d.actions.Pause(c.Request().Context(), d.actor(c), c.FormValue("reason"))
		return d.deliveryChanged(c, r, err, "Delivery was paused already.",
			"Delivery paused: deliveries wait on the queue until it is resumed.")
	}
}

// handleResumeDelivery ends a pause, or closes an open circuit breaker
// without waiting for its probe (actions.Resume).
func (d *dashboard) handleResumeDelivery() echo.HandlerFunc {
	return func(c echo.Context) error {
		r, err := d.actions.Resume(c.Request().Context(), d.actor(c))
		return d.deliveryChanged(c, r, err, "Delivery was not paused.",
			"Delivery resumed: the queue drains at the delivery rate.")
	}
}

// deliveryChanged shows the overview after a pause or a resume, with what
// it did: was when delivery was so already, done otherwise.
func (d *dashboard) deliveryChanged(c echo.Context, r actions.DeliveryResult, err error, was, done string) error {
	var invalid *actions.InvalidError
	switch {
	case errors.As(err, &invalid):
		return echo.NewHTTPError(http.StatusBadRequest, invalid.Detail)
	case err != nil:
		return err
	case r.Changed:
		flash(c, done)
	default:
		flash(c, was)
	}
	return c.Redirect(http.StatusSeeOther, "/")
}
