package accounts

import (
	"context"

	"github.com/hookd/hookd/internal/store"
)

// DeleteExpiredSessions deletes the dashboard sessions that have expired
// and returns how many. The sessions table is scs's pgxstore layout; expired
// rows are never read again, so without this they only accumulate.
func (s *Store) DeleteExpiredSessions(ctx context.Context) (int64, error) {
	return store.Delete(ctx, s.db, "delete expired sessions", `DELETE FROM sessions WHERE expiry < now()`)
}

// DeleteStaleLoginFailures deletes the sign-in counts whose last attempt is
// so old that the next attempt would start them over anyway, and returns
// how many. Every address that ever tried to sign in leaves one.
func (s *Store) DeleteStaleLoginFailures(ctx context.Context) (int64, error) {
	return store.Delete(ctx, s.db, "delete stale login failures",
		`DELETE FROM login_failures WHERE last_failed_at <= now() - make_interval(secs => $1)`, loginFailureForgets.Seconds())
}
