package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/hookd/hookd/internal/store/tokens"
)

func (s *server) ListTokens(ctx context.Context, _ ListTokensRequestObject) (ListTokensResponseObject, error) {
	ts, err := s.opts.Actions.Tokens(ctx)
	if err != nil {
		return nil, err
	}
	out := ListTokens200JSONResponse{Tokens: make([]Token, len(ts))}
	for i, t := range ts {
		out.Tokens[i] = apiToken(t)
	}
	return out, nil
}

func (s *server) RevokeToken(ctx context.Context, req RevokeTokenRequestObject) (RevokeTokenResponseObject, error) {
	t, err := s.opts.Actions.RevokeToken(ctx, actor(ctx), req.Id)
	switch {
	case errors.Is(err, tokens.ErrNotFound):
		return nil, problem(http.StatusNotFound, "", "No token "+strconv.FormatInt(req.Id, 10)+": GET "+Prefix+"/tokens lists them.")
	case errors.Is(err, tokens.ErrAlreadyRevoked):
		return nil, problem(http.StatusConflict, typeNotApplicable, "Nothing was changed: "+err.Error()+".")
	case err != nil:
		return nil, err
	}
	return RevokeToken200JSONResponse(apiToken(t)), nil
}

func apiToken(t tokens.Token) Token {
	return Token{Id: t.ID, Name: t.Name, Scope: TokenScope(t.Scope), AccountId: t.AccountID, AccountEmail: t.AccountEmail,
		CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, LastUsedAt: t.LastUsedAt, RevokedAt: t.RevokedAt}
}
