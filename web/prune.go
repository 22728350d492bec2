package web

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views"
	"github.com/hookd/hookd/worker/maintenance"
)

// minPruneDays is Stripe's redelivery window in days: a marker pruned
// sooner lets a redelivery of its event be processed again.
const minPruneDays = int(maintenance.MinMarkerRetention / (24 * time.Hour))

// pruneDays reads the prune form's days; ok is false, with the overview
// re-rendered saying what is wrong, when they are not a whole number of at
// least minPruneDays.
func (d *dashboard) pruneDays(c echo.Context) (days int, ok bool, err error) {
	raw := strings.TrimSpace(c.FormValue("days"))
	days, perr := strconv.Atoi(raw)
	if perr != nil || days < minPruneDays {
		return 0, false, d.renderOverview(c, http.StatusUnprocessableEntity, views.PruneForm{
			Days: raw,
			Error: fmt.Sprintf("Days must be a whole number, at least %d: Stripe redelivers an event for up to %d days, "+
				"and a redelivery whose id was pruned would be delivered again.", minPruneDays, minPruneDays),
		}, views.ReconcileForm{})
	}
	// Beyond this, days*24h overflows a time.Duration; nothing is that old.
	return min(days, 100_000), true, nil
}

func (d *dashboard) handlePrunePreview() echo.HandlerFunc {
	return func(c echo.Context) error {
		days, ok, err := d.pruneDays(c)
		if !ok {
			return err
		}
		n, err := d.reads.CountPrunable(c.Request().Context(), time.Duration(days)*24*time.Hour)
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.PruneConfirm(d.page(c, "Prune the redelivery guard?", "overview"), days, n))
	}
}

func (d *dashboard) handlePrune() echo.HandlerFunc {
	return func(c echo.Context) error {
		days, ok, err := d.pruneDays(c)
		if !ok {
			return err
		}
		ctx := c.Request().Context()
		var removed int64
		// One transaction for the prune and its audit entry: on a very
		// large prune that is one long transaction rather than the pruner's
		// short batches, the price of never losing the record of it.
		err = d.store.InTx(ctx, func(tx *queue.Tx) error {
			var err error
			if removed, err = tx.PruneProcessed(ctx, time.Duration(days)*24*time.Hour); err != nil {
				return err
			}
			if err := tx.RecordPrune(ctx, removed); err != nil {
				return err
			}
			return audit.RecordAccount(ctx, tx.PgxTx(), actor(c), audit.Prune, "redelivery guard ids older than "+daysText(days), removed)
		})
		if err != nil {
			return err
		}
		flash(c, fmt.Sprintf("Removed %s event ids older than %s from the redelivery guard", views.Count(removed), daysText(days)))
		return c.Redirect(http.StatusSeeOther, "/")
	}
}

// daysText is always plural, "1 days" included: the confirmation and the
// flash keep one fixed wording that tests and people can search for.
func daysText(days int) string {
	return views.Count(int64(days)) + " days"
}
