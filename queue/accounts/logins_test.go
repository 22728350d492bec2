package accounts_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/queue/accounts"
	"github.com/hookd/hookd/queue/queuetest"
)

func TestAdmitLogin_WaitGrowsAfterTheFreeAttempts(t *testing.T) {
	t.Parallel()
	s, pool := queuetest.NewAccounts(t)
	ctx := context.Background()
	account := accounts.LoginKey{Key: "account:a@example.com|ip:192.0.2.1", Free: 3}
	address := accounts.LoginKey{Key: "ip:192.0.2.1", Free: 50}
	admit := func() time.Duration {
		t.Helper()
		d, err := s.AdmitLogin(ctx, account, address)
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
	if d := admit(); d <= 0 || d > time.Second {
		t.Fatalf("the fifth attempt at once: wait %s, want about a second", d)
	}
	if got := loginCount(t, pool, account.Key); got != 4 {
		t.Errorf("account count %d after a refused attempt, want 4: a refused attempt is not counted", got)
	}
	if _, err := pool.Exec(ctx, `UPDATE login_failures SET failures = 7 WHERE key = $1`, account.Key); err != nil {
		t.Fatal(err)
	}
	// Seven attempts, four past the free ones: 2^3 seconds.
	if d, err := s.LoginDelay(ctx, account.Key, account.Free); err != nil || d <= 7*time.Second || d > 8*time.Second {
		t.Fatalf("after 7 attempts the delay is %s (%v), want just under 8s", d, err)
	}
	if d := admit(); d <= 7*time.Second || d > 8*time.Second {
		t.Fatalf("an attempt after 7: wait %s, want just under 8s", d)
	}
	if got := loginCount(t, pool, address.Key); got != 4 {
		t.Errorf("address count %d, want 4: only admitted attempts count against it", got)
	}
	if err := s.ClearLoginFailures(ctx, account.Key); err != nil {
		t.Fatal(err)
	}
	if err := s.ForgiveLoginAttempt(ctx, address.Key); err != nil {
		t.Fatal(err)
	}
	if d := admit(); d != 0 {
		t.Fatalf("after clearing the wait is %s, want 0", d)
	}
	if got := loginCount(t, pool, address.Key); got != 4 {
		t.Errorf("address count %d after one forgiven and one more attempt, want 4", got)
	}
}

// loginCount returns the attempts counted against key.
func loginCount(t *testing.T, pool *pgxpool.Pool, key string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT failures FROM login_failures WHERE key = $1`, key).Scan(&n); err != nil {
		t.Fatalf("count of %s: %v", key, err)
	}
	return n
}

// Concurrent attempts are admitted exactly as the count allows: the
// attempt is counted in the statement that decides, not after the check.
func TestAdmitLogin_ConcurrentAttemptsGetOnlyTheFreeOnes(t *testing.T) {
	t.Parallel()
	s, pool := queuetest.NewAccounts(t)
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
		if got := loginCount(t, pool, k); int64(got) != admitted.Load() {
			t.Errorf("%s counts %d attempts, want the %d admitted", k, got, admitted.Load())
		}
	}
}
