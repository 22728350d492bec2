package web_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

// BenchmarkReceiverHTTP posts real signed Stripe events, each new, over HTTP
// to a real server with the discard processor, from 16 concurrent clients.
// Each delivery takes the event lock, reads the dedup state, writes the
// marker and commits before its 200. make bench-load measures the built
// binary from another process instead. It reports requests/s, the 50th
// and 99th percentile latency, and the process's peak RSS.
func BenchmarkReceiverHTTP(b *testing.B) {
	store := setup(b, withoutServer()).store
	srv := newServer(b, store, worker.Discard, 1<<20)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	url := srv.URL + "/webhooks/stripe"

	const clients = 16
	var seq atomic.Int64
	var mu sync.Mutex
	var latencies []time.Duration
	prefix := fmt.Sprintf("evt_bench_%d_", time.Now().UnixNano())

	// RunParallel starts parallelism × GOMAXPROCS goroutines.
	b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			body := stripeevent.Minimal(prefix+strconv.FormatInt(seq.Add(1), 10), "invoice.paid")
			req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
			req.Header.Set("Stripe-Signature", stripeevent.Sign(body, testSecret, time.Now()))
			t0 := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mine = append(mine, time.Since(t0))
			if resp.StatusCode != http.StatusOK {
				b.Errorf("got %d, want 200", resp.StatusCode)
				return
			}
		}
		mu.Lock()
		latencies = append(latencies, mine...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	slices.Sort(latencies)
	if len(latencies) > 0 {
		b.ReportMetric(float64(len(latencies))/elapsed.Seconds(), "req/s")
		b.ReportMetric(float64(latencies[len(latencies)*50/100].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
	}
	b.ReportMetric(queuetest.PeakRSSMB(b), "peak-RSS-MB")
}
