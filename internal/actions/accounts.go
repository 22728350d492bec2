package actions

import (
	"context"
	"fmt"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
)

// The accounts, for admins. Every change runs in one transaction with its
// audit entry; the rules that keep an admin in charge (nobody changes or
// removes their own account, the last admin stays) live in accounts, which
// checks them on locked rows and refuses with an *accounts.RefusedError.
// An unknown account is accounts.ErrNotFound.

// AccountText names an account and its role in flashes and the audit log.
func AccountText(u accounts.User) string {
	return fmt.Sprintf("%s (%s)", u.Email, u.Role)
}

// Accounts lists every account, ordered by email, without their password
// hashes. The list is not paged: it is the people who run hookd.
func (a *Actions) Accounts(ctx context.Context) ([]accounts.User, error) {
	return a.accounts.Users(ctx)
}

// AddAccount adds an account that signs in with password, with role, and
// audits it.
func (a *Actions) AddAccount(ctx context.Context, who Actor, email, password string, role accounts.Role) (accounts.User, error) {
	var u accounts.User
	err := a.accounts.InTx(ctx, func(tx *accounts.Tx) error {
		var err error
		if u, err = tx.CreateUser(ctx, email, password, role); err != nil {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), audit.AccountAdd, AccountText(u), 1)
	})
	return u, err
}

// RoleChange is what a change of an account's role did: the account as it
// was before, and Changed false when it had the role already (no entry).
type RoleChange struct {
	Before  accounts.User
	Role    accounts.Role
	Changed bool
}

// SetRole gives account id role, and audits it.
func (a *Actions) SetRole(ctx context.Context, who Actor, id int64, role accounts.Role) (RoleChange, error) {
	r := RoleChange{Role: role}
	err := a.accounts.InTx(ctx, func(tx *accounts.Tx) error {
		var err error
		if r.Before, err = tx.SetRole(ctx, who.Account.ID, id, role); err != nil || r.Before.Role == role {
			return err
		}
		r.Changed = true
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), audit.AccountRole,
			fmt.Sprintf("%s from %s to %s", r.Before.Email, r.Before.Role, role), 1)
	})
	return r, err
}

// RemoveAccount removes account id, and audits it: its sessions end, and
// its API tokens are refused from then on; dryRun only reads the account, to ask before. Whether
// it may be removed is decided when it is, on locked rows.
func (a *Actions) RemoveAccount(ctx context.Context, who Actor, id int64, dryRun bool) (accounts.User, error) {
	if dryRun {
		return a.accounts.User(ctx, id)
	}
	var removed accounts.User
	err := a.accounts.InTx(ctx, func(tx *accounts.Tx) error {
		var err error
		if removed, err = tx.RemoveUser(ctx, who.Account.ID, id); err != nil {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), audit.AccountRemove, AccountText(removed), 1)
	})
	return removed, err
}

// EndSessions ends every session of account id, the actor's own included,
// and audits it: the person is asked to sign in again on their next page.
func (a *Actions) EndSessions(ctx context.Context, who Actor, id int64) (accounts.User, error) {
	var ended accounts.User
	err := a.accounts.InTx(ctx, func(tx *accounts.Tx) error {
		var err error
		if ended, err = tx.EndSessions(ctx, id); err != nil {
			return err
		}
		return audit.RecordAccount(ctx, tx.PgxTx(), who.auditAccount(), audit.SessionsEnd, AccountText(ended), 1)
	})
	return ended, err
}
