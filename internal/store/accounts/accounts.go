package accounts

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/store"
)

// RefusedError is an account change refused for a reason meant for the
// person who asked for it: a malformed email, a short password, an email
// taken, their own account, the last admin. Nothing was changed, and asking
// again the same way is refused again.
type RefusedError struct {
	Reason string
}

func (e *RefusedError) Error() string { return e.Reason }

func refuse(format string, args ...any) error {
	return &RefusedError{Reason: fmt.Sprintf(format, args...)}
}

// Users returns every account, ordered by email. Their password hashes are
// left out: the list is for showing, and a hash has no business there.
func (s *Store) Users(ctx context.Context) ([]User, error) {
	rows, err := s.db.Query(ctx, `
		SELECT id, email, role, created_at, coalesce(oidc_issuer, '') AS oidc_issuer,
		       coalesce(oidc_subject, '') AS oidc_subject, last_sign_in_at
		FROM users ORDER BY lower(email), id`)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	users, err := pgx.CollectRows(rows, pgx.RowToStructByNameLax[User])
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return users, nil
}

// SetRole gives the account id the role, acting for the admin actorID, and
// returns the account as it was before, so the caller can tell whether
// anything changed (an account given the role it has is left alone). The
// change is seen on the signed-in account's next request, because the
// dashboard reads the account afresh for each one.
//
// It returns ErrNotFound for an unknown id and a *RefusedError when the
// actor would change their own role, when it would leave no admin, or when
// the actor is no longer an admin. The last two are decided on rows locked
// by lockAdmins, so concurrent changes cannot slip between check and write.
func (t *Tx) SetRole(ctx context.Context, actorID, id int64, role Role) (User, error) {
	if _, err := ParseRole(string(role)); err != nil {
		return User{}, refuse("%v", err)
	}
	admins, target, err := t.lockForAccountChange(ctx, id)
	if err != nil {
		return User{}, err
	}
	if target.Role == role {
		return target, nil
	}
	if target.FromProvider() {
		return User{}, refuse("%s signs in through the identity provider, whose groups set its role at every sign-in; "+
			"change the groups there, or end its sessions here", target.Email)
	}
	if id == actorID {
		return User{}, refuse("you cannot change your own role; another admin can")
	}
	if err := checkAdminsRemain(admins, actorID, target, role == RoleAdmin); err != nil {
		return User{}, err
	}
	if _, err := t.db.Exec(ctx, `UPDATE users SET role = $2, updated_at = now() WHERE id = $1`, id, role); err != nil {
		return User{}, fmt.Errorf("set role of %s: %w", target.Email, err)
	}
	return target, nil
}

// RemoveUser deletes the account id, acting for the admin actorID, and
// returns it as it was. The account's open sessions stop working at once:
// the dashboard reads the account for every request and signs out a session
// whose account is gone, and ids are never reused, so no later account
// inherits them.
//
// It returns ErrNotFound for an unknown id and a *RefusedError when the
// actor would remove their own account, when it would leave no admin, or
// when the actor is no longer an admin, decided as SetRole decides them.
func (t *Tx) RemoveUser(ctx context.Context, actorID, id int64) (User, error) {
	admins, target, err := t.lockForAccountChange(ctx, id)
	if err != nil {
		return User{}, err
	}
	if id == actorID {
		return User{}, refuse("you cannot remove your own account; another admin can")
	}
	if err := checkAdminsRemain(admins, actorID, target, false); err != nil {
		return User{}, err
	}
	if _, err := t.db.Exec(ctx, `DELETE FROM users WHERE id = $1`, id); err != nil {
		return User{}, fmt.Errorf("remove %s: %w", target.Email, err)
	}
	return target, nil
}

// lockForAccountChange locks every admin's row, then the row of account id,
// and returns the admins' ids and that account.
//
// The admin rows are locked (SELECT ... FOR UPDATE) because "at least one
// admin remains" is a fact about all of them, not about the row changed:
// without the lock, two admins demoting each other at once would each count
// two admins, each demote the other, and leave none. With it the second
// transaction waits for the first to commit, then PostgreSQL rechecks the
// role of each row it waited for (READ COMMITTED's recheck of updated rows),
// so it counts the admins as they are after the first change. Both locks
// are taken in id order, admins first, so two account changes never
// deadlock.
func (t *Tx) lockForAccountChange(ctx context.Context, id int64) ([]int64, User, error) {
	rows, err := t.db.Query(ctx, `SELECT id FROM users WHERE role = 'admin' ORDER BY id FOR UPDATE`)
	if err != nil {
		return nil, User{}, fmt.Errorf("lock admins: %w", err)
	}
	admins, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, User{}, fmt.Errorf("lock admins: %w", err)
	}
	target, found, err := store.QueryOne[User](ctx, t.db, `SELECT `+userColumns+` FROM users WHERE id = $1 FOR UPDATE`, id)
	if err != nil {
		return nil, User{}, fmt.Errorf("lock user: %w", err)
	}
	if !found {
		return nil, User{}, ErrNotFound
	}
	return admins, target, nil
}

// checkAdminsRemain refuses a change to target that would leave no admin
// (stillAdmin says whether target is an admin after it), and a change asked
// for by an actor who is, by now, no admin: the role was checked when the
// request came in, and another admin may have changed it since.
func checkAdminsRemain(admins []int64, actorID int64, target User, stillAdmin bool) error {
	others := slices.DeleteFunc(slices.Clone(admins), func(a int64) bool { return a == target.ID })
	if target.Role == RoleAdmin && !stillAdmin && len(others) == 0 {
		return refuse("%s is the last admin; make another account admin first", target.Email)
	}
	if !slices.Contains(admins, actorID) {
		return refuse("your account is no longer an admin")
	}
	return nil
}
