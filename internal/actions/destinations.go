package actions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
)

// NotFoundError is an action on something that does not exist: What names
// it as a person reads it ("destination billing").
type NotFoundError struct{ What string }

func (e *NotFoundError) Error() string { return "There is no " + e.What + "." }

// ConflictError is an action the thing it acts on is not in the state
// for: Detail says why and what would do.
type ConflictError struct{ Detail string }

func (e *ConflictError) Error() string { return e.Detail }

// DestinationResult is what a pause or a resume of a destination did:
// Changed is false when it was so already; State is the destination
// after it.
type DestinationResult struct {
	Changed bool
	State   queue.DestinationState
}

// Destinations reads every destination with its deliveries' counts and its
// last hour's calls, for the destinations page and GET /api/v1/destinations.
func (a *Actions) Destinations(ctx context.Context) ([]queue.DestinationStats, error) {
	return a.reads.DestinationsStats(ctx)
}

// PauseDestination holds every call to the destination name, with the
// reason its page shows, and audits it: its deliveries wait on the queue,
// spending no attempt, until it is resumed; the other destinations are
// called as before. This replica holds it at once, the others within a
// second.
func (a *Actions) PauseDestination(ctx context.Context, who Actor, name, reason string) (DestinationResult, error) {
	reason = strings.Join(strings.Fields(reason), " ")
	switch {
	case reason == "":
		return DestinationResult{}, &InvalidError{Field: "reason", Detail: "Say why the destination is paused: everyone sees the reason on the destinations page."}
	case utf8.RuneCountInString(reason) > MaxPauseReason:
		return DestinationResult{}, &InvalidError{Field: "reason", Detail: "The reason is longer than 200 characters; shorten it."}
	}
	return a.changeDestination(ctx, who, name, func(tx *queue.Tx) error {
		return tx.PauseDestination(ctx, name, who.Name(), reason)
	}, queue.ErrDestinationPaused, audit.DestinationPause, name+": "+reason)
}

// ResumeDestination ends a pause of the destination name, or closes its
// open circuit breaker without waiting for its probe, and audits it.
func (a *Actions) ResumeDestination(ctx context.Context, who Actor, name string) (DestinationResult, error) {
	return a.changeDestination(ctx, who, name, func(tx *queue.Tx) error {
		return tx.ResumeDestination(ctx, name)
	}, queue.ErrDestinationNotPaused, audit.DestinationResume, name)
}

// changeDestination makes change to the destination name and audits it as
// action on target, in one transaction; change returning unchanged is no
// change, and no entry.
func (a *Actions) changeDestination(ctx context.Context, who Actor, name string, change func(*queue.Tx) error,
	unchanged error, action audit.Action, target string) (DestinationResult, error) {
	err := a.queue.InTx(ctx, func(tx *queue.Tx) error {
		if err := change(tx); err != nil {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), action, target, 0)
	})
	switch {
	case errors.Is(err, queue.ErrNotFound):
		return DestinationResult{}, &NotFoundError{What: "destination " + name}
	case err != nil && !errors.Is(err, unchanged):
		return DestinationResult{}, err
	}
	// This replica holds or calls the destination at once, as its pages
	// then say; the others within a second (worker.ControlRefresh).
	if a.control != nil {
		if rerr := a.control.Refresh(ctx); rerr != nil {
			a.logger.WarnContext(ctx, "cannot reread delivery control", "err", rerr)
		}
	}
	state, rerr := a.queue.Destination(ctx, name)
	return DestinationResult{Changed: err == nil, State: state}, rerr
}

// RetryDelivery is a person's retry of one destination's delivery of an
// event: a queue row is one delivery, so it is Retry (a dead delivery
// sent back to the queue) or RetryNow (a waiting one made due at once) of
// the row's id, whichever its status calls for. The other destinations'
// deliveries of the event are untouched.
func (a *Actions) RetryDelivery(ctx context.Context, who Actor, id string) (EventResult, error) {
	e, err := a.eventOf(ctx, a.queue, id)
	if err != nil {
		return EventResult{}, err
	}
	if e.Status == queue.StatusDead {
		return a.Retry(ctx, who, e.ID.String())
	}
	return a.RetryNow(ctx, who, e.ID.String())
}

// MoveDeliveries gives every queued and dead delivery of the retired
// destination from to the destination to, and audits it; a delivery of an
// event to already has is merged into that one. It says how many moved
// and how many merged.
func (a *Actions) MoveDeliveries(ctx context.Context, who Actor, from, to string) (queue.Moved, error) {
	if from == to {
		return queue.Moved{}, &InvalidError{Field: "to", Detail: "Choose another destination to move the deliveries to."}
	}
	if to == "" {
		return queue.Moved{}, &InvalidError{Field: "to", Detail: "Choose the destination to move the deliveries to."}
	}
	var m queue.Moved
	err := a.queue.InTx(ctx, func(tx *queue.Tx) error {
		var err error
		if m, err = tx.MoveDeliveries(ctx, from, to); err != nil {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), audit.DestinationMove,
			fmt.Sprintf("%s to %s (%d merged)", from, to, m.Merged), m.Moved+m.Merged)
	})
	return m, retiredError(err, from, to)
}

// DropDeliveries removes every queued and dead delivery of the retired
// destination name, and audits it; an event whose last delivery it was is
// done. It says how many it dropped.
func (a *Actions) DropDeliveries(ctx context.Context, who Actor, name string) (int64, error) {
	var n int64
	err := a.queue.InTx(ctx, func(tx *queue.Tx) error {
		var err error
		if n, err = tx.DropDeliveries(ctx, name); err != nil {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), audit.DestinationDrop, name, n)
	})
	return n, retiredError(err, name, "")
}

// retiredError is a move's or a drop's error as a person reads it.
func retiredError(err error, from, to string) error {
	switch {
	case errors.Is(err, queue.ErrNotFound) && to != "":
		return &NotFoundError{What: "destination " + from + " or " + to}
	case errors.Is(err, queue.ErrNotFound):
		return &NotFoundError{What: "destination " + from}
	case errors.Is(err, queue.ErrNotRetired):
		return &ConflictError{Detail: "Destination " + from + " is configured: only a retired destination's deliveries " +
			"are moved or dropped. Take it out of the destinations file first."}
	}
	return err
}
