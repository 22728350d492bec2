package telemetry_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/internal/store/activity"
	"github.com/hookd/hookd/internal/store/rejections"
	"github.com/hookd/hookd/internal/telemetry"
	"github.com/hookd/hookd/queue/queuetest"
)

func TestActivity(t *testing.T) {
	t.Parallel()

	t.Run("TwoReplicasFlushingWhileCountingStoreExactSums", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		const replicas, goroutines, perGoroutine = 2, 8, 250
		var counting, flushing sync.WaitGroup
		start := make(chan struct{})
		ctx, stop := context.WithCancel(t.Context())
		for r := range replicas {
			act := telemetry.NewActivity(b.activity, discardLogger, telemetry.ActivityConfig{
				Replica: []string{"replica-a", "replica-b"}[r], FlushInterval: time.Millisecond,
			})
			// Counted where the Prometheus metrics are, as in hookd.
			metrics := telemetry.NewMetrics(prometheus.NewRegistry(), act)
			flushing.Go(func() { _ = act.Run(ctx) })
			for range goroutines {
				counting.Go(func() {
					<-start
					for i := range perGoroutine {
						outcome := []telemetry.Outcome{telemetry.OutcomeProcessed, telemetry.OutcomeQueued, telemetry.OutcomeDuplicate,
							telemetry.OutcomeBadSignature, telemetry.OutcomeBadPayload}[i%5]
						metrics.Received(outcome)
						if outcome == telemetry.OutcomeBadSignature {
							metrics.Refused(rejections.WrongSignature)
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
		want := activity.Counts{Received: total, Processed: total / 5, Queued: total / 5,
			Rejected: 2 * total / 5, BadSignature: total / 5}
		// The per-minute and the per-hour counts alike.
		for _, table := range []string{"activity_minutes", "activity_hours"} {
			var got activity.Counts
			if err := b.pool.QueryRow(t.Context(), `
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
		if n := queuetest.Count(t, b.pool, `SELECT count(DISTINCT replica) FROM activity_minutes`); n != replicas {
			t.Errorf("rows of %d replicas, want %d", n, replicas)
		}
	})

	t.Run("AFailedFlushKeepsItsCountsForTheNext", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		act := telemetry.NewActivity(b.activity, discardLogger, telemetry.ActivityConfig{Replica: "r"})
		metrics := telemetry.NewMetrics(prometheus.NewRegistry(), act)
		for range 3 {
			metrics.Received(telemetry.OutcomeProcessed)
		}
		dead, cancel := context.WithCancel(t.Context())
		cancel()
		if err := act.Flush(dead); err == nil {
			t.Fatal("flush on a cancelled context: no error")
		}
		metrics.Received(telemetry.OutcomeTooLarge)
		if err := act.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := queuetest.Count(t, b.pool, `SELECT sum(received) + 10 * sum(processed) + 100 * sum(rejected) FROM activity_minutes`); got != 4+30+100 {
			t.Errorf("got %d, want 4 received, 3 processed, 1 rejected (134)", got)
		}
	})
}

func TestActivity_DeferredCountsAsQueued(t *testing.T) {
	t.Parallel()
	b := setup(t)
	act := telemetry.NewActivity(b.activity, discardLogger, telemetry.ActivityConfig{FlushInterval: time.Millisecond})
	metrics := telemetry.NewMetrics(prometheus.NewRegistry(), act)
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		_ = act.Run(ctx)
		close(done)
	}()
	for range 3 {
		metrics.Received(telemetry.OutcomeDeferred)
	}
	// Stopping flushes what is left.
	stop()
	<-done
	if n := queuetest.Count(t, b.pool, `SELECT coalesce(sum(queued), 0) FROM activity_minutes`); n != 3 {
		t.Errorf("queued in the chart counts: got %d, want the 3 deferred events", n)
	}
}
