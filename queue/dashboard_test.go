package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

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

func TestUsers_EnsureAdminCreatesThenUpdates(t *testing.T) {
	t.Parallel()
	s, _ := queuetest.NewStore(t)
	ctx := context.Background()
	for _, step := range []struct {
		password, want string
	}{
		{"first password", "created"},
		{"first password", ""},
		{"second password", "updated"},
	} {
		got, err := s.EnsureAdmin(ctx, "admin@example.com", step.password)
		if err != nil {
			t.Fatal(err)
		}
		if got != step.want {
			t.Errorf("EnsureAdmin(%q) = %q, want %q", step.password, got, step.want)
		}
	}
	if _, err := s.Authenticate(ctx, "admin@example.com", "first password"); !errors.Is(err, queue.ErrBadCredentials) {
		t.Errorf("the old password still works: %v", err)
	}
	u, err := s.Authenticate(ctx, "admin@example.com", "second password")
	if err != nil || u.Role != queue.RoleAdmin {
		t.Errorf("new password: %v, role %s; want admin", err, u.Role)
	}
}

func TestLoginDelay_GrowsAfterTheFreeFailures(t *testing.T) {
	t.Parallel()
	s, _ := queuetest.NewStore(t)
	ctx := context.Background()
	delay := func() time.Duration {
		t.Helper()
		d, err := s.LoginDelay(ctx, "email:a@example.com", 3)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for range 3 {
		if err := s.RecordLoginFailure(ctx, "email:a@example.com"); err != nil {
			t.Fatal(err)
		}
	}
	if d := delay(); d != 0 {
		t.Fatalf("after the free failures the delay is %s, want 0", d)
	}
	for range 4 {
		if err := s.RecordLoginFailure(ctx, "email:a@example.com"); err != nil {
			t.Fatal(err)
		}
	}
	// Seventh failure, four past the free ones: 2^3 seconds.
	if d := delay(); d <= 7*time.Second || d > 8*time.Second {
		t.Fatalf("after 7 failures the delay is %s, want just under 8s", d)
	}
	if err := s.ClearLoginFailures(ctx, "email:a@example.com"); err != nil {
		t.Fatal(err)
	}
	if d := delay(); d != 0 {
		t.Fatalf("after clearing the delay is %s, want 0", d)
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
