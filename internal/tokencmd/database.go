package tokencmd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/store/tokens"
)

// Backend is where `hookd tokens list` and `revoke` act.
type Backend interface {
	// List returns every account's tokens, revoked ones included.
	List(ctx context.Context) ([]tokens.Token, error)
	// Revoke revokes the token id and returns it, audited.
	Revoke(ctx context.Context, id int64) (tokens.Token, error)
}

// Database is hookd's database as the command's Backend, and where
// tokens are created; each change is audited in actor's name, in its
// transaction.
type Database struct {
	pool     *pgxpool.Pool
	tokens   *tokens.Store
	accounts *accounts.Store
	actor    string
}

// NewDatabase returns the Database on pool, auditing in actor's name.
func NewDatabase(pool *pgxpool.Pool, actor string) *Database {
	return &Database{pool: pool, tokens: tokens.New(pool), accounts: accounts.New(pool), actor: actor}
}

// Create makes a token for the account named by account (its email, or
// its id), named name, of the scope named scopeName, for the lifetime
// written in lifetime (tokens.ParseLifetime), and audits it.
func (d *Database) Create(ctx context.Context, account, name, scopeName, lifetime string) (string, tokens.Token, error) {
	scope, err := tokens.ParseScope(scopeName)
	if err != nil {
		return "", tokens.Token{}, fmt.Errorf("--scope: %w", err)
	}
	ttl, err := tokens.ParseLifetime(lifetime)
	if err != nil {
		return "", tokens.Token{}, fmt.Errorf("--expires: %w", err)
	}
	u, err := d.account(ctx, account)
	if err != nil {
		return "", tokens.Token{}, err
	}
	var secret string
	var t tokens.Token
	err = pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		if secret, t, err = d.tokens.Create(ctx, tx, u.ID, name, scope, ttl); err != nil {
			return err
		}
		return audit.Record(ctx, tx, d.actor, audit.TokenCreate, t.AuditTarget(), 1)
	})
	if err != nil {
		return "", tokens.Token{}, err
	}
	return secret, t, nil
}

// account finds the account named by its id or its email: of every
// account, the identity provider's included, whose email is not unique,
// so an email several accounts share is refused, naming their ids.
func (d *Database) account(ctx context.Context, account string) (accounts.User, error) {
	if id, err := strconv.ParseInt(account, 10, 64); err == nil {
		u, err := d.accounts.User(ctx, id)
		if errors.Is(err, accounts.ErrNotFound) {
			return accounts.User{}, fmt.Errorf("no account %d (hookd user add makes one)", id)
		}
		return u, err
	}
	all, err := d.accounts.Users(ctx)
	if err != nil {
		return accounts.User{}, err
	}
	var found []accounts.User
	var ids []string
	for _, u := range all {
		if strings.EqualFold(u.Email, strings.TrimSpace(account)) {
			found = append(found, u)
			ids = append(ids, strconv.FormatInt(u.ID, 10))
		}
	}
	switch len(found) {
	case 0:
		return accounts.User{}, fmt.Errorf("no account for %s (hookd user add makes one)", account)
	case 1:
		return found[0], nil
	}
	return accounts.User{}, fmt.Errorf("accounts %s all have the email %s: give --account the id of one",
		strings.Join(ids, ", "), account)
}

// List returns every account's tokens.
func (d *Database) List(ctx context.Context) ([]tokens.Token, error) {
	return d.tokens.List(ctx, 0)
}

// Revoke revokes the token id and audits it.
func (d *Database) Revoke(ctx context.Context, id int64) (tokens.Token, error) {
	var t tokens.Token
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		var err error
		if t, err = d.tokens.Revoke(ctx, tx, id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, d.actor, audit.TokenRevoke, t.AuditTarget(), 1)
	})
	if errors.Is(err, tokens.ErrNotFound) {
		return tokens.Token{}, fmt.Errorf("no token %d (hookd tokens list shows them)", id)
	}
	return t, err
}
