package actions_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// A release of a held key takes its dead event out of the key's order,
// leaves it dead, and writes one audit entry naming the destination, the
// key, the event and the reason; a dry run, a key that holds nothing, or a
// missing destination writes none, the last two refused.
func TestReleaseHeldKey_AuditedWithTheEventsReleased(t *testing.T) {
	t.Parallel()
	pool := queuetest.NewPool(t)
	ctx := t.Context()
	s := queue.New(pool)
	a := actions.New(actions.Stores{Queue: s})
	who := actions.Actor{Account: audit.Account{Email: "ops@example.com"}}
	queuetest.InsertDestination(t, pool, queuetest.DestinationOpts{Name: "billing"})
	dead := queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_a1", Destination: "billing", OrderKey: "cus_a",
		Status: queue.StatusDead, Attempts: queue.MaxAttempts})
	queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_a2", Destination: "billing", OrderKey: "cus_a"})
	queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_a3", Destination: "billing", OrderKey: "cus_a"})
	queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_b1", Destination: "billing", OrderKey: "cus_b"})

	held, err := a.HeldKeys(ctx, "billing")
	if err != nil || len(held) != 1 || held[0].Key != "cus_a" || held[0].EventID != "evt_a1" || held[0].Waiting != 2 {
		t.Fatalf("held keys %+v, %v; want cus_a held by evt_a1 with 2 waiting", held, err)
	}

	if _, err := a.ReleaseHeldKey(ctx, who, "billing", "cus_b", "", false); !errors.As(err, new(*actions.ConflictError)) {
		t.Errorf("release of a key nothing holds: %v, want a ConflictError", err)
	}
	if _, err := a.ReleaseHeldKey(ctx, who, "nope", "cus_a", "", false); !errors.As(err, new(*actions.NotFoundError)) {
		t.Errorf("release at a missing destination: %v, want a NotFoundError", err)
	}
	if _, err := a.ReleaseHeldKey(ctx, who, "billing", "", "", false); !errors.As(err, new(*actions.InvalidError)) {
		t.Errorf("release of no key: %v, want an InvalidError", err)
	}

	if r, err := a.ReleaseHeldKey(ctx, who, "billing", "cus_a", "", true); err != nil ||
		!slices.Equal(r.EventIDs, []string{"evt_a1"}) || r.Waiting != 2 {
		t.Fatalf("dry run: %+v, %v; want evt_a1 with 2 waiting", r, err)
	}
	if held, err := a.HeldKeys(ctx, "billing"); err != nil || len(held) != 1 {
		t.Fatalf("held keys after a dry run: %+v, %v; want cus_a still held", held, err)
	}
	r, err := a.ReleaseHeldKey(ctx, who, "billing", "cus_a", "  the  app  skips it ", false)
	if err != nil || !slices.Equal(r.EventIDs, []string{"evt_a1"}) || r.Waiting != 2 {
		t.Fatalf("release: %+v, %v; want evt_a1 released with 2 waiting", r, err)
	}
	if held, err := a.HeldKeys(ctx, ""); err != nil || len(held) != 0 {
		t.Errorf("held keys after the release: %+v, %v; want none", held, err)
	}
	if e, err := s.Event(ctx, dead.ID); err != nil || e.Status != queue.StatusDead {
		t.Errorf("the released event is %s (%v), want still dead", e.Status, err)
	}
	if _, err := a.ReleaseHeldKey(ctx, who, "billing", "cus_a", "", false); !errors.As(err, new(*actions.ConflictError)) {
		t.Errorf("a second release: %v, want a ConflictError", err)
	}

	if n := queuetest.Count(t, pool, `SELECT count(*) FROM audit_log`); n != 1 {
		t.Fatalf("%d audit entries, want the one release's", n)
	}
	if n := queuetest.Count(t, pool, `SELECT count(*) FROM audit_log WHERE action = 'order_release' AND user_email = 'ops@example.com'
		AND target = 'billing key cus_a: evt_a1: the app skips it' AND count = 1`); n != 1 {
		t.Errorf("no audit entry names the release of cus_a with evt_a1 and its reason")
	}
}
