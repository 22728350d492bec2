package reconcileruns_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/store/reconcileruns"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// testBundle is the run records of a fresh, migrated database of the
// test's own, and a pool on it.
type testBundle struct {
	pool *pgxpool.Pool
	runs *reconcileruns.Store
	// leases takes the run's lease, with no replica: by expiry alone.
	leases *queue.Store
}

// setup returns the bundle of a test on a fresh database. Every test of the
// package starts with it.
func setup(t *testing.T) *testBundle {
	t.Helper()
	pool := queuetest.NewPool(t)
	return &testBundle{pool: pool, runs: reconcileruns.New(pool), leases: queue.New(pool)}
}

// TestLease_OneRunAtATimeAndTheRecordGivesItBack holds the lease to its
// promise: a second run is refused while the first holds it, and the
// record of the first, in the transaction that gives it back, is what the
// next run reads.
func TestLease_OneRunAtATimeAndTheRecordGivesItBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runs := b.runs
	ctx := t.Context()
	if _, err := runs.Last(ctx); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("last run of none: %v, want queue.ErrNotFound", err)
	}
	lease, err := reconcileruns.TryLock(ctx, b.leases)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reconcileruns.TryLock(ctx, b.leases); !errors.Is(err, reconcileruns.ErrRunning) {
		t.Fatalf("second lock: %v, want ErrRunning", err)
	}
	if err := lease.Renew(ctx); err != nil {
		t.Fatalf("renew: %v", err)
	}
	started := time.Now().Add(-time.Minute)
	want := reconcileruns.Counts{Examined: 3, Recovered: 1, AlreadyProcessed: 2}
	if err := lease.Record(ctx, reconcileruns.TriggerCommand, started, started.Add(-72*time.Hour), want, ""); err != nil {
		t.Fatal(err)
	}
	if err := lease.Renew(ctx); !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("renew after the record: %v, want queue.ErrLeaseLost", err)
	}
	last, err := runs.Last(ctx)
	if err != nil || last.Counts != want || last.Trigger != reconcileruns.TriggerCommand || last.Error != nil {
		t.Errorf("last run: %+v, %v; want %+v by command, no error", last, err, want)
	}
	next, err := reconcileruns.TryLock(ctx, b.leases)
	if err != nil {
		t.Fatalf("lock after the record: %v", err)
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := reconcileruns.TryLock(ctx, b.leases); err != nil {
		t.Errorf("lock after a release: %v", err)
	}
}

// A run's lease is kept live by its replica's beats: another replica's run
// is refused while the holder beats, and goes ahead once it has been
// silent for queue.ReplicaSilence, long before the lease would expire.
func TestLease_ASilentReplicasRunLetsGoWithinSeconds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	holder, other := beating(t, b.pool), beating(t, b.pool)
	if _, err := reconcileruns.TryLock(ctx, holder); err != nil {
		t.Fatal(err)
	}
	if _, err := reconcileruns.TryLock(ctx, other); !errors.Is(err, reconcileruns.ErrRunning) {
		t.Fatalf("while the holder beats: %v, want ErrRunning", err)
	}
	if _, err := b.pool.Exec(ctx, `UPDATE hookd_replicas SET beat_at = now() - $2::interval WHERE id = $1`,
		holder.Replica(), fmt.Sprintf("%d milliseconds", (queue.ReplicaSilence+time.Second).Milliseconds())); err != nil {
		t.Fatal(err)
	}
	if _, err := reconcileruns.TryLock(ctx, other); err != nil {
		t.Errorf("once the holder is silent: %v, want the lease", err)
	}
}

// beating returns a Store of a replica that has registered and beaten.
func beating(t *testing.T, pool *pgxpool.Pool) *queue.Store {
	t.Helper()
	s := queue.New(pool, queue.WithReplica(uuid.New()))
	if err := s.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}
