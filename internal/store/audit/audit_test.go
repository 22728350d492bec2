package audit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// testBundle is what a test of the audit log works with: the stores whose
// transactions an entry joins, and the log, on a fresh, migrated database of
// the test's own.
type testBundle struct {
	// pool is on the test's database, for the rows a test puts in place.
	pool     *pgxpool.Pool
	queue    *queue.Store
	accounts *accounts.Store
	log      *audit.Log
}

// setup returns the bundle of a test on a fresh database. Every test of the
// package starts with it.
func setup(t *testing.T) *testBundle {
	t.Helper()
	pool := queuetest.NewPool(t)
	return &testBundle{pool: pool, queue: queue.New(pool), accounts: accounts.New(pool), log: audit.New(pool)}
}

func TestAudit_RolledBackWithItsAction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	dead := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5})
	boom := errors.New("boom")
	err := b.queue.InTx(ctx, func(tx *queue.Tx) error {
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
	page, err := b.log.Read(ctx, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if page.Total != 0 {
		t.Errorf("%d audit entries after the rollback, want 0", page.Total)
	}
	if got, _ := b.queue.Event(ctx, dead.ID); got.Status != queue.StatusDead {
		t.Errorf("event %s after the rollback, want dead", got.Status)
	}
}

// An account change and its entry commit together: rolled back after both
// were written, neither is left; committed, both are.
func TestAudit_CommitsWithTheAccountChange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	admin, err := b.accounts.CreateUser(ctx, "admin@example.com", "long enough", accounts.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	op, err := b.accounts.CreateUser(ctx, "op@example.com", "long enough", accounts.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	demote := func(then error) error {
		return b.accounts.InTx(ctx, func(tx *accounts.Tx) error {
			if _, err := tx.SetRole(ctx, admin.ID, op.ID, accounts.RoleViewer); err != nil {
				return err
			}
			if err := audit.Record(ctx, tx.PgxTx(), admin.Email, audit.AccountRole, "op@example.com from operator to viewer", 1); err != nil {
				return err
			}
			return then
		})
	}
	roleAndEntries := func() (accounts.Role, int64) {
		t.Helper()
		u, err := b.accounts.User(ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		page, err := b.log.Read(ctx, 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		return u.Role, page.Total
	}

	boom := errors.New("boom")
	if err := demote(boom); !errors.Is(err, boom) {
		t.Fatalf("InTx: %v", err)
	}
	if role, n := roleAndEntries(); role != accounts.RoleOperator || n != 0 {
		t.Errorf("after the rollback: role %s, %d entries; want operator and none", role, n)
	}
	if err := demote(nil); err != nil {
		t.Fatal(err)
	}
	if role, n := roleAndEntries(); role != accounts.RoleViewer || n != 1 {
		t.Errorf("after the commit: role %s, %d entries; want viewer and one", role, n)
	}
}

// The dashboard reads the log under its time limit, like every other page:
// a read that cannot finish (here, behind a lock on the table) is stopped.
func TestAudit_ReadUnderTheDashboardsTimeLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	const limit = 100 * time.Millisecond
	_, err = audit.New(queue.TimedReads(b.pool, limit)).Read(ctx, 50, 0)
	var timeout *queue.ReadTimeoutError
	if !errors.As(err, &timeout) || timeout.Limit != limit {
		t.Fatalf("reading a locked log: %v; want a read stopped after %s", err, limit)
	}
}
