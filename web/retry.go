package web

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views"
)

// retryOne takes act (actions.Retry or RetryNow) on the event of the
// path's :id and returns to the page the button was on, saying what act
// did after the event id, or, when it did nothing because the event was not
// in the state the action needs, notApplicable.
func (d *dashboard) retryOne(c echo.Context,
	act func(context.Context, actions.Actor, string) (actions.EventResult, error), notApplicable string) error {
	id, err := eventID(c)
	if err != nil {
		return err
	}
	r, err := act(c.Request().Context(), d.actor(c), id.String())
	if errors.Is(err, queue.ErrPayloadErased) {
		flash(c, views.ErasedRetryRefusal(r.Event))
		return c.Redirect(http.StatusSeeOther, "/events/"+id.String())
	}
	if err != nil {
		return err
	}
	if r.Done != "" {
		flash(c, r.Event.EventID+" "+r.Done)
	} else {
		flash(c, r.Event.EventID+" "+notApplicable+"; nothing was changed.")
	}
	return c.Redirect(http.StatusSeeOther, localPath(c.FormValue("back"), "/events/"+id.String()))
}

func (d *dashboard) handleRetry() echo.HandlerFunc {
	return func(c echo.Context) error {
		return d.retryOne(c, d.actions.Retry, "is not dead any more")
	}
}

func (d *dashboard) handleRetryNow() echo.HandlerFunc {
	return func(c echo.Context) error {
		return d.retryOne(c, d.actions.RetryNow, "is not pending any more")
	}
}

func (d *dashboard) handleRetryAllPreview() echo.HandlerFunc {
	return func(c echo.Context) error {
		r, err := d.actions.RetryDead(c.Request().Context(), d.actor(c), listFilter(c, queue.StatusDead), true)
		if err != nil {
			return err
		}
		p := d.page(c, "Retry all?", "dead")
		return render(c, http.StatusOK, views.RetryAllConfirm(p, r.Filter, r.Selected, listURL(r.Filter, 1)))
	}
}

func (d *dashboard) handleRetryAll() echo.HandlerFunc {
	return func(c echo.Context) error {
		r, err := d.actions.RetryDead(c.Request().Context(), d.actor(c), listFilter(c, queue.StatusDead), false)
		if err != nil {
			return err
		}
		flash(c, views.RetriedDeadText(r.RetriedDead))
		return c.Redirect(http.StatusSeeOther, listURL(r.Filter, 1))
	}
}
