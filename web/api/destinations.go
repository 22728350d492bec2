package api

import (
	"context"
	"encoding/json"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/queue"
)

func (s *server) ListDestinations(ctx context.Context, _ ListDestinationsRequestObject) (ListDestinationsResponseObject, error) {
	stats, err := s.opts.Actions.Destinations(ctx)
	if err != nil {
		return nil, err
	}
	out := ListDestinations200JSONResponse{Destinations: make([]Destination, len(stats))}
	for i, d := range stats {
		out.Destinations[i] = destinationOf(d)
	}
	return out, nil
}

func (s *server) PauseDestination(ctx context.Context, req PauseDestinationRequestObject) (PauseDestinationResponseObject, error) {
	r, err := s.opts.Actions.PauseDestination(ctx, actor(ctx), req.Name, req.Body.Reason)
	if err != nil {
		return nil, err
	}
	return PauseDestination200JSONResponse(destinationChangeOf(r)), nil
}

func (s *server) ResumeDestination(ctx context.Context, req ResumeDestinationRequestObject) (ResumeDestinationResponseObject, error) {
	r, err := s.opts.Actions.ResumeDestination(ctx, actor(ctx), req.Name)
	if err != nil {
		return nil, err
	}
	return ResumeDestination200JSONResponse(destinationChangeOf(r)), nil
}

func (s *server) MoveDeliveries(ctx context.Context, req MoveDeliveriesRequestObject) (MoveDeliveriesResponseObject, error) {
	m, err := s.opts.Actions.MoveDeliveries(ctx, actor(ctx), req.Name, req.Body.To)
	if err != nil {
		return nil, err
	}
	return MoveDeliveries200JSONResponse{Moved: m.Moved, Merged: m.Merged}, nil
}

func (s *server) DropDeliveries(ctx context.Context, req DropDeliveriesRequestObject) (DropDeliveriesResponseObject, error) {
	n, err := s.opts.Actions.DropDeliveries(ctx, actor(ctx), req.Name)
	if err != nil {
		return nil, err
	}
	return DropDeliveries200JSONResponse{Dropped: n}, nil
}

// destinationOf is a destination as the API answers it.
func destinationOf(d queue.DestinationStats) Destination {
	out := Destination{
		Name: d.Name, Url: d.URL, Source: DestinationSource(d.Source), State: DestinationState(destinationState(d.DestinationState)),
		Paused: d.Paused(), PausedAt: d.PausedAt, PausedBy: d.PausedBy, PausedReason: d.PausedReason,
		BreakerOpen: d.BreakerOpen(), BreakerOpenedAt: d.BreakerOpenedAt, BreakerError: d.BreakerError,
		Retired: d.Retired(), RetiredAt: d.RetiredAt, Pending: d.Pending, Dead: d.Dead, OldestPendingAt: d.OldestPending,
		Calls: d.Calls, Succeeded: d.Succeeded, P50Ms: d.P50MS, P95Ms: d.P95MS, Route: map[string]any{},
	}
	// The route is JSON hookd wrote; one that is not an object is shown
	// as none.
	_ = json.Unmarshal(d.Route, &out.Route)
	return out
}

// destinationState is the state the API names: retired, paused, breaker
// open or delivering, the first that holds.
func destinationState(d queue.DestinationState) string {
	switch {
	case d.Retired():
		return "retired"
	case d.Paused():
		return "paused"
	case d.BreakerOpen():
		return "breaker_open"
	}
	return "delivering"
}

func destinationChangeOf(r actions.DestinationResult) DestinationChange {
	st := r.State
	return DestinationChange{Name: st.Name, Changed: r.Changed, Paused: st.Paused(), PausedAt: st.PausedAt,
		PausedBy: st.PausedBy, PausedReason: st.PausedReason, BreakerOpen: st.BreakerOpen()}
}

func (s *server) ListHeldKeys(ctx context.Context, req ListHeldKeysRequestObject) (ListHeldKeysResponseObject, error) {
	held, err := s.opts.Actions.HeldKeys(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	out := ListHeldKeys200JSONResponse{HeldKeys: make([]HeldKey, len(held))}
	for i, k := range held {
		out.HeldKeys[i] = HeldKey{Key: k.Key, EventId: k.EventID, DeadSince: k.DeadSince, Waiting: k.Waiting}
	}
	return out, nil
}

func (s *server) ReleaseHeldKey(ctx context.Context, req ReleaseHeldKeyRequestObject) (ReleaseHeldKeyResponseObject, error) {
	dryRun := req.Body.DryRun != nil && *req.Body.DryRun
	reason := ""
	if req.Body.Reason != nil {
		reason = *req.Body.Reason
	}
	r, err := s.opts.Actions.ReleaseHeldKey(ctx, actor(ctx), req.Name, req.Body.Key, reason, dryRun)
	if err != nil {
		return nil, err
	}
	return ReleaseHeldKey200JSONResponse{Destination: r.Destination, Key: r.Key, EventIds: r.EventIDs, Waiting: r.Waiting,
		DeadSince: r.DeadSince, Released: !dryRun}, nil
}
