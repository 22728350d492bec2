package accounts

import (
	"context"
	"fmt"
)

// DeleteExpiredSessions deletes the dashboard sessions that have expired
// and returns how many. The sessions table is scs's pgxstore layout; expired
// rows are never read again, so without this they only accumulate.
func (s *Store) DeleteExpiredSessions(ctx context.Context) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM sessions WHERE expiry < now()`)
	if err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	return tag.RowsAffected(), nil
}

// DeleteStaleLoginFailures deletes the sign-in counts whose last attempt is
// so old that the next attempt would start them over anyway, and returns
// how many. Every address that ever tried to sign in leaves one.
func (s *Store) DeleteStaleLoginFailures(ctx context.Context) (int64, error) {
	tag, err := s.db.Exec(ctx, `
		DELETE FROM login_failures WHERE last_failed_at <= now() - make_interval(secs => $1)`,
		loginFailureForgets.Seconds())
	if err != nil {
		return 0, fmt.Errorf("delete stale login failures: %w", err)
	}
	return tag.RowsAffected(), nil
}
