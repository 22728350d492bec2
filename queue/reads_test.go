package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// lockQueue holds an exclusive lock on the queue table until the returned
// function is called: every read of it waits, as it would behind a scan
// that takes too long.
func lockQueue(t *testing.T, pool *pgxpool.Pool) (release func()) {
	t.Helper()
	tx, err := pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), `LOCK TABLE webhook_events IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	return func() { _ = tx.Rollback(context.Background()) }
}

// readerChecks runs a reader of limit 300ms over pool through its three
// ways of asking (Query, QueryRow, and a Query whose error comes with its
// rows) while the queue is locked, and again once it is not.
func readerChecks(t *testing.T, direct, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	queuetest.InsertEvent(t, direct, queuetest.EventOpts{Status: queue.StatusDead, Attempts: queue.MaxAttempts})
	r := queue.NewReader(pool, 300*time.Millisecond)

	release := lockQueue(t, direct)
	reads := map[string]func() error{
		"FailureGroups": func() error { _, _, err := r.FailureGroups(ctx, 10, "", ""); return err },
		"CountEvents":   func() error { _, err := r.CountEvents(ctx, queue.EventFilter{Status: queue.StatusDead}); return err },
		"Events": func() error {
			_, err := r.Events(ctx, queue.EventFilter{Status: queue.StatusDead, ErrorContains: "x"})
			return err
		},
		"FindEvent": func() error { _, err := r.FindEvent(ctx, "evt_nowhere"); return err },
	}
	for name, read := range reads {
		err := read()
		var slow *queue.ReadTimeoutError
		if !errors.As(err, &slow) {
			t.Fatalf("%s behind a lock: got %v, want a *queue.ReadTimeoutError", name, err)
		}
		if slow.Limit != 300*time.Millisecond {
			t.Errorf("%s: limit %s, want 300ms", name, slow.Limit)
		}
	}
	release()

	for name, read := range reads {
		if err := read(); err != nil {
			t.Errorf("%s once the lock is gone: %v", name, err)
		}
	}
	groups, total, err := r.FailureGroups(ctx, 10, "", "")
	if err != nil || total != 1 || len(groups) != 1 || groups[0].Dead != 1 {
		t.Errorf("FailureGroups: got %+v, %d, %v; want the one dead event's group", groups, total, err)
	}
}

func TestReader_StopsAReadAtItsLimit(t *testing.T) {
	t.Parallel()
	pool := queuetest.NewPool(t)
	readerChecks(t, pool, pool)
}

// Through PgBouncer in transaction pooling mode the limit holds too, and is
// gone with its transaction: the server connection the next client gets
// has none.
func TestReader_StopsAReadAtItsLimitThroughPgBouncer(t *testing.T) {
	t.Parallel()
	direct := queuetest.NewDatabaseURL(t)
	cfg, err := pgxpool.ParseConfig(queuetest.PgBouncerURL(t, direct))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	directPool, err := pgxpool.New(context.Background(), direct)
	if err != nil {
		t.Fatal(err)
	}
	defer directPool.Close()
	readerChecks(t, directPool, pool)

	var left string
	if err := pool.QueryRow(context.Background(), `SHOW statement_timeout`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != "0" {
		t.Errorf("statement_timeout after the reader's reads: %q, want the server's 0", left)
	}
}

func TestReader_LeavesNoLimitOnTheConnection(t *testing.T) {
	t.Parallel()
	pool := queuetest.NewPool(t)
	cfg := pool.Config()
	cfg.MaxConns = 1
	one, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	if _, err := queue.NewReader(one, time.Second).Stats(context.Background()); err != nil {
		t.Fatal(err)
	}
	var left string
	if err := one.QueryRow(context.Background(), `SHOW statement_timeout`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != "0" {
		t.Errorf("statement_timeout after a read: %q, want the server's 0", left)
	}
}

func TestReader_RefusesWrites(t *testing.T) {
	t.Parallel()
	pool := queuetest.NewPool(t)
	e := queuetest.InsertEvent(t, pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: queue.MaxAttempts})
	_, err := queue.NewReader(pool, 0).RetryDead(context.Background(), e.ID)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25006" {
		t.Fatalf("RetryDead on the reader: got %v, want read_only_sql_transaction (25006)", err)
	}
	if n := queuetest.Count(t, pool, `SELECT count(*) FROM webhook_events WHERE status = 'dead'`); n != 1 {
		t.Errorf("%d dead events after the refused write, want 1", n)
	}
}
