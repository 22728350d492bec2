package web

import (
	"context"
	"errors"
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views"
)

// retryOne sends one event back for a retry with act, in one transaction
// with its audit entry, and returns to the page the button was on. act
// says what it did, for the flash after the event id, or "" when it did
// nothing because the event was not in the state the action needs, which
// notApplicable then says.
func (d *dashboard) retryOne(c echo.Context, action audit.Action,
	act func(context.Context, *queue.Tx, uuid.UUID) (string, error), notApplicable string) error {
	ctx := c.Request().Context()
	id, err := eventID(c)
	if err != nil {
		return err
	}
	var e queue.Event
	var done string
	err = d.store.InTx(ctx, func(tx *queue.Tx) error {
		var err error
		if e, err = tx.Event(ctx, id); err != nil {
			return err
		}
		if done, err = act(ctx, tx, id); err != nil || done == "" {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), actor(c), action, e.EventID, 1)
	})
	if errors.Is(err, queue.ErrPayloadErased) {
		flash(c, views.ErasedRetryRefusal(e))
		return c.Redirect(http.StatusSeeOther, "/events/"+id.String())
	}
	if err != nil {
		return err
	}
	if done != "" {
		flash(c, e.EventID+" "+done)
	} else {
		flash(c, e.EventID+" "+notApplicable+"; nothing was changed.")
	}
	return c.Redirect(http.StatusSeeOther, localPath(c.FormValue("back"), "/events/"+id.String()))
}

func (d *dashboard) handleRetry() echo.HandlerFunc {
	return func(c echo.Context) error {
		return d.retryOne(c, audit.Retry, func(ctx context.Context, tx *queue.Tx, id uuid.UUID) (string, error) {
			if ok, err := tx.RetryDead(ctx, id); err != nil || !ok {
				return "", err
			}
			return "queued for retry", nil
		}, "is not dead any more")
	}
}

func (d *dashboard) handleRetryNow() echo.HandlerFunc {
	return func(c echo.Context) error {
		return d.retryOne(c, audit.RetryNow, func(ctx context.Context, tx *queue.Tx, id uuid.UUID) (string, error) {
			h, err := tx.RetryNow(ctx, id)
			return views.HasteningText(h), err
		}, "is not pending any more")
	}
}

func (d *dashboard) handleRetryAllPreview() echo.HandlerFunc {
	return func(c echo.Context) error {
		f := listFilter(c, queue.StatusDead)
		n, err := d.reads.CountEvents(c.Request().Context(), f)
		if err != nil {
			return err
		}
		p := d.page(c, "Retry all?", "dead")
		return render(c, http.StatusOK, views.RetryAllConfirm(p, f, n, listURL(f, 1)))
	}
}

func (d *dashboard) handleRetryAll() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		f := listFilter(c, queue.StatusDead)
		var r queue.RetriedDead
		err := d.store.InTx(ctx, func(tx *queue.Tx) error {
			var err error
			if r, err = tx.RetryDeadMatching(ctx, f); err != nil {
				return err
			}
			return audit.RecordAccount(ctx, tx.PgxTx(), actor(c), audit.RetryAll, filterText(f), r.Queued)
		})
		if err != nil {
			return err
		}
		flash(c, views.RetriedDeadText(r))
		return c.Redirect(http.StatusSeeOther, listURL(f, 1))
	}
}

// filterText records a bulk retry's filter in the audit log.
func filterText(f queue.EventFilter) string {
	if filter := views.DescribeFilter(f); filter != "" {
		return "dead events with " + filter
	}
	return "all dead events"
}
