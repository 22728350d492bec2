package actions

import (
	"context"

	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views"
)

// EventResult is what an action on one event did: the event as it was
// before, and what was done in words ("queued for retry"), or "" when
// nothing was, because the event was not in the state the action needs.
type EventResult struct {
	Event queue.Event
	Done  string
}

// Retry sends the dead event id names back to the queue, its attempts
// starting over, and audits it. An erased event is queue.ErrPayloadErased.
func (a *Actions) Retry(ctx context.Context, who Actor, id string) (EventResult, error) {
	return a.onEvent(ctx, who, id, audit.Retry, func(ctx context.Context, tx *queue.Tx, e queue.Event) (string, error) {
		if ok, err := tx.RetryDead(ctx, e.ID); err != nil || !ok {
			return "", err
		}
		return "queued for retry", nil
	})
}

// RetryNow makes the pending event id names due at once (or right after
// the attempt running), and audits it.
func (a *Actions) RetryNow(ctx context.Context, who Actor, id string) (EventResult, error) {
	return a.onEvent(ctx, who, id, audit.RetryNow, func(ctx context.Context, tx *queue.Tx, e queue.Event) (string, error) {
		h, err := tx.RetryNow(ctx, e.ID)
		return views.HasteningText(h), err
	})
}

// onEvent runs act on the event id names in one transaction with its
// audit entry, written only when act did something.
func (a *Actions) onEvent(ctx context.Context, who Actor, id string, action audit.Action,
	act func(context.Context, *queue.Tx, queue.Event) (string, error)) (EventResult, error) {
	var r EventResult
	err := a.queue.InTx(ctx, func(tx *queue.Tx) error {
		var err error
		if r.Event, err = a.eventOf(ctx, tx, id); err != nil {
			return err
		}
		if r.Done, err = act(ctx, tx, r.Event); err != nil || r.Done == "" {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), action, r.Event.EventID, 1)
	})
	return r, err
}
