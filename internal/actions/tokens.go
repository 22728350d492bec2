package actions

import (
	"context"

	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/queue"
)

// Tokens lists every account's API tokens, revoked ones included.
func (a *Actions) Tokens(ctx context.Context) ([]tokens.Token, error) {
	return a.tokens.List(ctx, 0)
}

// RevokeToken revokes API token id, audited in the same transaction: every
// request with it is refused from the commit on. An unknown id is
// tokens.ErrNotFound; a token revoked before wraps tokens.ErrAlreadyRevoked.
func (a *Actions) RevokeToken(ctx context.Context, who Actor, id int64) (tokens.Token, error) {
	var t tokens.Token
	err := a.queue.InTx(ctx, func(tx *queue.Tx) error {
		var err error
		if t, err = a.tokens.Revoke(ctx, tx.PgxTx(), id); err != nil {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), audit.TokenRevoke, t.AuditTarget(), 1)
	})
	return t, err
}
