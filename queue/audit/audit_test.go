package audit_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/audit"
	"github.com/hookd/hookd/queue/queuetest"
)

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
		if err := audit.Record(ctx, tx.PgxTx(), "op@example.com", audit.Retry, dead.EventID, 1); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx: %v", err)
	}
	page, err := audit.New(pool).Read(ctx, 10, 0)
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
