package accounts

import (
	"context"
	"fmt"
	"time"

	"github.com/hookd/hookd/internal/store"
)

// RevokeProviderAccount removes the account of the identity provider's
// issuer and subject, when there is one: the provider refused the person
// on claims it vouched for, so their role goes and, the account gone,
// every session of it ends at its next request, on every replica. The
// provider decides even for the last admin, as at sign-in. It reports
// whether there was an account.
func (t *Tx) RevokeProviderAccount(ctx context.Context, issuer, subject string) (User, bool, error) {
	u, found, err := store.QueryOne[User](ctx, t.db, `
		DELETE FROM users WHERE oidc_issuer = $1 AND oidc_subject = $2 RETURNING `+userColumns, issuer, subject)
	if err != nil {
		return User{}, false, fmt.Errorf("revoke %s from %s: %w", subject, issuer, err)
	}
	return u, found, nil
}

// KeepRefreshToken keeps the sealed refresh token of the account's latest
// sign-in, to re-check the person with at recheckAt; nil keeps none.
func (t *Tx) KeepRefreshToken(ctx context.Context, id int64, sealed []byte, recheckAt time.Time) error {
	_, err := t.db.Exec(ctx, `
		UPDATE users SET oidc_refresh_token = $2, oidc_recheck_at = CASE WHEN $2::bytea IS NULL THEN NULL ELSE $3::timestamptz END,
		       oidc_recheck_until = NULL
		WHERE id = $1`, id, sealed, recheckAt)
	if err != nil {
		return fmt.Errorf("keep refresh token: %w", err)
	}
	return nil
}

// Recheck is an account due for a re-check at the identity provider, with
// the sealed refresh token of its latest sign-in.
type Recheck struct {
	User
	Sealed []byte `db:"oidc_refresh_token"`
}

// ClaimRechecks takes up to limit accounts due for a re-check, each for
// lease: no other replica takes one until then, or until FinishRecheck.
// One replica per account at a time, as some providers revoke a refresh
// token used twice at once. Accounts whose last sign-in is older than
// sessionMaxAge have no session left to end: their tokens are dropped
// instead.
func (s *Store) ClaimRechecks(ctx context.Context, limit int, lease, sessionMaxAge time.Duration) ([]Recheck, error) {
	if _, err := s.db.Exec(ctx, `
		UPDATE users SET oidc_refresh_token = NULL, oidc_recheck_at = NULL, oidc_recheck_until = NULL
		WHERE oidc_refresh_token IS NOT NULL AND last_sign_in_at < now() - make_interval(secs => $1)`,
		sessionMaxAge.Seconds()); err != nil {
		return nil, fmt.Errorf("drop refresh tokens of ended sessions: %w", err)
	}
	due, err := store.QueryAll[Recheck](ctx, s.db, `
		UPDATE users SET oidc_recheck_until = now() + make_interval(secs => $2)
		WHERE id IN (
		    SELECT id FROM users
		    WHERE oidc_refresh_token IS NOT NULL AND oidc_recheck_at <= now()
		      AND (oidc_recheck_until IS NULL OR oidc_recheck_until < now())
		    ORDER BY oidc_recheck_at LIMIT $1 FOR UPDATE SKIP LOCKED)
		RETURNING `+userColumns+`, oidc_refresh_token`, limit, lease.Seconds())
	if err != nil {
		return nil, fmt.Errorf("claim re-checks: %w", err)
	}
	return due, nil
}

// FinishRecheck records a re-check of the account that let the person in:
// the refresh token the provider gave (sealed; nil drops it), the role
// their groups give now, and when to ask again. It reports the role
// before, or false when the account was removed meanwhile.
func (t *Tx) FinishRecheck(ctx context.Context, id int64, sealed []byte, role Role, next time.Time) (Role, bool, error) {
	type before struct {
		Role Role `db:"role_before"`
	}
	got, found, err := store.QueryOne[before](ctx, t.db, `
		WITH before AS (SELECT role FROM users WHERE id = $1)
		UPDATE users SET oidc_refresh_token = $2, role = $3,
		       oidc_recheck_at = CASE WHEN $2::bytea IS NULL THEN NULL ELSE $4::timestamptz END,
		       oidc_recheck_until = NULL, updated_at = now()
		WHERE id = $1 RETURNING (SELECT role FROM before) AS role_before`, id, sealed, role, next)
	if err != nil {
		return "", false, fmt.Errorf("finish re-check: %w", err)
	}
	return got.Role, found, nil
}

// PostponeRecheck asks again at next: the provider could not be asked,
// which says nothing about the person, so their sessions stay.
func (s *Store) PostponeRecheck(ctx context.Context, id int64, next time.Time) error {
	if _, err := s.db.Exec(ctx, `UPDATE users SET oidc_recheck_at = $2, oidc_recheck_until = NULL WHERE id = $1`,
		id, next); err != nil {
		return fmt.Errorf("postpone re-check: %w", err)
	}
	return nil
}

// EndProviderSessions ends every session of the account id and drops its
// refresh token: the provider refused the token, so it vouches for no
// session of it any longer, and the person signs in again.
func (t *Tx) EndProviderSessions(ctx context.Context, id int64) (User, bool, error) {
	u, found, err := store.QueryOne[User](ctx, t.db, `
		UPDATE users SET session_generation = session_generation + 1, oidc_refresh_token = NULL,
		       oidc_recheck_at = NULL, oidc_recheck_until = NULL, updated_at = now()
		WHERE id = $1 RETURNING `+userColumns, id)
	if err != nil {
		return User{}, false, fmt.Errorf("end sessions: %w", err)
	}
	return u, found, nil
}
