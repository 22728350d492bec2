package accounts

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
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

// SigningKey returns the 32-byte key named name, making it on first use.
// Replicas racing to make it all get the one that was stored.
func (s *Store) SigningKey(ctx context.Context, name string) ([]byte, error) {
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("make signing key %s: %w", name, err)
	}
	// A replica that loses the race waits in ON CONFLICT for the winner to
	// commit, but its statement's snapshot predates that commit and reads
	// no row; the second try sees it.
	for try := 1; ; try++ {
		var key []byte
		err := s.db.QueryRow(ctx, `
			WITH made AS (
			    INSERT INTO signing_keys (name, key) VALUES ($1, $2)
			    ON CONFLICT (name) DO NOTHING
			    RETURNING key)
			SELECT key FROM made
			UNION ALL
			SELECT key FROM signing_keys WHERE name = $1
			LIMIT 1`, name, fresh).Scan(&key)
		if errors.Is(err, pgx.ErrNoRows) && try < 2 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read signing key %s: %w", name, err)
		}
		return key, nil
	}
}
