package accounts

import (
	"context"
	"fmt"
	"time"
)

// Sign-in throttling. Every sign-in attempt counts against keys the caller
// chooses (in the dashboard: the account with the client's address, and the
// client's address alone) before its password is checked; a successful
// sign-in takes its count back. Once a key has had more than its free
// attempts, the next one must wait, doubling with every further attempt up
// to maxLoginDelay. A key's count starts over an hour after its last
// attempt. The state is in the database so every replica enforces the same
// wait, and nothing sleeps: an attempt during the wait is refused at once.
const (
	maxLoginDelay       = 15 * time.Minute
	loginFailureForgets = time.Hour
)

// LoginKey is one count a sign-in attempt is held to.
type LoginKey struct {
	// Key names the count, e.g. "account:ana@example.com|ip:192.0.2.1".
	Key string
	// Free is how many attempts within an hour need not wait.
	Free int
}

// loginAttemptSQL counts one attempt against a key unless the key must
// still wait. ON CONFLICT DO UPDATE locks the key's row and sees its latest
// version, so of any number of concurrent attempts exactly as many are
// admitted as the count allows. A refused attempt changes nothing and
// returns no row. $1 is the key, $2 its free attempts; %s is the source of
// the row to insert, which lets the second key's insert depend on the first.
const loginAttemptSQL = `
	INSERT INTO login_failures AS f (key, failures, last_failed_at) %s
	ON CONFLICT (key) DO UPDATE
	SET failures = CASE WHEN f.last_failed_at > now() - make_interval(secs => $5)
	                    THEN f.failures + 1 ELSE 1 END,
	    last_failed_at = now()
	WHERE f.failures <= %s
	   OR f.last_failed_at <= now() - make_interval(secs => $5)
	   OR now() >= f.last_failed_at + least(make_interval(secs => power(2, f.failures - %[2]s - 1)),
	                                        make_interval(secs => $6))
	RETURNING key`

// AdmitLogin records a sign-in attempt against first and then second, in
// one statement, before any password is checked, and returns zero when the
// attempt may go ahead, or how long attempts counted against either key
// must still wait (at least a second) when it may not. A refused attempt
// is not counted against first; counted against first, it is refused by
// second only when second must wait as well.
func (s *Store) AdmitLogin(ctx context.Context, first, second LoginKey) (time.Duration, error) {
	var admitted bool
	err := s.db.QueryRow(ctx, `
		WITH first AS (`+fmt.Sprintf(loginAttemptSQL, `VALUES ($1, 1, now())`, `$2`)+`),
		     second AS (`+fmt.Sprintf(loginAttemptSQL, `SELECT $3::text, 1, now() FROM first`, `$4`)+`)
		SELECT EXISTS (SELECT FROM second)`,
		first.Key, first.Free, second.Key, second.Free,
		loginFailureForgets.Seconds(), maxLoginDelay.Seconds()).Scan(&admitted)
	if err != nil {
		return 0, fmt.Errorf("record sign-in attempt: %w", err)
	}
	if admitted {
		return 0, nil
	}
	// Only what to tell the person: the decision was made above.
	var wait time.Duration
	for _, k := range []LoginKey{first, second} {
		d, err := s.LoginDelay(ctx, k.Key, k.Free)
		if err != nil {
			return 0, err
		}
		wait = max(wait, d)
	}
	return max(wait, time.Second), nil
}

// LoginDelay returns how long sign-ins counted against key must still wait,
// given that the first free attempts cost nothing; zero when they may go
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

// ClearLoginFailures forgets the sign-in attempts counted against key,
// after a successful one.
func (s *Store) ClearLoginFailures(ctx context.Context, key string) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM login_failures WHERE key = $1`, key); err != nil {
		return fmt.Errorf("clear login failures: %w", err)
	}
	return nil
}

// ForgiveLoginAttempt takes back one attempt counted against key, after it
// turned out to be a successful sign-in: an office signing in all day from
// one address never waits for its own successes.
func (s *Store) ForgiveLoginAttempt(ctx context.Context, key string) error {
	if _, err := s.db.Exec(ctx, `
		UPDATE login_failures SET failures = failures - 1 WHERE key = $1 AND failures > 0`, key); err != nil {
		return fmt.Errorf("forgive sign-in attempt: %w", err)
	}
	return nil
}
