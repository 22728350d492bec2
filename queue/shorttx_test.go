package queue_test

import (
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
		b.Queue(queue.TakeLeasesSQL, []string{"evt_tx"}, []queue.AttemptPath{queue.PathInline}, [16]byte(uuid.New()), 60.0, nil)
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

// Leases cost no WAL: webhook_leases, the replicas' beats and the lease
// epoch are unlogged, so a transaction that writes only leases commits
// without a flush on its own account, and no transaction turns
// synchronous_commit off: every commit that writes an outcome is durable
// before hookd answers. What a crash loses of the unlogged tables is covered
// by the grace after it (TestLeases_NoneGrantedForTheGraceAfterTheDatabaseLostThem).
func TestLeases_UnloggedAndNoCommitUnflushed(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM pg_class
		WHERE relname IN ('webhook_leases', 'hookd_replicas', 'lease_epoch') AND relpersistence = 'u'`); n != 3 {
		t.Fatalf("%d of webhook_leases, hookd_replicas and lease_epoch unlogged, want 3", n)
	}
	var mode string
	err := queue.ShortTx(s, t.Context(), func(b *pgx.Batch) {
		b.Queue(`SELECT current_setting('synchronous_commit')`)
	}, func(br pgx.BatchResults) error { return br.QueryRow().Scan(&mode) })
	if err != nil || mode != "on" {
		t.Errorf("synchronous_commit in a short transaction: %q, %v; want on", mode, err)
	}
}
