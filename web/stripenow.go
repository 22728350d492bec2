package web

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/actions"
)

// handleEventInStripe is "Show it in Stripe now": it fetches the object the
// event is about from Stripe's API, within the process's budget, and shows
// the event's page with it beside the event's snapshot. It only reads, so
// viewers may use it; it is a POST so that no prefetch or reload spends
// the budget.
func (d *dashboard) handleEventInStripe() echo.HandlerFunc {
	return func(c echo.Context) error {
		detail, err := d.eventDetail(c)
		if err != nil {
			return err
		}
		s, err := d.actions.ObjectInStripe(c.Request().Context(), detail.Event)
		switch {
		case errors.Is(err, actions.ErrNoStripeObject):
			return echo.NewHTTPError(http.StatusUnprocessableEntity, err.Error())
		case errors.Is(err, actions.ErrStripeOff):
			return d.renderEvent(c, http.StatusConflict, detail)
		case err != nil:
			detail.Stripe.Error = "Stripe did not give " + s.Object.String() + ": " + err.Error()
			return d.renderEvent(c, http.StatusBadGateway, detail)
		}
		detail.Stripe = detail.Stripe.WithObject(s.Snapshot, s.Current)
		return d.renderEvent(c, http.StatusOK, detail)
	}
}
