package cli

import (
	"context"

	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/web/api/apiclient"
)

// Tokens is `hookd tokens list` and `revoke` through the API
// (internal/tokencmd's Backend), for an admin token.
type Tokens struct {
	c *Client
}

// NewTokens returns the API as the tokens' Backend, for the hookd that
// HOOKD_API_URL names.
func NewTokens(getenv func(string) string) (*Tokens, error) {
	c, err := NewClient(getenv)
	if err != nil {
		return nil, err
	}
	return &Tokens{c: c}, nil
}

// List returns every account's tokens.
func (t *Tokens) List(ctx context.Context) ([]tokens.Token, error) {
	body, err := t.c.read(t.c.api.ListTokens(ctx))
	if err != nil {
		return nil, err
	}
	var list apiclient.TokenList
	if err := decode(body, &list); err != nil {
		return nil, err
	}
	out := make([]tokens.Token, len(list.Tokens))
	for i, tk := range list.Tokens {
		out[i] = tokenOf(tk)
	}
	return out, nil
}

// Revoke revokes token id.
func (t *Tokens) Revoke(ctx context.Context, id int64) (tokens.Token, error) {
	body, err := t.c.read(t.c.api.RevokeToken(ctx, id, nil))
	if err != nil {
		return tokens.Token{}, err
	}
	var tk apiclient.Token
	if err := decode(body, &tk); err != nil {
		return tokens.Token{}, err
	}
	return tokenOf(tk), nil
}

func tokenOf(t apiclient.Token) tokens.Token {
	return tokens.Token{ID: t.Id, Name: t.Name, Scope: tokens.Scope(t.Scope), AccountID: t.AccountId,
		AccountEmail: t.AccountEmail, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, LastUsedAt: t.LastUsedAt,
		RevokedAt: t.RevokedAt}
}
