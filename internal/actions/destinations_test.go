package actions_test

import (
	"errors"
	"testing"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// A destination's pause, resume, move and drop each write one audit entry
// in the transaction that makes them, naming who; a refused one writes
// none.
func TestDestinationActions_AuditedOnceEach(t *testing.T) {
	t.Parallel()
	pool := queuetest.NewPool(t)
	ctx := t.Context()
	a := actions.New(actions.Stores{Queue: queue.New(pool)})
	who := actions.Actor{Account: audit.Account{Email: "ops@example.com"}}
	queuetest.InsertDestination(t, pool, queuetest.DestinationOpts{Name: "billing"})
	queuetest.InsertDestination(t, pool, queuetest.DestinationOpts{Name: "old", Retired: true})
	queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_1", Destination: "old", Status: queue.StatusDead})
	queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_1", Destination: "billing", Status: queue.StatusDead})
	queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_2", Destination: "old"})

	if _, err := a.PauseDestination(ctx, who, "billing", "  "); !errors.As(err, new(*actions.InvalidError)) {
		t.Errorf("pause without a reason: %v, want an InvalidError", err)
	}
	if _, err := a.PauseDestination(ctx, who, "nope", "x"); !errors.As(err, new(*actions.NotFoundError)) {
		t.Errorf("pause of a missing destination: %v, want a NotFoundError", err)
	}
	r, err := a.PauseDestination(ctx, who, "billing", "app  upgrade")
	if err != nil || !r.Changed || !r.State.Paused() || *r.State.PausedBy != "ops@example.com" || *r.State.PausedReason != "app upgrade" {
		t.Fatalf("pause: %+v, %v", r, err)
	}
	if r, err := a.PauseDestination(ctx, who, "billing", "again"); err != nil || r.Changed {
		t.Errorf("second pause: %+v, %v; want no change", r, err)
	}
	if r, err := a.ResumeDestination(ctx, who, "billing"); err != nil || !r.Changed || r.State.Paused() {
		t.Errorf("resume: %+v, %v", r, err)
	}
	if _, err := a.MoveDeliveries(ctx, who, "billing", "old"); !errors.As(err, new(*actions.ConflictError)) {
		t.Errorf("move from a configured destination: %v, want a ConflictError", err)
	}
	m, err := a.MoveDeliveries(ctx, who, "old", "billing")
	if err != nil || m != (queue.Moved{Moved: 1, Merged: 1}) {
		t.Fatalf("move: %+v, %v", m, err)
	}
	if n, err := a.DropDeliveries(ctx, who, "old"); err != nil || n != 0 {
		t.Errorf("drop after the move: %d, %v; want 0", n, err)
	}
	for action, want := range map[string]int64{"destination_pause": 1, "destination_resume": 1, "destination_move": 1, "destination_drop": 1} {
		if n := queuetest.Count(t, pool, `SELECT count(*) FROM audit_log WHERE action = $1 AND user_email = 'ops@example.com'`, action); n != want {
			t.Errorf("%d %s entries, want %d", n, action, want)
		}
	}
	if n := queuetest.Count(t, pool, `SELECT count FROM audit_log WHERE action = 'destination_move'`); n != 2 {
		t.Errorf("the move's entry counts %d deliveries, want 2", n)
	}
}

// A retry of one destination's delivery sends that delivery back to the
// queue; the other destination's delivery of the event stays dead.
func TestRetryDelivery_OneDestinationOnly(t *testing.T) {
	t.Parallel()
	pool := queuetest.NewPool(t)
	ctx := t.Context()
	a := actions.New(actions.Stores{Queue: queue.New(pool)})
	who := actions.Actor{Account: audit.Account{Email: "ops@example.com"}}
	billing := queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_1", Destination: "billing", Status: queue.StatusDead})
	crm := queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_1", Destination: "crm", Status: queue.StatusDead})
	r, err := a.RetryDelivery(ctx, who, crm.ID.String())
	if err != nil || r.Done == "" {
		t.Fatalf("retry: %+v, %v", r, err)
	}
	s := queue.New(pool)
	if e, _ := s.Event(ctx, crm.ID); e.Status != queue.StatusFailed {
		t.Errorf("crm's delivery is %s, want failed (waiting to retry)", e.Status)
	}
	if e, _ := s.Event(ctx, billing.ID); e.Status != queue.StatusDead {
		t.Errorf("billing's delivery is %s, want still dead", e.Status)
	}
}
