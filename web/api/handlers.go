package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
)

func (s *server) ListEvents(ctx context.Context, req ListEventsRequestObject) (ListEventsResponseObject, error) {
	p := req.Params
	f := queue.EventFilter{
		Status:        queue.Status(deref(p.Status, ListEventsParamsStatus(queue.StatusDead))),
		EventType:     strings.TrimSpace(deref(p.Type, "")),
		ErrorContains: strings.TrimSpace(deref(p.Error, "")),
		EventID:       strings.TrimSpace(deref(p.Q, "")),
		ErrorGroup:    deref(p.Group, ""),
		Endpoint:      strings.TrimSpace(deref(p.Endpoint, "")),
		Account:       strings.TrimSpace(deref(p.Account, "")),
		Destination:   strings.TrimSpace(deref(p.Destination, "")),
		Limit:         deref(p.Limit, 50),
	}
	if p.Mode != nil {
		live := *p.Mode == Live
		f.Livemode = &live
	}
	if deref(p.Stuck, false) {
		f.StuckAfter = queue.OverdueAfter
	}
	page, err := s.opts.Actions.ListEvents(ctx, f, deref(p.Cursor, ""))
	if err != nil {
		return nil, err
	}
	out := ListEvents200JSONResponse{Events: make([]Event, len(page.Events)), Total: page.Total}
	for i, e := range page.Events {
		out.Events[i] = eventOf(e)
	}
	if page.Next != "" {
		out.NextCursor = &page.Next
	}
	return out, nil
}

func (s *server) GetEvent(ctx context.Context, req GetEventRequestObject) (GetEventResponseObject, error) {
	d, err := s.opts.Actions.Event(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	e := eventOf(d.Event)
	out := GetEvent200JSONResponse{
		Account: e.Account, ApiVersion: e.ApiVersion, Attempts: e.Attempts, CreatedAt: e.CreatedAt, Endpoint: e.Endpoint,
		Id: e.Id, LastAttemptAt: e.LastAttemptAt, LastError: e.LastError, Livemode: e.Livemode, ManualRetry: e.ManualRetry,
		NextRetryAt: e.NextRetryAt, PayloadErased: e.PayloadErased, QueueId: e.QueueId, Status: e.Status, Type: e.Type,
		Payload: d.Event.Payload, AttemptsMade: make([]Attempt, len(d.Attempts)),
	}
	for i, a := range d.Attempts {
		out.AttemptsMade[i] = Attempt{AttemptedAt: a.AttemptedAt, DurationMs: float32(a.DurationMS), Error: a.Error,
			HttpStatus: a.HTTPStatus, Number: a.Number, Outcome: string(a.Outcome), Path: string(a.Path), TraceId: a.TraceID}
	}
	return out, nil
}

func (s *server) RetryEvent(ctx context.Context, req RetryEventRequestObject) (RetryEventResponseObject, error) {
	r, err := s.opts.Actions.Retry(ctx, actor(ctx), req.Id)
	if err != nil {
		return nil, err
	}
	if r.Done == "" {
		return nil, notApplicable(r.Event, "it is not dead", "retry-now makes a pending event due at once")
	}
	return RetryEvent200JSONResponse{Id: r.Event.EventID, Result: r.Done}, nil
}

func (s *server) RetryEventNow(ctx context.Context, req RetryEventNowRequestObject) (RetryEventNowResponseObject, error) {
	r, err := s.opts.Actions.RetryNow(ctx, actor(ctx), req.Id)
	if err != nil {
		return nil, err
	}
	if r.Done == "" {
		return nil, notApplicable(r.Event, "it is not pending", "retry sends a dead event back to the queue")
	}
	return RetryEventNow200JSONResponse{Id: r.Event.EventID, Result: r.Done}, nil
}

// notApplicable is the 409 of an action on an event not in the state it
// needs.
func notApplicable(e queue.Event, why, instead string) *problemError {
	return problem(http.StatusConflict, typeNotApplicable, "Nothing was changed: event "+e.EventID+" is "+string(e.Status)+
		", so "+why+"; "+instead+".")
}

func (s *server) PauseDelivery(ctx context.Context, req PauseDeliveryRequestObject) (PauseDeliveryResponseObject, error) {
	r, err := s.opts.Actions.Pause(ctx, actor(ctx), req.Body.Reason)
	if err != nil {
		return nil, err
	}
	return PauseDelivery200JSONResponse(deliveryOf(r)), nil
}

func (s *server) ResumeDelivery(ctx context.Context, _ ResumeDeliveryRequestObject) (ResumeDeliveryResponseObject, error) {
	r, err := s.opts.Actions.Resume(ctx, actor(ctx))
	if err != nil {
		return nil, err
	}
	return ResumeDelivery200JSONResponse(deliveryOf(r)), nil
}

func (s *server) ListAudit(ctx context.Context, req ListAuditRequestObject) (ListAuditResponseObject, error) {
	page, err := s.opts.Actions.Audit(ctx, deref(req.Params.Cursor, ""), deref(req.Params.Limit, 50))
	if err != nil {
		return nil, err
	}
	out := ListAudit200JSONResponse{Entries: make([]AuditEntry, len(page.Entries))}
	for i, e := range page.Entries {
		out.Entries[i] = auditEntryOf(e)
	}
	if page.Next != "" {
		out.NextCursor = &page.Next
	}
	return out, nil
}

func (s *server) GetOpenAPI(context.Context, GetOpenAPIRequestObject) (GetOpenAPIResponseObject, error) {
	b, err := DocumentJSON()
	if err != nil {
		return nil, err
	}
	return documentResponse(b), nil
}

// documentResponse serves the document's JSON byte for byte as
// openapi.json commits it.
type documentResponse []byte

func (d documentResponse) VisitGetOpenAPIResponse(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(d)
	return err
}

func eventOf(e queue.Event) Event {
	return Event{
		Id: e.EventID, QueueId: e.ID, Type: e.EventType, Status: EventStatus(e.Status), Attempts: e.Attempts,
		LastError: e.LastError, NextRetryAt: e.NextRetryAt, CreatedAt: e.CreatedAt, LastAttemptAt: e.LastAttemptAt,
		ManualRetry: e.ManualRetry, Endpoint: e.Endpoint, Livemode: e.Livemode, Account: e.Account,
		ApiVersion: e.APIVersion, PayloadErased: e.PayloadErased(), Destination: &e.Destination,
	}
}

func deliveryOf(r actions.DeliveryResult) Delivery {
	st := r.State
	d := Delivery{Changed: r.Changed, Paused: st.Paused(), BreakerOpen: st.BreakerOpen(), PausedAt: st.PausedAt}
	if st.Paused() {
		d.PausedBy, d.PausedReason = &st.PausedBy, &st.PausedReason
	}
	return d
}

func auditEntryOf(e audit.Entry) AuditEntry {
	a := AuditEntry{Id: e.ID, At: e.At, Email: e.Email, Action: string(e.Action), Target: e.Target, Count: e.Count}
	if e.AccountID != 0 {
		a.AccountId = &e.AccountID
	}
	if e.TokenID != 0 {
		a.TokenId, a.TokenName = &e.TokenID, &e.TokenName
	}
	return a
}

// deref is *p, or def when p is nil.
func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
