package queue_test

import (
	"errors"
	"testing"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// releasedLockSQL is the per-event lock as every release so far has written
// it out. A replica of an older release, still running during a rolling
// upgrade, takes exactly this.
const releasedLockSQL = `SELECT pg_try_advisory_xact_lock(hashtextextended('stripe_webhook:' || $1::text, 0))`

// The per-event lock keeps its released key, so an older replica and this
// release exclude each other on every path: a delivery, a retry batch and a
// batch's claims.
func TestEventLock_KeyIsTheReleasedOne(t *testing.T) {
	t.Parallel()
	s, pool := queuetest.NewStore(t)
	ctx := t.Context()
	queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_old"})
	claimed := claim(t, s)
	if len(claimed) != 1 {
		t.Fatalf("claimed %d events, want 1", len(claimed))
	}

	older, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer older.Rollback(ctx)
	var acquired bool
	if err := older.QueryRow(ctx, releasedLockSQL, "evt_old").Scan(&acquired); err != nil || !acquired {
		t.Fatalf("the released lock of evt_old: %v, %v", acquired, err)
	}

	if tx, err := s.TryLockEvent(ctx, "evt_old"); !errors.Is(err, queue.ErrEventLocked) {
		t.Errorf("TryLockEvent: got %v, want ErrEventLocked", err)
		if err == nil {
			_ = tx.Rollback(ctx)
		}
	}
	if tx, _, _, err := s.BeginEvent(ctx, queue.SourceStripe, "evt_old"); !errors.Is(err, queue.ErrEventLocked) {
		t.Errorf("BeginEvent: got %v, want ErrEventLocked", err)
		if err == nil {
			_ = tx.Rollback(ctx)
		}
	}
	tx, locked, err := s.TryLockEvents(ctx, []string{"evt_old", "evt_free"})
	if err != nil {
		t.Fatal(err)
	}
	if len(locked) != 1 || locked[0] != "evt_free" {
		t.Errorf("TryLockEvents locked %v, want [evt_free]", locked)
	}
	_ = tx.Rollback(ctx)
	tx, states, err := s.LockClaims(ctx, claimed)
	if err != nil {
		t.Fatal(err)
	}
	if states[0] != queue.ClaimBusy {
		t.Errorf("LockClaims: state %d, want ClaimBusy", states[0])
	}
	_ = tx.Rollback(ctx)

	// And the other way round.
	held, err := s.TryLockEvent(ctx, "evt_new")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback(ctx)
	if err := older.QueryRow(ctx, releasedLockSQL, "evt_new").Scan(&acquired); err != nil || acquired {
		t.Errorf("the released lock of an event this release holds: acquired %v, %v; want it refused", acquired, err)
	}
}
