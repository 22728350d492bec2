package api

import (
	"context"
	"strings"
	"time"

	"github.com/hookd/hookd/internal/store/rejections"
)

// The overview's upkeep: prune, erase, reconcile; and the rejection log.

func (s *server) PruneRedeliveryGuard(ctx context.Context, req PruneRedeliveryGuardRequestObject) (PruneRedeliveryGuardResponseObject, error) {
	p, err := s.opts.Actions.Prune(ctx, actor(ctx), req.Body.Days, deref(req.Body.DryRun, false))
	if err != nil {
		return nil, err
	}
	return PruneRedeliveryGuard200JSONResponse{DryRun: p.DryRun, Days: p.Days, Removed: p.Removed}, nil
}

func (s *server) EraseCustomer(ctx context.Context, req EraseCustomerRequestObject) (EraseCustomerResponseObject, error) {
	customer := strings.TrimSpace(req.Body.Customer)
	e, err := s.opts.Actions.Erase(ctx, actor(ctx), customer)
	if err != nil {
		return nil, err
	}
	return EraseCustomer200JSONResponse{Customer: customer, Payloads: e.Payloads, Dead: e.Dead, Pending: e.Pending,
		Summary: e.Summary(customer)}, nil
}

func (s *server) Reconcile(ctx context.Context, req ReconcileRequestObject) (ReconcileResponseObject, error) {
	r, err := s.opts.Actions.Reconcile(ctx, actor(ctx), req.Body.Hours, deref(req.Body.DryRun, false))
	if err != nil {
		return nil, err
	}
	c := r.Counts
	out := Reconcile200JSONResponse{DryRun: r.DryRun, Hours: r.Hours, Since: r.Since, OtherVersion: r.OtherVersion,
		DisabledEndpoints: []string{}, Summary: r.Summary(), Examined: c.Examined, AlreadyProcessed: c.AlreadyProcessed,
		AlreadyQueued: c.AlreadyQueued, Recovered: c.Recovered, Queued: c.Queued, InFlight: c.InFlight,
		SkippedType: c.SkippedType, SkippedYoung: c.SkippedYoung}
	for _, e := range r.Disabled() {
		out.DisabledEndpoints = append(out.DisabledEndpoints, e.StripeID)
	}
	if r.Stopped != nil {
		stopped := r.Stopped.Error()
		out.Stopped = &stopped
	}
	return out, nil
}

func (s *server) GetReconcile(ctx context.Context, req GetReconcileRequestObject) (GetReconcileResponseObject, error) {
	st, err := s.opts.Actions.ReconcileRuns(ctx, deref(req.Params.Cursor, ""), deref(req.Params.Limit, 50))
	if err != nil {
		return nil, err
	}
	out := GetReconcile200JSONResponse{Enabled: st.On, Runs: make([]ReconcileRun, len(st.Runs))}
	if st.On {
		window, longest := int(st.Window/time.Hour), int(st.MaxWindow/time.Hour)
		out.WindowHours, out.MaxWindowHours = &window, &longest
	}
	for i, r := range st.Runs {
		c := r.Counts
		out.Runs[i] = ReconcileRun{Id: r.ID, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Trigger: string(r.Trigger),
			Since: r.Since, Error: r.Error, Examined: c.Examined, AlreadyProcessed: c.AlreadyProcessed,
			AlreadyQueued: c.AlreadyQueued, Recovered: c.Recovered, Queued: c.Queued, InFlight: c.InFlight,
			SkippedType: c.SkippedType, SkippedYoung: c.SkippedYoung}
	}
	if st.Next != "" {
		out.NextCursor = &st.Next
	}
	return out, nil
}

func (s *server) ListRejections(ctx context.Context, req ListRejectionsRequestObject) (ListRejectionsResponseObject, error) {
	p := req.Params
	f := rejections.Filter{Reason: rejections.Reason(deref(p.Reason, "")), ClaimedEventID: strings.TrimSpace(deref(p.Q, "")),
		Limit: deref(p.Limit, 50)}
	page, err := s.opts.Actions.Rejections(ctx, f, deref(p.Cursor, ""))
	if err != nil {
		return nil, err
	}
	out := ListRejections200JSONResponse{Total: page.Total, Rejections: make([]Rejection, len(page.Rejections))}
	for i, r := range page.Rejections {
		out.Rejections[i] = Rejection{Id: r.ID, At: r.At, Reason: string(r.Reason), HttpStatus: r.HTTPStatus, Detail: r.Detail,
			RemoteAddr: r.RemoteAddr, ClaimedEventId: r.ClaimedEventID, SignedAt: r.SignedAt, SignatureMatches: r.SignatureMatches,
			Count: r.Count}
	}
	if page.Next != "" {
		out.NextCursor = &page.Next
	}
	return out, nil
}
