package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views"
)

// maxUngenerated bounds the page's list of events Stripe could not
// generate: the newest, and how many there are in all.
const maxUngenerated = 50

func (d *dashboard) handleFailures() echo.HandlerFunc {
	return func(c echo.Context) error {
		eventType, destination := strings.TrimSpace(c.QueryParam("type")), strings.TrimSpace(c.QueryParam("destination"))
		groups, total, err := d.actions.FailureGroups(c.Request().Context(), eventType, destination, actions.MaxFailureGroups)
		if err != nil {
			return err
		}
		names, err := d.reads.DestinationNames(c.Request().Context())
		if err != nil {
			return err
		}
		lost, lostTotal, err := d.opts.Stores.Ungenerated.List(c.Request().Context(), maxUngenerated)
		if err != nil {
			return err
		}
		l := views.FailureList{EventType: eventType, Destination: destination, Destinations: names, Groups: groups, Total: total, Ungenerated: lost, UngeneratedTotal: lostTotal}
		return render(c, http.StatusOK, views.Failures(d.page(c, "Failures", "failures"), l))
	}
}

// failureGroup reads the group a retry form names: its error, required,
// since an empty one would widen the retry to every event on the queue;
// its destination ("" for every destination the error hit); and the type
// filter the page had, "" for every type the error hit.
func failureGroup(c echo.Context) (queue.FailureGroup, error) {
	g := queue.FailureGroup{EventType: strings.TrimSpace(c.FormValue("type")), ErrorGroup: c.FormValue("group"),
		Destination: strings.TrimSpace(c.FormValue("destination"))}
	if strings.TrimSpace(g.ErrorGroup) == "" {
		return g, echo.NewHTTPError(http.StatusBadRequest, "Which failure group? The form needs the group's error.")
	}
	return g, nil
}

func (d *dashboard) handleRetryGroupPreview() echo.HandlerFunc {
	return func(c echo.Context) error {
		g, err := failureGroup(c)
		if err != nil {
			return err
		}
		r, err := d.actions.RetryGroup(c.Request().Context(), d.actor(c), g, true)
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.RetryGroupConfirm(d.page(c, "Retry this failure group?", "failures"),
			r.Group, r.Dead, r.Pending))
	}
}

// handleRetryGroup sends every event of a failure group for an attempt now
// (actions.RetryGroup).
func (d *dashboard) handleRetryGroup() echo.HandlerFunc {
	return func(c echo.Context) error {
		g, err := failureGroup(c)
		if err != nil {
			return err
		}
		r, err := d.actions.RetryGroup(c.Request().Context(), d.actor(c), g, false)
		if err != nil {
			return err
		}
		flash(c, views.RetriedGroup(r.Revived.Queued+r.Hastened.DueNow, r.Hastened.DueAfterAttempt, r.Revived.Erased))
		return c.Redirect(http.StatusSeeOther, "/failures")
	}
}
