package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

func TestActivity(t *testing.T) {
	t.Parallel()

	t.Run("TwoReplicasFlushingWhileCountingStoreExactSums", func(t *testing.T) {
		t.Parallel()
		store, pool := queuetest.NewStore(t)

		const replicas, goroutines, perGoroutine = 2, 8, 250
		var counting, flushing sync.WaitGroup
		start := make(chan struct{})
		ctx, stop := context.WithCancel(t.Context())
		for r := range replicas {
			act := worker.NewActivity(store, discardLogger, worker.ActivityConfig{
				Replica: []string{"replica-a", "replica-b"}[r], FlushInterval: time.Millisecond,
			})
			// Counted where the Prometheus metrics are, as in hookd.
			metrics := worker.NewMetrics(prometheus.NewRegistry(), act)
			flushing.Go(func() { _ = act.Run(ctx) })
			for range goroutines {
				counting.Go(func() {
					<-start
					for i := range perGoroutine {
						label := []string{"processed", "queued", "duplicate", "bad_signature", "bad_payload"}[i%5]
						metrics.Received(label)
						if label == "bad_signature" {
							metrics.Refused(worker.ErrWrongSignature)
						}
					}
				})
			}
		}
		close(start)
		counting.Wait()
		// Stopping flushes what is left.
		stop()
		flushing.Wait()

		total := int64(replicas * goroutines * perGoroutine)
		want := queue.ActivityCounts{Received: total, Processed: total / 5, Queued: total / 5,
			Rejected: 2 * total / 5, BadSignature: total / 5}
		// The per-minute and the per-hour counts alike.
		for _, table := range []string{"activity_minutes", "activity_hours"} {
			var got queue.ActivityCounts
			if err := pool.QueryRow(t.Context(), `
				SELECT sum(received), sum(processed), sum(queued), sum(retried), sum(dead), sum(rejected), sum(bad_signature)
				FROM `+table).Scan(&got.Received, &got.Processed, &got.Queued, &got.Retried, &got.Dead,
				&got.Rejected, &got.BadSignature); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%s: stored %+v, want %+v", table, got, want)
			}
		}
		// Each replica writes its own rows only: one per minute it flushed in.
		if n := queuetest.Count(t, pool, `SELECT count(DISTINCT replica) FROM activity_minutes`); n != replicas {
			t.Errorf("rows of %d replicas, want %d", n, replicas)
		}
	})

	t.Run("AFailedFlushKeepsItsCountsForTheNext", func(t *testing.T) {
		t.Parallel()
		store, pool := queuetest.NewStore(t)
		act := worker.NewActivity(store, discardLogger, worker.ActivityConfig{Replica: "r"})
		metrics := worker.NewMetrics(prometheus.NewRegistry(), act)
		for range 3 {
			metrics.Received("processed")
		}
		dead, cancel := context.WithCancel(t.Context())
		cancel()
		if err := act.Flush(dead); err == nil {
			t.Fatal("flush on a cancelled context: no error")
		}
		metrics.Received("too_large")
		if err := act.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := queuetest.Count(t, pool, `SELECT sum(received) + 10 * sum(processed) + 100 * sum(rejected) FROM activity_minutes`); got != 4+30+100 {
			t.Errorf("got %d, want 4 received, 3 processed, 1 rejected (134)", got)
		}
	})

	t.Run("RetriesAndDeathsAreCountedWhenCommitted", func(t *testing.T) {
		t.Parallel()
		store, pool := queuetest.NewStore(t)
		act := worker.NewActivity(store, discardLogger, worker.ActivityConfig{Replica: "r"})
		metrics := worker.NewMetrics(prometheus.NewRegistry(), act)
		queuetest.InsertEvent(t, pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: queue.MaxAttempts - 1})
		queuetest.InsertEvent(t, pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 1})
		p := &countingProcessor{}
		p.fail.Store(true)
		r := worker.NewRetrier(store, discardLogger, worker.RetrierConfig{Processor: p, Metrics: metrics})
		if n, err := r.RunBatch(t.Context()); err != nil || n != 2 {
			t.Fatalf("batch: %d, %v; want 2 claimed", n, err)
		}
		p.fail.Store(false)
		queuetest.InsertEvent(t, pool, queuetest.EventOpts{Status: queue.StatusFailed})
		if n, err := r.RunBatch(t.Context()); err != nil || n != 1 {
			t.Fatalf("batch: %d, %v; want 1 claimed", n, err)
		}
		if err := act.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		var retried, processed, dead int64
		if err := pool.QueryRow(t.Context(), `SELECT sum(retried), sum(processed), sum(dead) FROM activity_minutes`).
			Scan(&retried, &processed, &dead); err != nil {
			t.Fatal(err)
		}
		if retried != 3 || processed != 1 || dead != 1 {
			t.Errorf("got %d retried, %d processed, %d dead; want 3, 1, 1", retried, processed, dead)
		}
	})
}
