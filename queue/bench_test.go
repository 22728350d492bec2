package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookd/hookd/queue/queuetest"
)

// BenchmarkMarkProcessed writes one new dedup marker per operation, the
// receiver's write for every event it processes.
func BenchmarkMarkProcessed(b *testing.B) {
	s, _ := setup(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		if err := queuetest.NewSeed(s).MarkProcessed(ctx, fmt.Sprintf("evt_bench_%d", i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDrain empties a queue of 10,000 due events with ClaimDue and one
// Resolve per event, as a single worker with an instant processor would.
func BenchmarkDrain(b *testing.B) {
	const events = 10_000
	for _, batch := range []int{10, 100} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s, bundle := setup(b)
			ctx := context.Background()
			var drained time.Duration
			round := 0
			for b.Loop() {
				b.StopTimer()
				round++
				if _, err := bundle.pool.Exec(ctx, `
					INSERT INTO webhook_events (source, event_id, event_type, payload, next_retry_at)
					SELECT 'stripe', 'evt_' || $1::int || '_' || g, 'invoice.paid', '{}', now() - interval '1 minute'
					FROM generate_series(1, $2::int) g`, round, events); err != nil {
					b.Fatal(err)
				}
				if _, err := bundle.pool.Exec(ctx, `VACUUM ANALYZE webhook_events`); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				n := 0
				for {
					claimed, err := queuetest.NewSeed(s).ClaimDue(ctx, batch, queuetest.DefaultClaimWindow)
					if err != nil {
						b.Fatal(err)
					}
					if len(claimed) == 0 {
						break
					}
					for _, e := range claimed {
						if err := queuetest.NewSeed(s).Resolve(ctx, e.ID); err != nil {
							b.Fatal(err)
						}
					}
					n += len(claimed)
				}
				drained += time.Since(start)
				if n != events {
					b.Fatalf("drained %d events, want %d", n, events)
				}
			}
			b.ReportMetric(float64(events*round)/drained.Seconds(), "events/s")
		})
	}
}
