package accounts_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hookd/hookd/internal/store/accounts"
)

func TestUsers_EmailIsUniqueWithoutCase(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	if _, err := s.CreateUser(ctx, "Ana@Example.com", "long enough", accounts.RoleOperator); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateUser(ctx, "ana@example.COM", "long enough", accounts.RoleViewer); err == nil {
		t.Fatal("a second account for the same email in another case was created")
	}
	u, err := s.Authenticate(ctx, "ANA@example.com", "long enough")
	if err != nil {
		t.Fatalf("authenticate: %v", err)
	}
	if u.Email != "Ana@Example.com" || u.Role != accounts.RoleOperator {
		t.Errorf("authenticated as %s (%s), want Ana@Example.com (operator)", u.Email, u.Role)
	}
	for _, tc := range []struct{ email, password string }{
		{"ana@example.com", "wrong password"},
		{"nobody@example.com", "long enough"},
	} {
		if _, err := s.Authenticate(ctx, tc.email, tc.password); !errors.Is(err, accounts.ErrBadCredentials) {
			t.Errorf("authenticate %s / %s: %v, want ErrBadCredentials", tc.email, tc.password, err)
		}
	}
	if _, err := s.CreateUser(ctx, "short@example.com", "short", accounts.RoleViewer); err == nil {
		t.Error("a 5-character password was accepted")
	}
}

// The bootstrap account is created when missing and never changed after:
// a password or role changed since stays changed at the next start.
func TestUsers_EnsureAdminCreatesOnlyWhenMissing(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	u, created, err := s.EnsureAdmin(ctx, "admin@example.com", "first password")
	if err != nil || !created || u.Role != accounts.RoleAdmin {
		t.Fatalf("first EnsureAdmin: %+v, created %v, %v; want an admin created", u, created, err)
	}
	if err := s.SetPassword(ctx, "admin@example.com", "changed password"); err != nil {
		t.Fatal(err)
	}
	other, err := s.CreateUser(ctx, "other@example.com", "other password", accounts.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.InTx(ctx, func(tx *accounts.Tx) error {
		_, err := tx.SetRole(ctx, other.ID, u.ID, accounts.RoleViewer)
		return err
	}); err != nil {
		t.Fatal(err)
	}

	again, created, err := s.EnsureAdmin(ctx, "ADMIN@example.com", "first password")
	if err != nil || created || again.ID != u.ID {
		t.Fatalf("second EnsureAdmin: %+v, created %v, %v; want the existing account", again, created, err)
	}
	if again.Role != accounts.RoleViewer {
		t.Errorf("role %s after the second start, want the viewer it was made", again.Role)
	}
	if _, err := s.Authenticate(ctx, "admin@example.com", "first password"); !errors.Is(err, accounts.ErrBadCredentials) {
		t.Errorf("the bootstrap password works again after a restart: %v", err)
	}
	if _, err := s.Authenticate(ctx, "admin@example.com", "changed password"); err != nil {
		t.Errorf("the changed password no longer works: %v", err)
	}
}

// Replicas starting at once on an empty database create one account.
func TestUsers_EnsureAdminConcurrentStartsCreateOne(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
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
	if err := bundle.pool.QueryRow(context.Background(), `SELECT count(*) FROM users`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if created.Load() != 1 || n != 1 {
		t.Errorf("%d starts said they created the account, %d accounts exist; want 1 and 1", created.Load(), n)
	}
}
