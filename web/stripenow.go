package web

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/stripeapi"
)

// stripeNowTimeout bounds one fetch of an object from Stripe, its wait for
// the API budget included.
const stripeNowTimeout = 15 * time.Second

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
		ref, snapshot, ok := stripeapi.EventObject([]byte(detail.Event.Payload))
		switch {
		case !ok:
			return echo.NewHTTPError(http.StatusUnprocessableEntity, "this event names no object hookd can fetch from Stripe")
		case d.opts.Stripe == nil:
			return d.renderEvent(c, http.StatusConflict, detail)
		}
		ctx, cancel := context.WithTimeout(c.Request().Context(), stripeNowTimeout)
		defer cancel()
		current, err := d.opts.Stripe.Object(ctx, ref)
		if err != nil {
			detail.Stripe.Error = "Stripe did not give " + ref.String() + ": " + err.Error()
			return d.renderEvent(c, http.StatusBadGateway, detail)
		}
		detail.Stripe = detail.Stripe.WithObject(snapshot, current)
		return d.renderEvent(c, http.StatusOK, detail)
	}
}
