package accounts

import (
	"context"
	"fmt"
	"strings"
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
	// IfAccount, when set, is an email: the attempt counts against Key
	// only when an account has that email, so a count kept for an account
	// (rather than an address) costs no row for the emails nobody has, and
	// a flood of guesses at made-up emails writes none.
	IfAccount string
}

// loginAttemptSQL counts one attempt against a key unless the key must
// still wait. ON CONFLICT DO UPDATE locks the key's row and sees its latest
// version, so of any number of concurrent attempts exactly as many are
// admitted as the count allows. A refused attempt changes nothing and
// returns no row. $1 is how long a count is remembered, $2 the longest
// wait; %[1]s is the source of the row to insert, which lets each key's
// insert depend on the one before, and %[2]s the key's free attempts.
const loginAttemptSQL = `
	INSERT INTO login_failures AS f (key, failures, last_failed_at) %[1]s
	ON CONFLICT (key) DO UPDATE
	SET failures = CASE WHEN f.last_failed_at > now() - make_interval(secs => $1)
	                    THEN f.failures + 1 ELSE 1 END,
	    last_failed_at = now()
	WHERE f.failures <= %[2]s
	   OR f.last_failed_at <= now() - make_interval(secs => $1)
	   OR now() >= f.last_failed_at + least(make_interval(secs => power(2, f.failures - %[2]s - 1)),
	                                        make_interval(secs => $2))
	RETURNING key`

// AdmitLogin records a sign-in attempt against each key in turn, in one
// statement, before any password is checked, and returns zero when the
// attempt may go ahead, or how long attempts counted against one of the
// keys must still wait (at least a second) when it may not. An attempt
// refused by a key is not counted against it nor against the keys after
// it; it stays counted against the keys before it, so the key a guesser
// can least afford to move (an account's count across all addresses) goes
// last. A key whose IfAccount names no account is passed over.
func (s *Store) AdmitLogin(ctx context.Context, keys ...LoginKey) (time.Duration, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	args := []any{loginFailureForgets.Seconds(), maxLoginDelay.Seconds()}
	param := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	// One pair of CTEs per key: k<i> counts the attempt when every key
	// before it admitted it (and the key applies), ok<i> says whether it is
	// admitted so far.
	var sql strings.Builder
	sql.WriteString("WITH ")
	admittedSoFar := "true"
	for i, k := range keys {
		applies := "true"
		if k.IfAccount != "" {
			applies = "EXISTS (SELECT FROM users WHERE lower(email) = lower(" + param(k.IfAccount) + "::text) AND " + isPasswordAccount + ")"
		}
		source := "SELECT " + param(k.Key) + "::text, 1, now() WHERE " + admittedSoFar + " AND " + applies
		count := fmt.Sprintf(loginAttemptSQL, source, param(k.Free)+"::int")
		if i > 0 {
			sql.WriteString(",\n")
		}
		fmt.Fprintf(&sql, "k%d AS (%s),\nok%d AS (SELECT %s AND (EXISTS (SELECT FROM k%d) OR NOT %s) AS ok)",
			i, count, i, admittedSoFar, i, applies)
		admittedSoFar = fmt.Sprintf("(SELECT ok FROM ok%d)", i)
	}
	sql.WriteString("\nSELECT " + admittedSoFar)
	var admitted bool
	if err := s.db.QueryRow(ctx, sql.String(), args...).Scan(&admitted); err != nil {
		return 0, fmt.Errorf("record sign-in attempt: %w", err)
	}
	if admitted {
		return 0, nil
	}
	// Only what to tell the person: the decision was made above.
	var wait time.Duration
	for _, k := range keys {
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
