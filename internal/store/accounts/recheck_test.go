package accounts_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/store/accounts"
)

// Replicas claiming re-checks at once each take an account no other holds:
// 8 claimers racing over 40 due accounts take each exactly once, as some
// providers revoke a refresh token used twice at once.
func TestClaimRechecks_OneReplicaPerAccount(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	const due = 40
	for i := range due {
		u, _ := signInFromProvider(t, s, accounts.ProviderIdentity{Issuer: "https://idp.example.com",
			Subject: fmt.Sprintf("sub-%d", i), Email: fmt.Sprintf("p%d@example.com", i)}, accounts.RoleViewer)
		if err := s.InTx(ctx, func(tx *accounts.Tx) error {
			return tx.KeepRefreshToken(ctx, u.ID, []byte("sealed"), time.Now().Add(-time.Second))
		}); err != nil {
			t.Fatal(err)
		}
	}
	claimed := map[int64]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			<-start
			for {
				got, err := s.ClaimRechecks(ctx, 3, time.Minute, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, r := range got {
					claimed[r.ID]++
					if string(r.Sealed) != "sealed" {
						t.Errorf("account %d claimed with token %q", r.ID, r.Sealed)
					}
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if len(claimed) != due {
		t.Errorf("%d accounts claimed, want %d", len(claimed), due)
	}
	for id, n := range claimed {
		if n != 1 {
			t.Errorf("account %d claimed %d times, want once", id, n)
		}
	}
	// Under lease, none is due again until it ends.
	if again, err := s.ClaimRechecks(ctx, due, time.Minute, time.Hour); err != nil || len(again) != 0 {
		t.Errorf("claimed again under lease: %d (%v)", len(again), err)
	}
}

// A refresh token outlives no session: once the account's last sign-in is
// older than the session max age, the token is dropped, not used.
func TestClaimRechecks_DropsTokensOfEndedSessions(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	pool := b.pool
	ctx := context.Background()
	u, _ := signInFromProvider(t, s, accounts.ProviderIdentity{Issuer: "https://idp.example.com", Subject: "old",
		Email: "old@example.com"}, accounts.RoleViewer)
	if err := s.InTx(ctx, func(tx *accounts.Tx) error {
		return tx.KeepRefreshToken(ctx, u.ID, []byte("sealed"), time.Now().Add(-time.Second))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE users SET last_sign_in_at = now() - interval '13 hours' WHERE id = $1`, u.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ClaimRechecks(ctx, 10, time.Minute, 12*time.Hour); err != nil || len(got) != 0 {
		t.Fatalf("claimed %d (%v), want none", len(got), err)
	}
	var kept bool
	if err := pool.QueryRow(ctx, `SELECT oidc_refresh_token IS NOT NULL FROM users WHERE id = $1`, u.ID).Scan(&kept); err != nil || kept {
		t.Errorf("token kept %v (%v), want dropped", kept, err)
	}
}
