package idempotency_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/hookd/hookd/internal/store/idempotency"
	"github.com/hookd/hookd/queue/queuetest"
)

// A key's life: held by its first claim, running to every other claim of
// the same request, refused to another request, its answer kept once
// finished, and free again once released or expired, or when the replica
// holding it died long ago.
func TestIdempotency_AKeysLife(t *testing.T) {
	t.Parallel()
	pool := queuetest.NewPool(t)
	s := idempotency.New(pool)
	ctx := context.Background()
	req, other := []byte("request"), []byte("another request")

	if kept, err := s.Claim(ctx, 1, "k", req); kept != nil || err != nil {
		t.Fatalf("first claim: %v, %v; want it held", kept, err)
	}
	if _, err := s.Claim(ctx, 1, "k", req); !errors.Is(err, idempotency.ErrRunning) {
		t.Fatalf("claim while running: %v, want ErrRunning", err)
	}
	if _, err := s.Claim(ctx, 1, "k", other); !errors.Is(err, idempotency.ErrMismatch) {
		t.Fatalf("claim for another request: %v, want ErrMismatch", err)
	}
	if kept, err := s.Claim(ctx, 2, "k", other); kept != nil || err != nil {
		t.Fatalf("another token's claim of k: %v, %v; want it held: keys are per token", kept, err)
	}
	answer := idempotency.Answer{Status: 200, ContentType: "application/json", Body: []byte(`{"ok":true}`)}
	if err := s.Finish(ctx, 1, "k", answer); err != nil {
		t.Fatal(err)
	}
	kept, err := s.Claim(ctx, 1, "k", req)
	if err != nil || kept == nil || kept.Status != 200 || kept.ContentType != answer.ContentType || string(kept.Body) != string(answer.Body) {
		t.Fatalf("claim after the answer: %+v, %v; want the answer", kept, err)
	}
	if _, err := s.Claim(ctx, 1, "k", other); !errors.Is(err, idempotency.ErrMismatch) {
		t.Fatalf("claim of an answered key for another request: %v, want ErrMismatch", err)
	}

	// Released: free again.
	if err := s.Release(ctx, 2, "k"); err != nil {
		t.Fatal(err)
	}
	if kept, err := s.Claim(ctx, 2, "k", req); kept != nil || err != nil {
		t.Fatalf("claim after release: %v, %v; want it held", kept, err)
	}
	// Held by a replica that died long ago: free again.
	if _, err := pool.Exec(ctx, `UPDATE api_idempotency SET created_at = now() - interval '6 minutes' WHERE token_id = 2`); err != nil {
		t.Fatal(err)
	}
	if kept, err := s.Claim(ctx, 2, "k", other); kept != nil || err != nil {
		t.Fatalf("claim of an abandoned key: %v, %v; want it held", kept, err)
	}
	// Answered over a day ago: expired, free for any request, and pruned
	// by the next claim of any key.
	if _, err := pool.Exec(ctx, `UPDATE api_idempotency SET created_at = now() - interval '25 hours' WHERE token_id = 1`); err != nil {
		t.Fatal(err)
	}
	if kept, err := s.Claim(ctx, 1, "k", other); kept != nil || err != nil {
		t.Fatalf("claim of an expired key: %v, %v; want it held", kept, err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO api_idempotency (token_id, key, request_hash, created_at, status)
		VALUES (3, 'old', 'x', now() - interval '25 hours', 200)`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, 4, "new", req); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM api_idempotency WHERE token_id = 3`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d expired keys left after a claim (%v), want 0", n, err)
	}
}

// Of many claims of one key at once, exactly one holds it; every other is
// told it is running.
func TestIdempotency_RacingClaimsHoldOnce(t *testing.T) {
	t.Parallel()
	pool := queuetest.NewPool(t)
	s := idempotency.New(pool)
	const n = 32
	errs := make([]error, n)
	held := make([]bool, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			kept, err := s.Claim(context.Background(), 1, "race", []byte("r"))
			held[i], errs[i] = kept == nil && err == nil, err
		})
	}
	close(start)
	wg.Wait()
	holders, running := 0, 0
	for i := range n {
		switch {
		case held[i]:
			holders++
		case errors.Is(errs[i], idempotency.ErrRunning):
			running++
		default:
			t.Errorf("claim %d: %v", i, errs[i])
		}
	}
	if holders != 1 || running != n-1 {
		t.Fatalf("%d claims held the key and %d were told it runs; want 1 and %d", holders, running, n-1)
	}
}
