package accounts_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/queue/queuetest"
)

func TestAdmitLogin_WaitGrowsAfterTheFreeAttempts(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	account := accounts.LoginKey{Key: "account:a@example.com|ip:192.0.2.1", Free: 3}
	address := accounts.LoginKey{Key: "ip:192.0.2.1", Free: 50}
	// Everything runs in one transaction, where every statement reads the
	// same now(): the waits are the rule's exact values, however long the
	// machine takes between two statements. The transaction is rolled back.
	err := s.InTx(ctx, func(tx *accounts.Tx) error {
		db := tx.PgxTx()
		admit := func() time.Duration {
			t.Helper()
			d, err := tx.AdmitLogin(ctx, account, address)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		// The free attempts, and one more: it is the fourth that makes the
		// next one wait.
		for i := range 4 {
			if d := admit(); d != 0 {
				t.Fatalf("attempt %d must wait %s, want it admitted", i+1, d)
			}
		}
		if d := admit(); d != time.Second {
			t.Fatalf("the fifth attempt at once: wait %s, want 1s", d)
		}
		if got := loginCount(t, db, account.Key); got != 4 {
			t.Errorf("account count %d after a refused attempt, want 4: a refused attempt is not counted", got)
		}
		// Past the free attempts the wait doubles with every attempt, from one
		// second up to the 15-minute ceiling, and runs from the last attempt.
		setFailures := func(failures int, since time.Duration) {
			t.Helper()
			if _, err := db.Exec(ctx, `
				UPDATE login_failures SET failures = $2, last_failed_at = now() - make_interval(secs => $3)
				WHERE key = $1`, account.Key, failures, since.Seconds()); err != nil {
				t.Fatal(err)
			}
		}
		for failures, want := range map[int]time.Duration{
			4: time.Second, 5: 2 * time.Second, 6: 4 * time.Second, 7: 8 * time.Second,
			13: 512 * time.Second, 14: 15 * time.Minute, 40: 15 * time.Minute,
		} {
			setFailures(failures, 0)
			if d, err := tx.LoginDelay(ctx, account.Key, account.Free); err != nil || d != want {
				t.Errorf("after %d attempts the delay is %s (%v), want %s", failures, d, err, want)
			}
		}
		setFailures(7, 3*time.Second)
		if d, err := tx.LoginDelay(ctx, account.Key, account.Free); err != nil || d != 5*time.Second {
			t.Fatalf("3s after the 7th attempt the delay is %s (%v), want 5s", d, err)
		}
		if d := admit(); d != 5*time.Second {
			t.Fatalf("an attempt 3s after the 7th: wait %s, want 5s", d)
		}
		setFailures(7, 8*time.Second)
		if d := admit(); d != 0 {
			t.Fatalf("an attempt 8s after the 7th: wait %s, want it admitted", d)
		}
		if got := loginCount(t, db, account.Key); got != 8 {
			t.Errorf("account count %d after an admitted 8th attempt, want 8", got)
		}
		if got := loginCount(t, db, address.Key); got != 5 {
			t.Errorf("address count %d, want 5: only admitted attempts count against it", got)
		}
		setFailures(7, time.Hour)
		if d := admit(); d != 0 {
			t.Fatalf("an attempt an hour after the 7th: wait %s, want it admitted", d)
		}
		if got := loginCount(t, db, account.Key); got != 1 {
			t.Errorf("account count %d an hour after the last attempt, want 1: the count starts over", got)
		}
		if err := tx.ClearLoginFailures(ctx, account.Key); err != nil {
			t.Fatal(err)
		}
		if err := tx.ForgiveLoginAttempt(ctx, address.Key); err != nil {
			t.Fatal(err)
		}
		if d := admit(); d != 0 {
			t.Fatalf("after clearing the wait is %s, want 0", d)
		}
		if got := loginCount(t, db, address.Key); got != 6 {
			t.Errorf("address count %d after one forgiven and one more attempt, want 6", got)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
}

// errRollback ends a test's transaction without committing it.
var errRollback = errors.New("rolled back at the end of the test")

// loginCount returns the attempts counted against key.
func loginCount(t *testing.T, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, key string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), `SELECT failures FROM login_failures WHERE key = $1`, key).Scan(&n); err != nil {
		t.Fatalf("count of %s: %v", key, err)
	}
	return n
}

// Concurrent attempts are admitted exactly as the count allows: the
// attempt is counted in the statement that decides, not after the check.
func TestAdmitLogin_ConcurrentAttemptsGetOnlyTheFreeOnes(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	account := accounts.LoginKey{Key: "account:a@example.com|ip:192.0.2.1", Free: 5}
	address := accounts.LoginKey{Key: "ip:192.0.2.1", Free: 50}
	const attempts = 60
	var admitted atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range attempts {
		wg.Go(func() {
			<-start
			d, err := s.AdmitLogin(context.Background(), account, address)
			if err != nil {
				t.Error(err)
				return
			}
			if d == 0 {
				admitted.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	// Five free and the sixth; a seventh only if the attempts took longer
	// than the second the sixth makes the next one wait.
	if n := admitted.Load(); n < 6 || n > 7 {
		t.Errorf("%d of %d concurrent attempts admitted, want 6", n, attempts)
	}
	for _, k := range []string{account.Key, address.Key} {
		if got := loginCount(t, bundle.pool, k); int64(got) != admitted.Load() {
			t.Errorf("%s counts %d attempts, want the %d admitted", k, got, admitted.Load())
		}
	}
}

// An attempt refused by a key is counted against the keys before it only;
// a key kept for an account counts only when the account exists, so
// guesses at made-up emails write no row for it.
func TestAdmitLogin_KeysInTurnAndOnlyForAccountsThatExist(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := context.Background()
	if _, err := s.CreateUser(ctx, "ana@example.com", "correct horse battery", accounts.RoleViewer); err != nil {
		t.Fatal(err)
	}
	atAddress := accounts.LoginKey{Key: "account:ana@example.com|ip:192.0.2.1", Free: 5}
	address := accounts.LoginKey{Key: "ip:192.0.2.1", Free: 50}
	account := accounts.LoginKey{Key: "account:ana@example.com", Free: 1, IfAccount: "ANA@example.com"}
	for i, want := range []time.Duration{0, 0, time.Second} {
		if d, err := s.AdmitLogin(ctx, atAddress, address, account); err != nil || d != want {
			t.Fatalf("attempt %d: wait %s (%v), want %s", i+1, d, err, want)
		}
	}
	// The third was refused by the account's count, the last: counted
	// against the two before it, not against the account.
	for key, want := range map[string]int{atAddress.Key: 3, address.Key: 3, account.Key: 2} {
		if got := loginCount(t, bundle.pool, key); got != want {
			t.Errorf("%s counts %d, want %d", key, got, want)
		}
	}

	nobody := accounts.LoginKey{Key: "account:nobody@example.com", Free: 1, IfAccount: "nobody@example.com"}
	for i := range 5 {
		if d, err := s.AdmitLogin(ctx, accounts.LoginKey{Key: "ip:192.0.2.2", Free: 50}, nobody); err != nil || d != 0 {
			t.Fatalf("attempt %d at a made-up email: wait %s (%v), want it admitted", i+1, d, err)
		}
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM login_failures WHERE key = $1`, nobody.Key); n != 0 {
		t.Errorf("%d rows for an email no account has, want none", n)
	}
	if got := loginCount(t, bundle.pool, "ip:192.0.2.2"); got != 5 {
		t.Errorf("address counts %d, want 5", got)
	}
}

// Every Authenticate is one password check, whatever its answer.
func TestAuthenticate_CountsEveryCheck(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	if _, err := s.CreateUser(ctx, "ana@example.com", "correct horse battery", accounts.RoleViewer); err != nil {
		t.Fatal(err)
	}
	for _, try := range [][2]string{{"ana@example.com", "correct horse battery"}, {"ana@example.com", "wrong"}, {"nobody@example.com", "wrong"}} {
		_, _ = s.Authenticate(ctx, try[0], try[1])
	}
	if err := s.InTx(ctx, func(tx *accounts.Tx) error {
		_, err := tx.Authenticate(ctx, "ana@example.com", "correct horse battery")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n := s.PasswordChecks(); n != 4 {
		t.Errorf("PasswordChecks %d after 4 checks, want 4", n)
	}
}
