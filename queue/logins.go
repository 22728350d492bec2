package queue

import (
	"context"
	"fmt"
	"time"
)

// Sign-in throttling. Each failed sign-in counts against a key (the account's
// email and the client's address, as the caller chooses); once a key has
// more than its free misses, the next attempt must wait, doubling with
// every further miss up to maxLoginDelay. A key's count starts over an hour
// after its last miss. The state is in the database so every replica
// enforces the same wait, and nothing sleeps: an attempt during the wait is
// refused at once.
const (
	maxLoginDelay       = 15 * time.Minute
	loginFailureForgets = time.Hour
)

// LoginDelay returns how long sign-ins counted against key must still wait,
// given that the first free failures cost nothing; zero when they may go
// ahead.
func (s *Store) LoginDelay(ctx context.Context, key string, free int) (time.Duration, error) {
	var secs float64
	err := s.db.QueryRow(ctx, `
		SELECT coalesce(max(extract(epoch FROM
		           last_failed_at + least(make_interval(secs => power(2, failures - $2 - 1)),
		                                  make_interval(secs => $3))
		           - now())), 0)
		FROM login_failures
		WHERE key = $1 AND failures > $2 AND last_failed_at > now() - make_interval(secs => $4)`,
		key, free, maxLoginDelay.Seconds(), loginFailureForgets.Seconds()).Scan(&secs)
	if err != nil {
		return 0, fmt.Errorf("read login failures: %w", err)
	}
	if secs <= 0 {
		return 0, nil
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// RecordLoginFailure counts a failed sign-in against key.
func (s *Store) RecordLoginFailure(ctx context.Context, key string) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO login_failures (key, failures, last_failed_at) VALUES ($1, 1, now())
		ON CONFLICT (key) DO UPDATE
		SET failures = CASE WHEN login_failures.last_failed_at > now() - make_interval(secs => $2)
		                    THEN login_failures.failures + 1 ELSE 1 END,
		    last_failed_at = now()`, key, loginFailureForgets.Seconds())
	if err != nil {
		return fmt.Errorf("record login failure: %w", err)
	}
	return nil
}

// ClearLoginFailures forgets the failed sign-ins counted against key, after
// a successful one.
func (s *Store) ClearLoginFailures(ctx context.Context, key string) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM login_failures WHERE key = $1`, key); err != nil {
		return fmt.Errorf("clear login failures: %w", err)
	}
	return nil
}
