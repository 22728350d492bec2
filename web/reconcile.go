package web

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/store/reconcileruns"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views"
	"github.com/hookd/hookd/worker/reconcile"
)

// reconciler returns the configured reconciler, or a 404 when
// reconciliation is off: the actions do not exist then.
func (d *dashboard) reconciler() (*reconcile.Reconciler, error) {
	if d.opts.Reconciler == nil {
		return nil, echo.NewHTTPError(http.StatusNotFound, actions.ReconcileOffDetail)
	}
	return d.opts.Reconciler, nil
}

// reconcileHours reads the form's window in hours. ok is false when the
// request has been answered instead: a 404 when reconciliation is off
// (the actions do not exist then), or the overview re-rendered saying what
// is wrong when the hours are not a whole number from 1 to the longest
// window.
func (d *dashboard) reconcileHours(c echo.Context) (hours int, ok bool, err error) {
	if _, err := d.reconciler(); err != nil {
		return 0, false, err
	}
	raw := strings.TrimSpace(c.FormValue("hours"))
	hours, perr := strconv.Atoi(raw)
	if perr != nil {
		hours = 0
	}
	var invalid *actions.InvalidError
	if err := d.actions.CheckReconcileHours(hours); errors.As(err, &invalid) {
		return 0, false, d.renderOverview(c, http.StatusUnprocessableEntity, views.PruneForm{}, views.ReconcileForm{
			Hours: raw, Error: invalid.Detail,
		})
	}
	return hours, true, nil
}

// handleReconcilePreview runs a dry run over the window and shows what a
// run would do.
func (d *dashboard) handleReconcilePreview() echo.HandlerFunc {
	return func(c echo.Context) error {
		hours, ok, err := d.reconcileHours(c)
		if !ok {
			return err
		}
		res, err := d.actions.Reconcile(c.Request().Context(), d.actor(c), hours, true)
		if err != nil {
			return d.reconcileFailed(c, hours, err)
		}
		preview := views.ReconcilePreview{Hours: hours, Counts: res.Counts, OtherVersion: res.OtherVersion}
		for _, s := range res.Disabled() {
			preview.Disabled = append(preview.Disabled, s.StripeID)
		}
		for _, s := range res.Endpoints {
			if s.APIVersion != "" && !slices.Contains(preview.EndpointVersions, s.APIVersion) {
				preview.EndpointVersions = append(preview.EndpointVersions, s.APIVersion)
			}
		}
		return render(c, http.StatusOK, views.ReconcileConfirm(d.page(c, "Reconcile with Stripe?", "overview"), preview))
	}
}

// handleReconcile runs a reconciliation and records it in the audit log
// with what it recovered.
func (d *dashboard) handleReconcile() echo.HandlerFunc {
	return func(c echo.Context) error {
		hours, ok, err := d.reconcileHours(c)
		if !ok {
			return err
		}
		res, err := d.actions.Reconcile(c.Request().Context(), d.actor(c), hours, false)
		switch {
		case errors.Is(err, reconcileruns.ErrRunning):
			flash(c, "Another reconcile run is in progress; nothing was changed. Try again when it ends.")
			return c.Redirect(http.StatusSeeOther, "/")
		case err != nil:
			return d.reconcileFailed(c, hours, err)
		case res.Stopped != nil:
			flash(c, "Reconcile stopped early: "+res.Stopped.Error()+". "+res.Summary())
		default:
			flash(c, "Reconciled with Stripe: "+res.Summary())
		}
		return c.Redirect(http.StatusSeeOther, "/")
	}
}

// reconcileFailed shows the overview with Stripe's error at the reconcile
// form. The request was fine; Stripe's API (or the key) was not, hence 502.
func (d *dashboard) reconcileFailed(c echo.Context, hours int, err error) error {
	if !isStripeError(err) {
		return err
	}
	return d.renderOverview(c, http.StatusBadGateway, views.PruneForm{}, views.ReconcileForm{
		Hours: strconv.Itoa(hours), Error: "Nothing was changed: " + err.Error(),
	})
}

// handlePull reads one event from Stripe and runs it through the pipeline, for
// an evt_ id the dashboard has no trace of (/search's "never seen"), or
// one dead on the queue whose payload was erased (its page).
func (d *dashboard) handlePull() echo.HandlerFunc {
	return func(c echo.Context) error {
		if _, err := d.reconciler(); err != nil {
			return err
		}
		eventID, account := strings.TrimSpace(c.FormValue("event_id")), strings.TrimSpace(c.FormValue("account"))
		if err := actions.CheckPull(eventID, account); err != nil {
			return echo.NewHTTPError(http.StatusBadRequest, err.Error())
		}
		back := localPath(c.FormValue("back"), "/search?"+url.Values{"q": {eventID}}.Encode())
		p, err := d.actions.Pull(c.Request().Context(), d.actor(c), eventID, account)
		switch {
		case errors.Is(err, queue.ErrEventLocked):
			flash(c, eventID+" is being handled by a delivery right now; nothing was pulled.")
			return c.Redirect(http.StatusSeeOther, back)
		case errors.Is(err, reconcile.ErrNotReceived), errors.Is(err, queue.ErrNotGranted), isStripeError(err):
			flash(c, "Nothing was pulled: "+err.Error())
			return c.Redirect(http.StatusSeeOther, back)
		case err != nil:
			return err
		}
		switch {
		case p.Refilled:
			flash(c, eventID+" pulled from Stripe: Stripe's copy takes the place of its erased payload, and it is queued "+
				"for retry. Its payload is erased again once it is delivered.")
		case p.Outcome == receiver.Processed:
			flash(c, eventID+" pulled from Stripe and processed")
		case p.Outcome == receiver.Queued:
			flash(c, eventID+" pulled from Stripe; processing failed, so it is on the retry queue")
			if e, err := d.reads.EventByEventID(c.Request().Context(), eventID); err == nil {
				back = "/events/" + e.ID.String()
			}
		case p.Outcome == receiver.Duplicate:
			flash(c, eventID+" was processed already; nothing was changed.")
		case p.Outcome == receiver.AlreadyQueued:
			flash(c, eventID+" is on the retry queue already; nothing was changed.")
		}
		return c.Redirect(http.StatusSeeOther, back)
	}
}

// isStripeError reports whether err came from Stripe's API (a refused key,
// a missing object, a network failure on the way) rather than from hookd.
func isStripeError(err error) bool {
	var ae *stripeapi.APIError
	return errors.As(err, &ae) || errors.Is(err, reconcile.ErrWindowTooLong)
}
