package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/internal/destinations"
	"github.com/hookd/hookd/queue"
)

// The destinations managed on the dashboard, for admin tokens: a refused
// field is a 400 naming it (actions.InvalidError); while
// HOOKD_DESTINATIONS_FILE is set, and for a destination not the
// dashboard's, a 409 says why.

func (s *server) AddDestination(ctx context.Context, req AddDestinationRequestObject) (AddDestinationResponseObject, error) {
	b := req.Body
	e := entryOf(b.Name, DestinationSettings{Url: b.Url, Types: b.Types, Livemode: b.Livemode, Accounts: b.Accounts,
		Endpoints: b.Endpoints, Filter: b.Filter, Concurrency: b.Concurrency, Timeout: b.Timeout, Rate: b.Rate,
		OrderBy: b.OrderBy, SigningSecrets: b.SigningSecrets, Headers: b.Headers})
	m, err := s.opts.Actions.AddDestination(ctx, actor(ctx), e)
	if err != nil {
		return nil, destinationProblem(err, b.Name, "Not added")
	}
	return AddDestination201JSONResponse(managedDestinationOf(m)), nil
}

func (s *server) EditDestination(ctx context.Context, req EditDestinationRequestObject) (EditDestinationResponseObject, error) {
	b := *req.Body
	edit := actions.DestinationEdit{Entry: entryOf(req.Name, b), ReplaceSecrets: b.SigningSecrets != nil,
		ReplaceHeaders: b.Headers != nil}
	r, err := s.opts.Actions.EditDestination(ctx, actor(ctx), edit)
	if err != nil {
		return nil, destinationProblem(err, req.Name, "Not changed")
	}
	return EditDestination200JSONResponse{Destination: managedDestinationOf(r.Destination), Changed: nonNil(r.Changed)}, nil
}

func (s *server) RemoveDestination(ctx context.Context, req RemoveDestinationRequestObject) (RemoveDestinationResponseObject, error) {
	dryRun := req.Body != nil && deref(req.Body.DryRun, false)
	r, err := s.opts.Actions.RemoveDestination(ctx, actor(ctx), req.Name, dryRun)
	if err != nil {
		return nil, destinationProblem(err, req.Name, "Not removed")
	}
	return RemoveDestination200JSONResponse{Destination: managedDestinationOf(r.Destination), Waiting: r.Waiting,
		Retired: r.Retired, DryRun: dryRun, Removed: !dryRun}, nil
}

// entryOf is destination name's settings as the actions take them.
func entryOf(name string, b DestinationSettings) destinations.Entry {
	e := destinations.Entry{Name: name, URL: b.Url, Livemode: deref(b.Livemode, ""), Filter: deref(b.Filter, ""),
		Concurrency: deref(b.Concurrency, 0), Timeout: deref(b.Timeout, ""), Rate: deref(b.Rate, 0),
		OrderBy: deref(b.OrderBy, "")}
	if b.Types != nil {
		e.Types = *b.Types
	}
	if b.Accounts != nil {
		e.Accounts = *b.Accounts
	}
	if b.Endpoints != nil {
		e.Endpoints = *b.Endpoints
	}
	if b.SigningSecrets != nil {
		e.SigningSecrets = *b.SigningSecrets
	}
	if b.Headers != nil {
		e.Headers = *b.Headers
	}
	return e
}

// destinationProblem is the problem of a refused change of destination
// name; what says what did not happen.
func destinationProblem(err error, name, what string) error {
	var refused *actions.DestinationRefusedError
	switch {
	case errors.Is(err, actions.ErrDestinationsFromFile):
		return problem(http.StatusConflict, typeNotApplicable, what+": "+err.Error()+".")
	case errors.As(err, &refused):
		return problem(http.StatusConflict, typeNotApplicable, what+": "+refused.Reason+".")
	case errors.Is(err, queue.ErrNotFound):
		return problem(http.StatusNotFound, "", "No destination "+name+": it may have been removed. Nothing was changed.")
	}
	return err
}

func managedDestinationOf(m queue.ManagedDestination) ManagedDestination {
	e := m.Entry()
	return ManagedDestination{Name: m.Name, Url: m.URL, Types: nonNil(e.Types), Livemode: e.Livemode,
		Accounts: nonNil(e.Accounts), Endpoints: nonNil(e.Endpoints), Filter: e.Filter, Concurrency: e.Concurrency,
		Timeout: e.Timeout, Rate: e.Rate, OrderBy: e.OrderBy, SigningSecretsSet: m.SigningSecretsSet, HeadersSet: m.HeadersSet,
		Source: ManagedDestinationSource(m.Source), AddedAt: m.AddedAt, UpdatedAt: m.UpdatedAt, UpdatedBy: m.UpdatedBy,
		RetiredAt: m.RetiredAt}
}

// nonNil is s, or an empty list for none: JSON's [] rather than null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
