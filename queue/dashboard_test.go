package queue_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

func TestUsers_EmailIsUniqueWithoutCase(t *testing.T) {
	t.Parallel()
	s, _ := queuetest.NewStore(t)
	ctx := context.Background()
	if _, err := s.CreateUser(ctx, "Ana@Example.com", "long enough", queue.RoleOperator); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateUser(ctx, "ana@example.COM", "long enough", queue.RoleViewer); err == nil {
		t.Fatal("a second account for the same email in another case was created")
	}
	u, err := s.Authenticate(ctx, "ANA@example.com", "long enough")
	if err != nil {
		t.Fatalf("authenticate: %v", err)
	}
	if u.Email != "Ana@Example.com" || u.Role != queue.RoleOperator {
		t.Errorf("authenticated as %s (%s), want Ana@Example.com (operator)", u.Email, u.Role)
	}
	for _, tc := range []struct{ email, password string }{
		{"ana@example.com", "wrong password"},
		{"nobody@example.com", "long enough"},
	} {
		if _, err := s.Authenticate(ctx, tc.email, tc.password); !errors.Is(err, queue.ErrBadCredentials) {
			t.Errorf("authenticate %s / %s: %v, want ErrBadCredentials", tc.email, tc.password, err)
		}
	}
	if _, err := s.CreateUser(ctx, "short@example.com", "short", queue.RoleViewer); err == nil {
		t.Error("a 5-character password was accepted")
	}
}

// The bootstrap account is created when missing and never changed after:
// a password or role changed since stays changed at the next start.
func TestUsers_EnsureAdminCreatesOnlyWhenMissing(t *testing.T) {
	t.Parallel()
	s, _ := queuetest.NewStore(t)
	ctx := context.Background()
	u, created, err := s.EnsureAdmin(ctx, "admin@example.com", "first password")
	if err != nil || !created || u.Role != queue.RoleAdmin {
		t.Fatalf("first EnsureAdmin: %+v, created %v, %v; want an admin created", u, created, err)
	}
	if err := s.SetPassword(ctx, "admin@example.com", "changed password"); err != nil {
		t.Fatal(err)
	}
	other, err := s.CreateUser(ctx, "other@example.com", "other password", queue.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.InTx(ctx, func(tx *queue.Tx) error {
		_, err := tx.SetRole(ctx, other.ID, u.ID, queue.RoleViewer)
		return err
	}); err != nil {
		t.Fatal(err)
	}

	again, created, err := s.EnsureAdmin(ctx, "ADMIN@example.com", "first password")
	if err != nil || created || again.ID != u.ID {
		t.Fatalf("second EnsureAdmin: %+v, created %v, %v; want the existing account", again, created, err)
	}
	if again.Role != queue.RoleViewer {
		t.Errorf("role %s after the second start, want the viewer it was made", again.Role)
	}
	if _, err := s.Authenticate(ctx, "admin@example.com", "first password"); !errors.Is(err, queue.ErrBadCredentials) {
		t.Errorf("the bootstrap password works again after a restart: %v", err)
	}
	if _, err := s.Authenticate(ctx, "admin@example.com", "changed password"); err != nil {
		t.Errorf("the changed password no longer works: %v", err)
	}
}

// Replicas starting at once on an empty database create one account.
func TestUsers_EnsureAdminConcurrentStartsCreateOne(t *testing.T) {
	t.Parallel()
	s, pool := queuetest.NewStore(t)
	var created atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			<-start
			_, c, err := s.EnsureAdmin(context.Background(), "admin@example.com", "first password")
			if err != nil {
				t.Error(err)
			}
			if c {
				created.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM users`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if created.Load() != 1 || n != 1 {
		t.Errorf("%d starts said they created the account, %d accounts exist; want 1 and 1", created.Load(), n)
	}
}

func TestAdmitLogin_WaitGrowsAfterTheFreeAttempts(t *testing.T) {
	t.Parallel()
	s, pool := queuetest.NewStore(t)
	ctx := context.Background()
	account := queue.LoginKey{Key: "account:a@example.com|ip:192.0.2.1", Free: 3}
	address := queue.LoginKey{Key: "ip:192.0.2.1", Free: 50}
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
	s, pool := queuetest.NewStore(t)
	account := queue.LoginKey{Key: "account:a@example.com|ip:192.0.2.1", Free: 5}
	address := queue.LoginKey{Key: "ip:192.0.2.1", Free: 50}
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

func TestRetryDeadMatching_SendsBackOnlyMatchingDeadEvents(t *testing.T) {
	t.Parallel()
	s, pool := queuetest.NewStore(t)
	ctx := context.Background()
	match := queuetest.InsertEvent(t, pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5, EventType: "invoice.paid", LastError: "100% TIMEOUT"})
	otherType := queuetest.InsertEvent(t, pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5, EventType: "charge.failed", LastError: "timeout"})
	// "%" in the filter is a literal percent sign, not a wildcard.
	otherErr := queuetest.InsertEvent(t, pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5, EventType: "invoice.paid", LastError: "1000 timeout"})
	pending := queuetest.InsertEvent(t, pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 2, EventType: "invoice.paid", LastError: "100% timeout"})

	f := queue.EventFilter{EventType: "invoice.paid", ErrorContains: "100% time"}
	n, err := s.RetryDeadMatching(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("retried %d events, want 1", n)
	}
	for _, tc := range []struct {
		e    queue.Event
		want queue.Status
	}{{match, queue.StatusFailed}, {otherType, queue.StatusDead}, {otherErr, queue.StatusDead}, {pending, queue.StatusRetrying}} {
		got, err := s.Event(ctx, tc.e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != tc.want {
			t.Errorf("%s (%s, %q): status %s, want %s", tc.e.EventID, tc.e.EventType, *tc.e.LastError, got.Status, tc.want)
		}
	}
	got, _ := s.Event(ctx, match.ID)
	if got.Attempts != 0 || !got.ManualRetry {
		t.Errorf("retried event: attempts %d, manual %v; want 0, true", got.Attempts, got.ManualRetry)
	}
}

func TestRetryNow_OnlyPendingEvents(t *testing.T) {
	t.Parallel()
	s, pool := queuetest.NewStore(t)
	ctx := context.Background()
	pending := queuetest.InsertEvent(t, pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 3, DueIn: time.Hour})
	dead := queuetest.InsertEvent(t, pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5})

	if ok, err := s.RetryNow(ctx, dead.ID); err != nil || ok {
		t.Fatalf("RetryNow(dead) = %v, %v; want false, nil", ok, err)
	}
	if ok, err := s.RetryNow(ctx, pending.ID); err != nil || !ok {
		t.Fatalf("RetryNow(pending) = %v, %v; want true, nil", ok, err)
	}
	claimed, err := s.ClaimDue(ctx, 10, queue.DefaultClaimWindow)
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 1 || claimed[0].ID != pending.ID || !claimed[0].ManualRetry || claimed[0].Attempts != 3 {
		t.Fatalf("claimed %+v, want the pending event, manual, still at 3 attempts", claimed)
	}
}

func TestAudit_RolledBackWithItsAction(t *testing.T) {
	t.Parallel()
	s, pool := queuetest.NewStore(t)
	ctx := context.Background()
	dead := queuetest.InsertEvent(t, pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5})
	boom := errors.New("boom")
	err := s.InTx(ctx, func(tx *queue.Tx) error {
		if _, err := tx.RetryDead(ctx, dead.ID); err != nil {
			return err
		}
		if err := tx.Audit(ctx, "op@example.com", queue.AuditRetry, dead.EventID, 1); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx: %v", err)
	}
	page, err := s.AuditLog(ctx, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if page.Total != 0 {
		t.Errorf("%d audit entries after the rollback, want 0", page.Total)
	}
	if got, _ := s.Event(ctx, dead.ID); got.Status != queue.StatusDead {
		t.Errorf("event %s after the rollback, want dead", got.Status)
	}
}
