package actions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookd/hookd/internal/eventjson"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/store/reconcileruns"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/worker/reconcile"
)

// RunTimeout bounds a reconcile run or a pull a person starts. It does not
// end with the request: a person closing the tab, or a script cut off,
// must not cut a run in half.
const RunTimeout = 15 * time.Minute

// ErrReconcileOff is the answer of the reconcile actions when
// reconciliation is off; ReconcileOffDetail says what it needs.
var ErrReconcileOff = errors.New("reconciliation with Stripe is off")

// ReconcileOffDetail says why reconciliation is off, and what turns it on.
const ReconcileOffDetail = "Reconciliation with Stripe is off: it needs STRIPE_API_KEY " +
	"and an endpoint with its Stripe id (STRIPE_WEBHOOK_ENDPOINT_ID, or stripe_id in HOOKD_ENDPOINTS)."

// Reconciled is what a reconcile run over the last Hours did, or in a dry
// run would do. Stopped, when set, is why the run stopped early, after
// the changes Result counts.
type Reconciled struct {
	Hours int
	reconcile.Result
	Stopped error
}

// CheckReconcileHours refuses a window that is not 1 to the longest
// window's hours, and says so; ErrReconcileOff when reconciliation is off.
func (a *Actions) CheckReconcileHours(hours int) error {
	if a.reconciler == nil {
		return ErrReconcileOff
	}
	if maxHours := int(a.reconciler.MaxWindow() / time.Hour); hours < 1 || hours > maxHours {
		return &InvalidError{Field: "hours", Detail: fmt.Sprintf("Hours must be a whole number from 1 to %d.", maxHours)}
	}
	return nil
}

// Reconcile asks Stripe for the events of the last hours and runs those
// hookd never saw through the pipeline, then audits what it recovered;
// dryRun only says what a run would do. Another run in progress is
// reconcileruns.ErrRunning; a failure before any change is returned as it
// is (Stripe's, a *stripeapi.APIError, or reconcile.ErrWindowTooLong).
func (a *Actions) Reconcile(ctx context.Context, who Actor, hours int, dryRun bool) (Reconciled, error) {
	if err := a.CheckReconcileHours(hours); err != nil {
		return Reconciled{}, err
	}
	opts := reconcile.Options{Window: time.Duration(hours) * time.Hour, DryRun: dryRun, Trigger: reconcileruns.TriggerDashboard}
	if dryRun {
		res, err := a.reconciler.RunOnce(ctx, opts)
		return Reconciled{Hours: hours, Result: res}, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RunTimeout)
	defer cancel()
	res, runErr := a.reconciler.RunOnce(ctx, opts)
	if runErr != nil && (errors.Is(runErr, reconcileruns.ErrRunning) || res.Recovered+res.Queued == 0) {
		return Reconciled{}, runErr
	}
	target := fmt.Sprintf("last %d hours: examined %d, recovered %d, queued %d", hours, res.Examined, res.Recovered, res.Queued)
	if runErr != nil {
		target += ", stopped: " + runErr.Error()
	}
	// Each recovered event committed in its own transaction already; the
	// entry has one of its own.
	err := a.queue.InTx(ctx, func(tx *queue.Tx) error {
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), audit.Reconcile, target, res.Recovered+res.Queued)
	})
	return Reconciled{Hours: hours, Result: res, Stopped: runErr}, err
}

// ReconcileStatus is whether reconciliation is on, its windows, and a
// page of the finished runs, the latest first, with the next page's
// cursor ("" on the last).
type ReconcileStatus struct {
	On                bool
	Window, MaxWindow time.Duration
	Runs              []reconcileruns.Run
	Next              string
}

// runCursor is what the reconcile runs' cursor encodes: the last run's id.
type runCursor struct {
	ID int64 `json:"i"`
}

// ReconcileRuns reads reconciliation's status and limit runs after cursor
// ("" for the latest).
func (a *Actions) ReconcileRuns(ctx context.Context, cursor string, limit int) (ReconcileStatus, error) {
	var c runCursor
	if cursor != "" {
		if err := decodeCursor(cursor, &c); err != nil || c.ID <= 0 {
			return ReconcileStatus{}, &InvalidError{Field: "cursor", Detail: "The cursor is not one the list of runs gave: " +
				"pass the next_cursor of the previous page, or none for the first page."}
		}
	}
	var st ReconcileStatus
	if a.reconciler != nil {
		st.On, st.Window, st.MaxWindow = true, a.reconciler.Window(), a.reconciler.MaxWindow()
	}
	runs, err := reconcileruns.New(a.reads.DB()).Runs(ctx, c.ID, limit)
	if err != nil {
		return ReconcileStatus{}, err
	}
	st.Runs = runs
	if n := len(runs); n > 0 && n == limit {
		st.Next = encodeCursor(runCursor{ID: runs[n-1].ID})
	}
	return st, nil
}

// Pulled is what a pull of one event from Stripe did: the pipeline's
// outcome, and Refilled when the event was dead on the queue with its
// payload erased, and Stripe's copy took its payload's place and sent it
// back to the queue.
type Pulled struct {
	EventID  string
	Outcome  receiver.Outcome
	Refilled bool
}

// Changed says whether the pull changed anything.
func (p Pulled) Changed() bool {
	return p.Refilled || p.Outcome == receiver.Processed || p.Outcome == receiver.Queued
}

// CheckPull refuses an event id that is not a Stripe event id (evt_...),
// or an account that is neither empty nor a connected account (acct_...).
func CheckPull(eventID, account string) error {
	if !strings.HasPrefix(eventID, "evt_") || eventjson.CheckID(eventID) != nil {
		return &InvalidError{Field: "event_id", Detail: "event_id must be a Stripe event id, evt_..."}
	}
	if account != "" && (!strings.HasPrefix(account, "acct_") || eventjson.CheckID(account) != nil) {
		return &InvalidError{Field: "account", Detail: "account must be empty or a Stripe connected account id, acct_..."}
	}
	return nil
}

// Pull reads one event from Stripe and runs it through the pipeline, for
// an evt_ id hookd has no trace of, or one dead on the queue whose payload
// was erased, and audits it (reconcile.Reconciler.Pull). An event a
// delivery handles right now is queue.ErrEventLocked; one the endpoints do
// not receive reconcile.ErrNotReceived.
func (a *Actions) Pull(ctx context.Context, who Actor, eventID, account string) (Pulled, error) {
	if a.reconciler == nil {
		return Pulled{}, ErrReconcileOff
	}
	if err := CheckPull(eventID, account); err != nil {
		return Pulled{}, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RunTimeout)
	defer cancel()
	p, err := a.reconciler.Pull(ctx, eventID, account)
	if err != nil {
		return Pulled{}, err
	}
	r := Pulled{EventID: eventID, Outcome: p.Outcome}
	err = a.queue.InTx(ctx, func(tx *queue.Tx) error {
		if p.Outcome == receiver.AlreadyQueued {
			var err error
			if r.Refilled, err = tx.RetryErased(ctx, eventID, p.Event.Payload); err != nil {
				return err
			}
		}
		changed := int64(0)
		if r.Changed() {
			changed = 1
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), audit.Pull, eventID, changed)
	})
	return r, err
}
