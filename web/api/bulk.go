package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/queue"
)

// The actions on many events, or on one the queue may not hold: a retry
// of every dead event a filter selects, a pull from Stripe, and the read
// of an event's object in Stripe.

func (s *server) RetryDeadEvents(ctx context.Context, req RetryDeadEventsRequestObject) (RetryDeadEventsResponseObject, error) {
	b := deref(req.Body, RetryDeadRequest{})
	f := queue.EventFilter{
		Status:        queue.StatusDead,
		EventType:     strings.TrimSpace(deref(b.Type, "")),
		ErrorContains: strings.TrimSpace(deref(b.Error, "")),
		EventID:       strings.TrimSpace(deref(b.Q, "")),
		ErrorGroup:    deref(b.Group, ""),
		Endpoint:      strings.TrimSpace(deref(b.Endpoint, "")),
		Account:       strings.TrimSpace(deref(b.Account, "")),
	}
	if b.Mode != nil {
		live := *b.Mode == Live
		f.Livemode = &live
	}
	r, err := s.opts.Actions.RetryDead(ctx, actor(ctx), f, deref(b.DryRun, false))
	if err != nil {
		return nil, err
	}
	return RetryDeadEvents200JSONResponse{DryRun: r.DryRun, Filter: actions.DeadFilterText(r.Filter), Selected: r.Selected,
		Queued: r.Queued, Erased: r.Erased}, nil
}

func (s *server) PullEvent(ctx context.Context, req PullEventRequestObject) (PullEventResponseObject, error) {
	id := strings.TrimSpace(req.Body.EventId)
	p, err := s.opts.Actions.Pull(ctx, actor(ctx), id, strings.TrimSpace(deref(req.Body.Account, "")))
	switch {
	case errors.Is(err, queue.ErrEventLocked):
		return nil, problem(http.StatusConflict, typeNotApplicable, id+" is being handled by a delivery right now; "+
			"nothing was pulled. Try again once it is done.")
	case err != nil:
		return nil, err
	}
	out := PullEvent200JSONResponse{Id: id, Outcome: string(p.Outcome.Label()), Refilled: p.Refilled, Changed: p.Changed()}
	switch {
	case p.Refilled:
		out.Result = "Stripe's copy takes the place of its erased payload, and it is queued for retry"
	case p.Outcome == receiver.Processed:
		out.Result = "processed"
	case p.Outcome == receiver.Queued:
		out.Result = "processing failed, so it is on the retry queue"
	case p.Outcome == receiver.Duplicate:
		out.Result = "processed already; nothing was changed"
	default:
		out.Result = "on the retry queue already; nothing was changed"
	}
	return out, nil
}

func (s *server) GetEventInStripe(ctx context.Context, req GetEventInStripeRequestObject) (GetEventInStripeResponseObject, error) {
	in, err := s.opts.Actions.EventInStripe(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	out := GetEventInStripe200JSONResponse{Id: in.Event.EventID, Object: in.Object.String(), Current: in.Current}
	if len(in.Snapshot) > 0 {
		snapshot := json.RawMessage(in.Snapshot)
		out.Snapshot = &snapshot
	}
	return out, nil
}
