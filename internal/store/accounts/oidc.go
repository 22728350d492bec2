package accounts

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/store"
)

// ProviderIdentity is who the identity provider says signed in: the issuer
// and subject that key the account, and the email the pages show.
type ProviderIdentity struct {
	Issuer  string
	Subject string
	Email   string
}

// SignInFromProvider records a sign-in through the identity provider: the
// account of id is created at its first sign-in, and at every sign-in
// takes role and the provider's email, since the provider's groups decide
// the role. It returns the account and its role before ("" when it was
// created).
//
// The provider decides the role even when it demotes the last admin: it is
// the record of who still works where, and the emergency admin
// (HOOKD_EMERGENCY_ADMIN) or `hookd user add` make another.
func (t *Tx) SignInFromProvider(ctx context.Context, id ProviderIdentity, role Role) (User, Role, error) {
	if _, err := ParseRole(string(role)); err != nil {
		return User{}, "", err
	}
	// before is read from the statement's snapshot, so it is the role the
	// account had before this sign-in changed it.
	rows, err := t.db.Query(ctx, `
		WITH before AS (
		    SELECT role FROM users WHERE oidc_issuer = $3 AND oidc_subject = $4
		), signed_in AS (
		    INSERT INTO users (email, password_hash, role, oidc_issuer, oidc_subject, last_sign_in_at)
		    VALUES ($1, '', $2, $3, $4, now())
		    ON CONFLICT (oidc_issuer, oidc_subject) WHERE oidc_issuer IS NOT NULL
		    DO UPDATE SET email = EXCLUDED.email, role = EXCLUDED.role,
		                  last_sign_in_at = now(), updated_at = now()
		    RETURNING `+userColumns+`
		)
		SELECT signed_in.*, coalesce((SELECT role FROM before), '') AS role_before FROM signed_in`,
		id.Email, role, id.Issuer, id.Subject)
	if err != nil {
		return User{}, "", fmt.Errorf("sign in %s from %s: %w", id.Subject, id.Issuer, err)
	}
	type signedIn struct {
		User
		RoleBefore Role `db:"role_before"`
	}
	got, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[signedIn])
	if err != nil {
		return User{}, "", fmt.Errorf("sign in %s from %s: %w", id.Subject, id.Issuer, err)
	}
	return got.User, got.RoleBefore, nil
}

// RecordSignIn notes when the account id last signed in, for the accounts
// page.
func (s *Store) RecordSignIn(ctx context.Context, id int64) error {
	if _, err := s.db.Exec(ctx, `UPDATE users SET last_sign_in_at = now() WHERE id = $1`, id); err != nil {
		return fmt.Errorf("record sign-in: %w", err)
	}
	return nil
}

// EndSessions ends every session of the account id, on every replica: its
// session stamp changes, and the dashboard ends a session whose stamp no
// longer matches at its next request. It returns the account, or
// ErrNotFound.
func (s *Store) EndSessions(ctx context.Context, id int64) (User, error) {
	u, found, err := store.QueryOne[User](ctx, s.db, `
		UPDATE users SET session_generation = session_generation + 1, updated_at = now()
		WHERE id = $1 RETURNING `+userColumns, id)
	if err != nil {
		return User{}, fmt.Errorf("end sessions: %w", err)
	}
	if !found {
		return User{}, ErrNotFound
	}
	return u, nil
}

// UseSignInState marks an OpenID Connect sign-in's state as used, and
// reports whether it was still unused: a state is good for one callback,
// whichever replica it reaches. It is kept until expiresAt, when the
// sign-in it started would be refused as too old anyway; the states past
// theirs are deleted on the way.
func (s *Store) UseSignInState(ctx context.Context, state string, expiresAt time.Time) (bool, error) {
	sum := sha256.Sum256([]byte(state))
	rows, err := s.db.Query(ctx, `
		WITH expired AS (DELETE FROM oidc_used_states WHERE expires_at < now())
		INSERT INTO oidc_used_states (state_hash, expires_at) VALUES ($1, $2)
		ON CONFLICT (state_hash) DO NOTHING
		RETURNING true`, sum[:], expiresAt)
	if err != nil {
		return false, fmt.Errorf("use sign-in state: %w", err)
	}
	fresh, err := pgx.CollectRows(rows, pgx.RowTo[bool])
	if err != nil {
		return false, fmt.Errorf("use sign-in state: %w", err)
	}
	return len(fresh) == 1, nil
}
