package web

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/views"
)

// pruneDays reads the prune form's days; ok is false, with the overview
// re-rendered saying what is wrong, when they are not a whole number of at
// least actions.MinPruneDays.
func (d *dashboard) pruneDays(c echo.Context) (days int, ok bool, err error) {
	raw := strings.TrimSpace(c.FormValue("days"))
	days, perr := strconv.Atoi(raw)
	if perr == nil {
		perr = actions.CheckPruneDays(days)
	}
	if perr != nil {
		return 0, false, d.renderOverview(c, http.StatusUnprocessableEntity, views.PruneForm{
			Days:  raw,
			Error: actions.CheckPruneDays(0).Error(),
		}, views.ReconcileForm{})
	}
	return days, true, nil
}

func (d *dashboard) handlePrunePreview() echo.HandlerFunc {
	return func(c echo.Context) error {
		days, ok, err := d.pruneDays(c)
		if !ok {
			return err
		}
		p, err := d.actions.Prune(c.Request().Context(), d.actor(c), days, true)
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.PruneConfirm(d.page(c, "Prune the redelivery guard?", "overview"), p.Days, p.Removed))
	}
}

func (d *dashboard) handlePrune() echo.HandlerFunc {
	return func(c echo.Context) error {
		days, ok, err := d.pruneDays(c)
		if !ok {
			return err
		}
		p, err := d.actions.Prune(c.Request().Context(), d.actor(c), days, false)
		if err != nil {
			return err
		}
		flash(c, fmt.Sprintf("Removed %s event ids older than %s from the redelivery guard", views.Count(p.Removed),
			actions.DaysText(p.Days)))
		return c.Redirect(http.StatusSeeOther, "/")
	}
}
