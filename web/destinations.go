package web

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/views"
)

func (d *dashboard) handleDestinations() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		stats, err := d.actions.Destinations(ctx)
		if err != nil {
			return err
		}
		held, err := d.actions.HeldKeys(ctx, "")
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.Destinations(d.page(c, "Destinations", "destinations"),
			views.DestinationsPage{Destinations: stats, HeldKeys: held, ForwardRate: d.actions.DestinationsConfig().ForwardRate}))
	}
}

// handleReleasePreview asks before a held key is released, saying which
// dead event holds it and how many deliveries wait behind it.
func (d *dashboard) handleReleasePreview() echo.HandlerFunc {
	return func(c echo.Context) error {
		name, key := c.Param("name"), c.FormValue("key")
		r, err := d.actions.ReleaseHeldKey(c.Request().Context(), d.actor(c), name, key, "", true)
		if err != nil {
			return d.destinationChanged(c, err, false, "", "")
		}
		return render(c, http.StatusOK, views.HeldKeyReleaseConfirm(d.page(c, "Release held key?", "destinations"),
			views.HeldKeyRelease{Destination: name, Key: key, EventID: r.EventIDs[0], DeadSince: r.DeadSince, Waiting: r.Waiting}))
	}
}

// handleRelease lets a held key go on past its dead events
// (actions.ReleaseHeldKey).
func (d *dashboard) handleRelease() echo.HandlerFunc {
	return func(c echo.Context) error {
		name, key := c.Param("name"), c.FormValue("key")
		r, err := d.actions.ReleaseHeldKey(c.Request().Context(), d.actor(c), name, key, c.FormValue("reason"), false)
		return d.destinationChanged(c, err, true, "", fmt.Sprintf("Released key %s of %s: %s stays dead, out of the key's order; "+
			"%s behind it go on in order.", key, name, strings.Join(r.EventIDs, ", "),
			views.Plural(int64(r.Waiting), "delivery", "deliveries")))
	}
}

// handlePauseDestination holds every call to one destination, with the
// reason its row shows (actions.PauseDestination).
func (d *dashboard) handlePauseDestination() echo.HandlerFunc {
	return func(c echo.Context) error {
		name := c.Param("name")
		r, err := d.actions.PauseDestination(c.Request().Context(), d.actor(c), name, c.FormValue("reason"))
		return d.destinationChanged(c, err, r.Changed, "Destination "+name+" was paused already.",
			"Destination "+name+" paused: its deliveries wait on the queue, with no attempt spent, until it is resumed.")
	}
}

// handleResumeDestination ends a destination's pause, or closes its open
// circuit breaker (actions.ResumeDestination).
func (d *dashboard) handleResumeDestination() echo.HandlerFunc {
	return func(c echo.Context) error {
		name := c.Param("name")
		r, err := d.actions.ResumeDestination(c.Request().Context(), d.actor(c), name)
		return d.destinationChanged(c, err, r.Changed, "Destination "+name+" was not paused.",
			"Destination "+name+" resumed: its deliveries waiting to retry are delivered again.")
	}
}

// handleMoveDeliveries gives a retired destination's deliveries to
// another (actions.MoveDeliveries).
func (d *dashboard) handleMoveDeliveries() echo.HandlerFunc {
	return func(c echo.Context) error {
		from, to := c.Param("name"), c.FormValue("to")
		m, err := d.actions.MoveDeliveries(c.Request().Context(), d.actor(c), from, to)
		msg := fmt.Sprintf("Moved %s of %s to %s", views.Plural(m.Moved, "delivery", "deliveries"), from, to)
		if m.Merged > 0 {
			msg += fmt.Sprintf("; %s merged into the delivery %s had of the same event", views.Plural(m.Merged, "delivery", "deliveries"), to)
		}
		return d.destinationChanged(c, err, true, "", msg+".")
	}
}

// handleDropDeliveries removes a retired destination's deliveries
// (actions.DropDeliveries).
func (d *dashboard) handleDropDeliveries() echo.HandlerFunc {
	return func(c echo.Context) error {
		name := c.Param("name")
		n, err := d.actions.DropDeliveries(c.Request().Context(), d.actor(c), name)
		return d.destinationChanged(c, err, true, "",
			fmt.Sprintf("Dropped %s of %s.", views.Plural(n, "delivery", "deliveries"), name))
	}
}

// destinationChanged shows the destinations page after an action on one,
// with what it did: was when it was so already, done otherwise.
func (d *dashboard) destinationChanged(c echo.Context, err error, changed bool, was, done string) error {
	var (
		invalid  *actions.InvalidError
		notFound *actions.NotFoundError
		conflict *actions.ConflictError
	)
	switch {
	case errors.As(err, &invalid):
		return echo.NewHTTPError(http.StatusBadRequest, invalid.Detail)
	case errors.As(err, &notFound):
		return echo.NewHTTPError(http.StatusNotFound, notFound.Error())
	case errors.As(err, &conflict):
		return echo.NewHTTPError(http.StatusConflict, conflict.Detail)
	case err != nil:
		return err
	case changed:
		flash(c, done)
	default:
		flash(c, was)
	}
	return c.Redirect(http.StatusSeeOther, "/destinations")
}
