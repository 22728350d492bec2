package queue_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// A short transaction is one implicit transaction, though its pipeline
// holds no BEGIN and no COMMIT: a failing statement rolls back the ones
// before it, and its plan settings end with it.
func TestShortTx_IsOneTransaction(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	err := queue.ShortTx(s, t.Context(), func(b *pgx.Batch) {
		b.Queue(queue.TakeLeasesSQL, []string{"evt_tx"}, []queue.AttemptPath{queue.PathInline}, [16]byte(uuid.New()), 60.0)
		b.Queue(`SELECT 1 / 0`)
	}, func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return err
		}
		_, err := br.Exec()
		return err
	})
	if err == nil {
		t.Fatal("a failing statement: no error")
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_leases`); n != 0 {
		t.Fatalf("leases after the failed transaction: %d; want 0: the statement before the error must roll back", n)
	}

	var mode string
	err = queue.ShortTx(s, t.Context(), func(b *pgx.Batch) {
		b.Queue(`SELECT current_setting('plan_cache_mode')`)
	}, func(br pgx.BatchResults) error { return br.QueryRow().Scan(&mode) })
	if err != nil || mode != "force_generic_plan" {
		t.Fatalf("plan_cache_mode inside: %q, %v", mode, err)
	}
	// Every connection of the bundle.pool is back to its own setting.
	for range 4 {
		if err := bundle.pool.QueryRow(t.Context(), `SELECT current_setting('plan_cache_mode')`).Scan(&mode); err != nil || mode != "auto" {
			t.Fatalf("plan_cache_mode after: %q, %v; want auto", mode, err)
		}
	}
}

// Leases outlive a crash of the database and a failover: the table is
// logged. Only a transaction that takes leases and writes nothing else
// commits without waiting for its flush; one that writes outcomes waits.
func TestLeaseTx_OnlyLeasesCommitWithoutWaitingForTheFlush(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	if p := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM pg_class
		WHERE relname = 'webhook_leases' AND relpersistence = 'p'`); p != 1 {
		t.Fatal("webhook_leases is not a logged table: a crash or a failover would empty it")
	}
	commitMode := func(tx func(*queue.Store, context.Context, func(*pgx.Batch), func(pgx.BatchResults) error) error) string {
		var mode string
		err := tx(s, t.Context(), func(b *pgx.Batch) {
			b.Queue(`SELECT current_setting('synchronous_commit')`)
		}, func(br pgx.BatchResults) error { return br.QueryRow().Scan(&mode) })
		if err != nil {
			t.Fatal(err)
		}
		return mode
	}
	if mode := commitMode(queue.LeaseTx); mode != "off" {
		t.Errorf("synchronous_commit in a lease transaction: %q, want off", mode)
	}
	if mode := commitMode(queue.ShortTx); mode != "on" {
		t.Errorf("synchronous_commit in a short transaction that writes outcomes: %q, want on", mode)
	}
	for range 4 {
		var mode string
		if err := bundle.pool.QueryRow(t.Context(), `SELECT current_setting('synchronous_commit')`).Scan(&mode); err != nil || mode != "on" {
			t.Fatalf("synchronous_commit after: %q, %v; want on", mode, err)
		}
	}
}
