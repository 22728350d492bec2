package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views"
)

// maxFailureGroups bounds the failures page. Masking keeps the number of
// groups small; if an error text defeats it, every event becomes a group of
// its own, and the page shows the largest ones rather than all of them.
const maxFailureGroups = 200

// maxUngenerated bounds the page's list of events Stripe could not
// generate: the newest, and how many there are in all.
const maxUngenerated = 50

func (d *dashboard) handleFailures() echo.HandlerFunc {
	return func(c echo.Context) error {
		eventType := strings.TrimSpace(c.QueryParam("type"))
		groups, total, err := d.reads.FailureGroups(c.Request().Context(), maxFailureGroups, eventType)
		if err != nil {
			return err
		}
		lost, lostTotal, err := d.opts.Stores.Ungenerated.List(c.Request().Context(), maxUngenerated)
		if err != nil {
			return err
		}
		l := views.FailureList{EventType: eventType, Groups: groups, Total: total, Ungenerated: lost, UngeneratedTotal: lostTotal}
		return render(c, http.StatusOK, views.Failures(d.page(c, "Failures", "failures"), l))
	}
}

// failureGroup reads the group a retry form names: its error, required,
// since an empty one would widen the retry to every event on the queue;
// and the type filter the page had, "" for every type the error hit.
func failureGroup(c echo.Context) (queue.FailureGroup, error) {
	g := queue.FailureGroup{EventType: strings.TrimSpace(c.FormValue("type")), ErrorGroup: c.FormValue("group")}
	if strings.TrimSpace(g.ErrorGroup) == "" {
		return g, echo.NewHTTPError(http.StatusBadRequest, "Which failure group? The form needs the group's error.")
	}
	return g, nil
}

func (d *dashboard) handleRetryGroupPreview() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		g, err := failureGroup(c)
		if err != nil {
			return err
		}
		dead, err := d.reads.CountEvents(ctx, g.Filter(queue.StatusDead))
		if err != nil {
			return err
		}
		pending, err := d.reads.CountEvents(ctx, g.Filter(queue.StatusPending))
		if err != nil {
			return err
		}
		groups, _, err := d.reads.FailureGroups(ctx, maxFailureGroups, g.EventType)
		if err != nil {
			return err
		}
		for _, found := range groups {
			if found.ErrorGroup == g.ErrorGroup {
				g.Types = found.Types
			}
		}
		return render(c, http.StatusOK, views.RetryGroupConfirm(d.page(c, "Retry this failure group?", "failures"),
			g, dead, pending))
	}
}

// handleRetryGroup sends every event of a failure group for an attempt now,
// the way a person's retry of one event does: dead events go back on the
// queue with their attempts starting over, pending ones become due. The
// retry loop then runs each under its lock, after the dedup check, like any
// retry.
func (d *dashboard) handleRetryGroup() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		g, err := failureGroup(c)
		if err != nil {
			return err
		}
		var revived queue.RetriedDead
		var hastened queue.Hastened
		err = d.store.InTx(ctx, func(tx *queue.Tx) error {
			// Pending first: the dead ones, once sent back, are pending too
			// and would be counted twice.
			var err error
			if hastened, err = tx.RetryNowMatching(ctx, g.Filter(queue.StatusPending)); err != nil {
				return err
			}
			if revived, err = tx.RetryDeadMatching(ctx, g.Filter(queue.StatusDead)); err != nil {
				return err
			}
			return audit.RecordAccount(ctx, tx.PgxTx(), actor(c), audit.RetryGroup,
				views.DescribeFilter(g.Filter(queue.StatusDead)), revived.Queued+hastened.Total())
		})
		if err != nil {
			return err
		}
		flash(c, views.RetriedGroup(revived.Queued+hastened.DueNow, hastened.DueAfterAttempt, revived.Erased))
		return c.Redirect(http.StatusSeeOther, "/failures")
	}
}
