package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

// BenchmarkRetrierDrain measures how fast one retry loop drains a backlog
// of 10,000 due events with an instant processor, per batch size. Each
// iteration drains a freshly inserted backlog; only the draining is timed.
// It reports events/s and the process's peak RSS.
func BenchmarkRetrierDrain(b *testing.B) {
	const backlog = 10_000
	for _, batch := range []int{100, 250, 500, 1000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			bundle := setup(b)
			r := worker.NewRetrier(bundle.store, discardLogger, worker.ProducerConfig{BatchSize: batch})
			ctx := context.Background()
			var drained time.Duration
			for b.Loop() {
				b.StopTimer()
				if _, err := bundle.pool.Exec(ctx, `
					INSERT INTO webhook_events (source, event_id, event_type, payload, last_error, next_retry_at)
					SELECT 'stripe', 'evt_bench_' || md5(random()::text), 'invoice.paid',
					       '{"id":"evt_bench","object":"event","type":"invoice.paid","data":{"object":{"id":"in_1","object":"invoice","amount_paid":2000,"currency":"usd","customer":"cus_123","lines":[]}}}',
					       'downstream answered 500', now() - interval '1 minute'
					FROM generate_series(1, $1)`, backlog); err != nil {
					b.Fatal(err)
				}
				if _, err := bundle.pool.Exec(ctx, `ANALYZE webhook_events`); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				total := 0
				for {
					n, err := r.RunBatch(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if n == 0 {
						break
					}
					total += n
				}
				drained += time.Since(start)
				if total != backlog {
					b.Fatalf("drained %d events, want %d", total, backlog)
				}
			}
			b.ReportMetric(float64(backlog*b.N)/drained.Seconds(), "events/s")
			b.ReportMetric(queuetest.PeakRSSMB(b), "peak-RSS-MB")
		})
	}
}
