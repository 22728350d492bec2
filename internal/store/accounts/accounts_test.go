package accounts_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/queue/queuetest"
)

// testBundle is what a test of the accounts works with besides its Store.
type testBundle struct {
	// pool is on the test's own fresh, migrated database, for the rows a
	// test puts in place and the assertions it makes in SQL.
	pool *pgxpool.Pool
}

// setup returns a Store on a fresh, migrated database of t's own, and the
// bundle of what else the test needs. Every test of the package starts
// with it.
func setup(t testing.TB) (*accounts.Store, *testBundle) {
	t.Helper()
	pool := queuetest.NewPool(t)
	return accounts.New(pool), &testBundle{pool: pool}
}

func createUser(t *testing.T, s *accounts.Store, email string, role accounts.Role) accounts.User {
	t.Helper()
	u, err := s.CreateUser(context.Background(), email, "long enough", role)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func setRole(s *accounts.Store, actor, id int64, role accounts.Role) error {
	ctx := context.Background()
	return s.InTx(ctx, func(tx *accounts.Tx) error {
		_, err := tx.SetRole(ctx, actor, id, role)
		return err
	})
}

func removeUser(s *accounts.Store, actor, id int64) error {
	ctx := context.Background()
	return s.InTx(ctx, func(tx *accounts.Tx) error {
		_, err := tx.RemoveUser(ctx, actor, id)
		return err
	})
}

func roleOf(t *testing.T, s *accounts.Store, id int64) accounts.Role {
	t.Helper()
	u, err := s.User(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return u.Role
}

func wantRefused(t *testing.T, what string, err error) {
	t.Helper()
	if refused := (*accounts.RefusedError)(nil); !errors.As(err, &refused) {
		t.Fatalf("%s: got %v, want a *RefusedError", what, err)
	}
}

func TestCreateUser_RefusesWithAReason(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := context.Background()
	createUser(t, s, "taken@example.com", accounts.RoleViewer)
	for _, tc := range []struct{ name, email, password string }{
		{"NoAt", "nobody.example.com", "long enough"},
		{"NothingBeforeAt", "@example.com", "long enough"},
		{"NothingAfterAt", "nobody@", "long enough"},
		{"Blank", "no body@example.com", "long enough"},
		{"ShortPassword", "new@example.com", "short"},
		{"TakenInAnotherCase", "TAKEN@example.com", "long enough"},
	} {
		_, err := s.CreateUser(ctx, tc.email, tc.password, accounts.RoleViewer)
		wantRefused(t, tc.name, err)
	}
	var n int
	if err := bundle.pool.QueryRow(ctx, `SELECT count(*) FROM users`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d accounts after the refusals, want 1", n)
	}
}

func TestUsers_ListsEveryAccountByEmailWithoutHashes(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	createUser(t, s, "zed@example.com", accounts.RoleViewer)
	createUser(t, s, "Amy@example.com", accounts.RoleAdmin)
	createUser(t, s, "bob@example.com", accounts.RoleOperator)
	users, err := s.Users(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range users {
		got = append(got, u.Email+" "+string(u.Role))
		if u.PasswordHash != "" {
			t.Errorf("%s listed with its password hash", u.Email)
		}
		if u.CreatedAt.IsZero() {
			t.Errorf("%s listed without its creation time", u.Email)
		}
	}
	want := "Amy@example.com admin,bob@example.com operator,zed@example.com viewer"
	if j := strings.Join(got, ","); j != want {
		t.Errorf("users %s, want %s", j, want)
	}
}

func TestSetRole(t *testing.T) {
	t.Parallel()

	t.Run("ChangesAnotherAccountAndReturnsItAsItWas", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := context.Background()
		admin := createUser(t, s, "admin@example.com", accounts.RoleAdmin)
		op := createUser(t, s, "op@example.com", accounts.RoleOperator)
		var before accounts.User
		err := s.InTx(ctx, func(tx *accounts.Tx) error {
			var err error
			before, err = tx.SetRole(ctx, admin.ID, op.ID, accounts.RoleAdmin)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if before.Role != accounts.RoleOperator || before.Email != op.Email {
			t.Errorf("returned %s (%s), want op@example.com as it was (operator)", before.Email, before.Role)
		}
		if got := roleOf(t, s, op.ID); got != accounts.RoleAdmin {
			t.Errorf("role after the change %s, want admin", got)
		}
	})

	t.Run("RefusesTheActorsOwnRole", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		admin := createUser(t, s, "admin@example.com", accounts.RoleAdmin)
		createUser(t, s, "other-admin@example.com", accounts.RoleAdmin)
		wantRefused(t, "demote self", setRole(s, admin.ID, admin.ID, accounts.RoleViewer))
		if got := roleOf(t, s, admin.ID); got != accounts.RoleAdmin {
			t.Errorf("role %s after a refused self-demotion, want admin", got)
		}
	})

	t.Run("RefusesToDemoteTheLastAdmin", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		admin := createUser(t, s, "admin@example.com", accounts.RoleAdmin)
		// An actor who has lost the admin role since the request came in.
		former := createUser(t, s, "former@example.com", accounts.RoleOperator)
		wantRefused(t, "demote the last admin", setRole(s, former.ID, admin.ID, accounts.RoleOperator))
		if got := roleOf(t, s, admin.ID); got != accounts.RoleAdmin {
			t.Errorf("the last admin is now %s", got)
		}
	})

	t.Run("RefusesAnActorWhoIsNoLongerAdmin", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		createUser(t, s, "admin@example.com", accounts.RoleAdmin)
		former := createUser(t, s, "former@example.com", accounts.RoleOperator)
		viewer := createUser(t, s, "viewer@example.com", accounts.RoleViewer)
		wantRefused(t, "promote by a non-admin", setRole(s, former.ID, viewer.ID, accounts.RoleAdmin))
		if got := roleOf(t, s, viewer.ID); got != accounts.RoleViewer {
			t.Errorf("role %s after a refused change, want viewer", got)
		}
	})

	t.Run("UnknownAccountIsNotFound", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		admin := createUser(t, s, "admin@example.com", accounts.RoleAdmin)
		if err := setRole(s, admin.ID, admin.ID+1000, accounts.RoleViewer); !errors.Is(err, accounts.ErrNotFound) {
			t.Errorf("got %v, want ErrNotFound", err)
		}
	})

	// Two admins demote each other at the same moment, several rounds: one
	// demotion must win and the other be refused, never both, so one admin
	// always remains.
	t.Run("TwoAdminsDemotingEachOtherLeaveOneAdmin", func(t *testing.T) {
		t.Parallel()
		s, bundle := setup(t)
		ctx := context.Background()
		a := createUser(t, s, "a@example.com", accounts.RoleAdmin)
		b := createUser(t, s, "b@example.com", accounts.RoleAdmin)
		for round := range 8 {
			if _, err := bundle.pool.Exec(ctx, `UPDATE users SET role = 'admin'`); err != nil {
				t.Fatal(err)
			}
			start := make(chan struct{})
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for i, pair := range [][2]int64{{a.ID, b.ID}, {b.ID, a.ID}} {
				wg.Go(func() {
					<-start
					errs[i] = setRole(s, pair[0], pair[1], accounts.RoleOperator)
				})
			}
			close(start)
			wg.Wait()
			succeeded := 0
			for _, err := range errs {
				if err == nil {
					succeeded++
				} else {
					wantRefused(t, "the losing demotion", err)
				}
			}
			var admins int
			if err := bundle.pool.QueryRow(ctx, `SELECT count(*) FROM users WHERE role = 'admin'`).Scan(&admins); err != nil {
				t.Fatal(err)
			}
			if succeeded != 1 || admins != 1 {
				t.Fatalf("round %d: %d demotions succeeded, %d admins left; want 1 and 1 (errors %v)",
					round, succeeded, admins, errs)
			}
		}
	})
}

func TestRemoveUser(t *testing.T) {
	t.Parallel()

	t.Run("RemovesAnotherAccount", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		admin := createUser(t, s, "admin@example.com", accounts.RoleAdmin)
		other := createUser(t, s, "other-admin@example.com", accounts.RoleAdmin)
		if err := removeUser(s, admin.ID, other.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.User(context.Background(), other.ID); !errors.Is(err, accounts.ErrNotFound) {
			t.Errorf("removed account: got %v, want ErrNotFound", err)
		}
		if err := removeUser(s, admin.ID, other.ID); !errors.Is(err, accounts.ErrNotFound) {
			t.Errorf("removing it again: got %v, want ErrNotFound", err)
		}
	})

	t.Run("RefusesTheActorsOwnAccount", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		admin := createUser(t, s, "admin@example.com", accounts.RoleAdmin)
		createUser(t, s, "other-admin@example.com", accounts.RoleAdmin)
		wantRefused(t, "remove self", removeUser(s, admin.ID, admin.ID))
		roleOf(t, s, admin.ID)
	})

	t.Run("RefusesToRemoveTheLastAdmin", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		admin := createUser(t, s, "admin@example.com", accounts.RoleAdmin)
		former := createUser(t, s, "former@example.com", accounts.RoleOperator)
		wantRefused(t, "remove the last admin", removeUser(s, former.ID, admin.ID))
		roleOf(t, s, admin.ID)
	})
}
