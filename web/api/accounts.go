package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/hookd/hookd/internal/store/accounts"
)

// The accounts, for admin tokens. A change the accounts' rules refuse
// (the token's own account, the last admin) is a 409 saying why.

func (s *server) ListAccounts(ctx context.Context, _ ListAccountsRequestObject) (ListAccountsResponseObject, error) {
	users, err := s.opts.Actions.Accounts(ctx)
	if err != nil {
		return nil, err
	}
	out := ListAccounts200JSONResponse{Accounts: make([]Account, len(users))}
	for i, u := range users {
		out.Accounts[i] = accountOf(u)
	}
	return out, nil
}

func (s *server) AddAccount(ctx context.Context, req AddAccountRequestObject) (AddAccountResponseObject, error) {
	b := req.Body
	u, err := s.opts.Actions.AddAccount(ctx, actor(ctx), strings.TrimSpace(b.Email), b.Password, accounts.Role(b.Role))
	var refused *accounts.RefusedError
	if errors.As(err, &refused) {
		return nil, problem(http.StatusUnprocessableEntity, typeInvalidRequest, "Not added: "+refused.Reason+".")
	}
	if err != nil {
		return nil, err
	}
	return AddAccount201JSONResponse(accountOf(u)), nil
}

func (s *server) SetAccountRole(ctx context.Context, req SetAccountRoleRequestObject) (SetAccountRoleResponseObject, error) {
	r, err := s.opts.Actions.SetRole(ctx, actor(ctx), req.Id, accounts.Role(req.Body.Role))
	if err != nil {
		return nil, accountProblem(err, "Not changed")
	}
	after := r.Before
	after.Role = r.Role
	return SetAccountRole200JSONResponse{Account: accountOf(after), PreviousRole: Role(r.Before.Role), Changed: r.Changed}, nil
}

func (s *server) RemoveAccount(ctx context.Context, req RemoveAccountRequestObject) (RemoveAccountResponseObject, error) {
	dryRun := req.Body != nil && deref(req.Body.DryRun, false)
	u, err := s.opts.Actions.RemoveAccount(ctx, actor(ctx), req.Id, dryRun)
	if err != nil {
		return nil, accountProblem(err, "Not removed")
	}
	return RemoveAccount200JSONResponse{Account: accountOf(u), DryRun: dryRun, Removed: !dryRun}, nil
}

func (s *server) EndAccountSessions(ctx context.Context, req EndAccountSessionsRequestObject) (EndAccountSessionsResponseObject, error) {
	u, err := s.opts.Actions.EndSessions(ctx, actor(ctx), req.Id)
	if err != nil {
		return nil, accountProblem(err, "No session ended")
	}
	return EndAccountSessions200JSONResponse(accountOf(u)), nil
}

// accountProblem is the problem of a change of an account that failed:
// refused (409), or the account unknown (404); other errors are hookd's.
func accountProblem(err error, what string) error {
	var refused *accounts.RefusedError
	switch {
	case errors.As(err, &refused):
		return problem(http.StatusConflict, typeNotApplicable, what+": "+refused.Reason+".")
	case errors.Is(err, accounts.ErrNotFound):
		return problem(http.StatusNotFound, "", "There is no such account; it may have been removed. Nothing was changed.")
	}
	return err
}

func accountOf(u accounts.User) Account {
	return Account{Id: u.ID, Email: u.Email, Role: Role(u.Role), CreatedAt: u.CreatedAt, FromProvider: u.FromProvider(),
		LastSignInAt: u.LastSignInAt}
}
