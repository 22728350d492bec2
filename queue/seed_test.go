package queue_test

// The contract tests of the seed's db::webhook_events module whose subject
// is a function production kept as its own (IsProcessed, PruneProcessed,
// RetryDead); the tests of the seed's single-row API are in
// seed_api_test.go.

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hookd/hookd/queue"
)

func isProcessed(t *testing.T, s *queue.Store, eventID string) bool {
	t.Helper()
	ok, err := s.IsProcessed(t.Context(), eventID)
	if err != nil {
		t.Fatalf("is processed: %v", err)
	}
	return ok
}

// ── dedup marker (processed_webhook_events) ──────────────────────────────────

func TestIsProcessed_FalseBeforeMarkTrueAfter(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	const id = "evt_dedup_basic"

	if isProcessed(t, s, id) {
		t.Fatal("an unseen event must not read as processed")
	}
	if err := s.MarkProcessed(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if !isProcessed(t, s, id) {
		t.Fatal("a marked event must read as processed")
	}
}

func TestPruneProcessed_RespectsRetentionBoundary(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()

	for _, id := range []string{"evt_old", "evt_fresh"} {
		if err := s.MarkProcessed(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	// Age the old marker past a 30-day retention; the fresh one stays at now().
	if _, err := bundle.pool.Exec(ctx, `UPDATE processed_webhook_events
		SET processed_at = now() - interval '40 days' WHERE event_id = 'evt_old'`); err != nil {
		t.Fatal(err)
	}

	deleted, err := s.PruneProcessed(ctx, 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if deleted != 1 {
		t.Fatalf("pruned %d markers, want exactly the aged one", deleted)
	}
	if isProcessed(t, s, "evt_old") {
		t.Fatal("the aged marker must be gone")
	}
	if !isProcessed(t, s, "evt_fresh") {
		t.Fatal("a within-retention marker must survive the prune")
	}
}

// ── retry queue (webhook_events) claim-and-defer ─────────────────────────────

// ── backoff and dead-lettering ───────────────────────────────────────────────

func TestRetryDead_ResurrectsOnlyDeadRows(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()

	// A live (failed) event is not dead, so retrying it changes nothing.
	live := seedDueEvent(t, s, bundle.pool, "resurrect.live")
	if ok, err := s.RetryDead(ctx, live); err != nil || ok {
		t.Fatalf("RetryDead(live) = %v, %v; want false: it acts only on dead rows", ok, err)
	}

	// A dead event goes back to failed and is claimable again.
	dead := seedDueEvent(t, s, bundle.pool, "resurrect.dead")
	if _, err := s.ScheduleRetry(ctx, dead, queue.MaxAttempts, "exhausted"); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.RetryDead(ctx, dead); err != nil || !ok {
		t.Fatalf("RetryDead(dead) = %v, %v; want true", ok, err)
	}
	var status string
	if err := bundle.pool.QueryRow(ctx, `SELECT status FROM webhook_events WHERE id = $1`, dead).Scan(&status); err != nil {
		t.Fatal(err)
	}
	if status != "failed" {
		t.Fatalf("status = %q, want failed: a resurrected event returns to the queue", status)
	}
	// The seed stopped at the status, leaving attempts at 5 where the claim
	// can never reach it; hookd starts the attempts over, so it is claimed.
	claimed := claim(t, s)
	ids := map[uuid.UUID]bool{}
	for _, e := range claimed {
		ids[e.ID] = true
	}
	if !ids[dead] {
		t.Fatalf("the resurrected event was not claimed (claimed %d events)", len(claimed))
	}
}
