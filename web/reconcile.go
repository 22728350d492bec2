package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/eventjson"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/store/reconcileruns"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views"
	"github.com/hookd/hookd/worker/reconcile"
)

// dashboardRunTimeout bounds a reconcile run or pull started from the
// dashboard. It does not end with the request: a person closing the tab
// must not cut a run in half.
const dashboardRunTimeout = 15 * time.Minute

// reconciler returns the configured reconciler, or a 404 when
// reconciliation is off: the actions do not exist then.
func (d *dashboard) reconciler() (*reconcile.Reconciler, error) {
	if d.opts.Reconciler == nil {
		return nil, echo.NewHTTPError(http.StatusNotFound, "Reconciliation with Stripe is off: it needs STRIPE_API_KEY "+
			"and an endpoint with its Stripe id (STRIPE_WEBHOOK_ENDPOINT_ID, or stripe_id in HOOKD_ENDPOINTS).")
	}
	return d.opts.Reconciler, nil
}

// reconcileForm returns the configured reconciler and the form's window in
// hours. ok is false when the request has been answered instead: a 404
// when reconciliation is off (the actions do not exist then), or the
// overview re-rendered saying what is wrong when the hours are not a whole
// number from 1 to the longest window.
func (d *dashboard) reconcileForm(c echo.Context) (r *reconcile.Reconciler, hours int, ok bool, err error) {
	r, err = d.reconciler()
	if err != nil {
		return nil, 0, false, err
	}
	raw := strings.TrimSpace(c.FormValue("hours"))
	maxHours := int(r.MaxWindow() / time.Hour)
	hours, perr := strconv.Atoi(raw)
	if perr != nil || hours < 1 || hours > maxHours {
		return nil, 0, false, d.renderOverview(c, http.StatusUnprocessableEntity, views.PruneForm{}, views.ReconcileForm{
			Hours: raw,
			Error: fmt.Sprintf("Hours must be a whole number from 1 to %d.", maxHours),
		})
	}
	return r, hours, true, nil
}

// handleReconcilePreview runs a dry run over the window and shows what a
// run would do.
func (d *dashboard) handleReconcilePreview() echo.HandlerFunc {
	return func(c echo.Context) error {
		r, hours, ok, err := d.reconcileForm(c)
		if !ok {
			return err
		}
		res, err := r.RunOnce(c.Request().Context(), reconcile.Options{
			Window: time.Duration(hours) * time.Hour, DryRun: true, Trigger: reconcileruns.TriggerDashboard})
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
		r, hours, ok, err := d.reconcileForm(c)
		if !ok {
			return err
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), dashboardRunTimeout)
		defer cancel()
		res, runErr := r.RunOnce(ctx, reconcile.Options{
			Window: time.Duration(hours) * time.Hour, Trigger: reconcileruns.TriggerDashboard})
		if errors.Is(runErr, reconcileruns.ErrRunning) {
			flash(c, "Another reconcile run is in progress; nothing was changed. Try again when it ends.")
			return c.Redirect(http.StatusSeeOther, "/")
		}
		if runErr != nil && res.Recovered+res.Queued == 0 {
			return d.reconcileFailed(c, hours, runErr)
		}
		target := fmt.Sprintf("last %d hours: examined %d, recovered %d, queued %d", hours,
			res.Examined, res.Recovered, res.Queued)
		if runErr != nil {
			target += ", stopped: " + runErr.Error()
		}
		if err := d.recordAudit(ctx, c, audit.Reconcile, target, res.Recovered+res.Queued); err != nil {
			return err
		}
		if runErr != nil {
			flash(c, "Reconcile stopped early: "+runErr.Error()+". "+res.Summary())
		} else {
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

// handlePull reads one event from Stripe and runs it through the pipeline,
// for an evt_ id the dashboard has no trace of (/search's "never seen"), or
// one dead on the queue whose payload was erased (its page).
func (d *dashboard) handlePull() echo.HandlerFunc {
	return func(c echo.Context) error {
		r, err := d.reconciler()
		if err != nil {
			return err
		}
		eventID, account, err := pullForm(c)
		if err != nil {
			return err
		}
		back := localPath(c.FormValue("back"), "/search?"+url.Values{"q": {eventID}}.Encode())
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), dashboardRunTimeout)
		defer cancel()
		p, err := r.Pull(ctx, eventID, account)
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
		refilled, err := d.recordPull(ctx, c, eventID, p)
		if err != nil {
			return err
		}
		switch {
		case refilled:
			flash(c, eventID+" pulled from Stripe: Stripe's copy takes the place of its erased payload, and it is queued "+
				"for retry. Its payload is erased again once it is delivered.")
		case p.Outcome == receiver.Processed:
			flash(c, eventID+" pulled from Stripe and processed")
		case p.Outcome == receiver.Queued:
			flash(c, eventID+" pulled from Stripe; processing failed, so it is on the retry queue")
			if e, err := d.reads.EventByEventID(ctx, eventID); err == nil {
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

// pullForm reads the event id, and the connected account if any, of a
// pull; anything but Stripe ids is a 400.
func pullForm(c echo.Context) (eventID, account string, err error) {
	eventID = strings.TrimSpace(c.FormValue("event_id"))
	if !strings.HasPrefix(eventID, "evt_") || eventjson.CheckID(eventID) != nil {
		return "", "", echo.NewHTTPError(http.StatusBadRequest, "event_id must be a Stripe event id, evt_...")
	}
	account = strings.TrimSpace(c.FormValue("account"))
	if account != "" && (!strings.HasPrefix(account, "acct_") || eventjson.CheckID(account) != nil) {
		return "", "", echo.NewHTTPError(http.StatusBadRequest, "account must be empty or a Stripe connected account id, acct_...")
	}
	return eventID, account, nil
}

// recordPull audits pull p of eventID, counting the event when the pull
// changed it. A dead event whose payload was erased is on the queue with
// nothing to deliver: Stripe's copy takes its payload's place, and it goes
// back to the queue, in the transaction of the audit entry (refilled).
func (d *dashboard) recordPull(ctx context.Context, c echo.Context, eventID string, p reconcile.Pulled) (refilled bool, err error) {
	changed := int64(0)
	if p.Outcome == receiver.Processed || p.Outcome == receiver.Queued {
		changed = 1
	}
	err = d.store.InTx(ctx, func(tx *queue.Tx) error {
		if p.Outcome == receiver.AlreadyQueued {
			var err error
			if refilled, err = tx.RetryErased(ctx, eventID, p.Event.Payload); err != nil {
				return err
			}
			if refilled {
				changed = 1
			}
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), actor(c), audit.Pull, eventID, changed)
	})
	return refilled, err
}

// recordAudit records an action whose changes committed already, each recovered
// event in its own transaction, so the entry has one of its own.
func (d *dashboard) recordAudit(ctx context.Context, c echo.Context, action audit.Action, target string, count int64) error {
	return d.store.InTx(ctx, func(tx *queue.Tx) error {
		return audit.RecordAccount(ctx, tx.PgxTx(), actor(c), action, target, count)
	})
}

// isStripeError reports whether err came from Stripe's API (a refused key,
// a missing object, a network failure on the way) rather than from hookd.
func isStripeError(err error) bool {
	var ae *stripeapi.APIError
	return errors.As(err, &ae) || errors.Is(err, reconcile.ErrWindowTooLong)
}
