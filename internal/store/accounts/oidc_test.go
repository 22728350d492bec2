package accounts_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/store/accounts"
)

func signInFromProvider(t *testing.T, s *accounts.Store, id accounts.ProviderIdentity, role accounts.Role) (accounts.User, accounts.Role) {
	t.Helper()
	var u accounts.User
	var before accounts.Role
	err := s.InTx(context.Background(), func(tx *accounts.Tx) error {
		var err error
		u, before, err = tx.SignInFromProvider(context.Background(), id, role)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return u, before
}

// An account of the provider is keyed by issuer and subject: created at the
// first sign-in, its role and email taken afresh at each, and never found
// by email, so a password account with the same email is another account
// and no password signs in to the provider's.
func TestProviderAccounts_KeyedByIssuerAndSubject(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	local := createUser(t, s, "ana@example.com", accounts.RoleAdmin)
	id := accounts.ProviderIdentity{Issuer: "https://idp.example.com", Subject: "sub-1", Email: "ana@example.com"}

	u, before := signInFromProvider(t, s, id, accounts.RoleOperator)
	if before != "" || !u.FromProvider() || u.ID == local.ID || u.Role != accounts.RoleOperator || u.LastSignInAt == nil {
		t.Fatalf("first sign-in: %+v, before %q; want a new operator account of the provider, signed in", u, before)
	}
	id.Email = "ana.renamed@example.com"
	again, before := signInFromProvider(t, s, id, accounts.RoleViewer)
	if again.ID != u.ID || before != accounts.RoleOperator || again.Role != accounts.RoleViewer || again.Email != id.Email {
		t.Fatalf("second sign-in: %+v, before %q; want the same account, now a viewer with the new email", again, before)
	}
	other, _ := signInFromProvider(t, s, accounts.ProviderIdentity{Issuer: "https://other.example.com", Subject: "sub-1",
		Email: "ana.renamed@example.com"}, accounts.RoleViewer)
	if other.ID == u.ID {
		t.Error("the same subject from another issuer signed in to the first issuer's account")
	}

	if byEmail, err := s.UserByEmail(ctx, "ana.renamed@example.com"); !errors.Is(err, accounts.ErrNotFound) {
		t.Errorf("UserByEmail found the provider's account %+v (%v); want ErrNotFound", byEmail, err)
	}
	if _, err := s.Authenticate(ctx, "ana.renamed@example.com", ""); !errors.Is(err, accounts.ErrBadCredentials) {
		t.Errorf("a password sign-in to the provider's account: %v, want ErrBadCredentials", err)
	}
	if err := s.SetPassword(ctx, "ana.renamed@example.com", "long enough"); !errors.Is(err, accounts.ErrNotFound) {
		t.Errorf("set the password of the provider's account: %v, want ErrNotFound", err)
	}

	err := s.InTx(ctx, func(tx *accounts.Tx) error {
		_, err := tx.SetRole(ctx, local.ID, u.ID, accounts.RoleAdmin)
		return err
	})
	var refused *accounts.RefusedError
	if !errors.As(err, &refused) {
		t.Errorf("an admin set the role of the provider's account: %v, want it refused", err)
	}
}

func TestProviderAccounts_EndSessionsChangesTheStamp(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	u := createUser(t, s, "ana@example.com", accounts.RoleViewer)
	ended, err := s.EndSessions(context.Background(), u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ended.SessionStamp() == u.SessionStamp() {
		t.Error("ending the sessions left the session stamp as it was")
	}
	if _, err := s.EndSessions(context.Background(), 1<<40); !errors.Is(err, accounts.ErrNotFound) {
		t.Errorf("end the sessions of no account: %v, want ErrNotFound", err)
	}
}

func TestSignInState_IsGoodForOneCallback(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	expires := time.Now().Add(10 * time.Minute)
	for i, want := range []bool{true, false} {
		fresh, err := s.UseSignInState(ctx, "state-1", expires)
		if err != nil {
			t.Fatal(err)
		}
		if fresh != want {
			t.Errorf("use %d: fresh %v, want %v", i+1, fresh, want)
		}
	}
	if fresh, err := s.UseSignInState(ctx, "state-2", expires); err != nil || !fresh {
		t.Errorf("another state: fresh %v, %v; want fresh", fresh, err)
	}
}
