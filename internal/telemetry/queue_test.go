package telemetry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hookd/hookd/internal/telemetry"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// scrape serves the collector as /metrics and scrapes it n times, c at once.
func scrape(t *testing.T, qc *telemetry.QueueCollector, n, c int) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(qc)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	var (
		wg   sync.WaitGroup
		next atomic.Int64
		last atomic.Value
	)
	for range c {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				resp, err := http.Get(srv.URL + "/metrics")
				if err != nil {
					t.Error(err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("scrape: %d %s", resp.StatusCode, body)
					return
				}
				last.Store(string(body))
			}
		})
	}
	wg.Wait()
	body, _ := last.Load().(string)
	return body
}

// A flood of scrapes, many at once, reads the queue statistics once: the
// statements of one Stats call, one Replication call and one
// DestinationStats call, and no more.
func TestQueueCollector_AFloodOfScrapesReadsTheStatsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store, counter := b.queue, b.counter
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: queue.MaxAttempts})

	before := counter.n.Load()
	if _, err := store.Stats(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Replication(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := store.DestinationStats(context.Background()); err != nil {
		t.Fatal(err)
	}
	perRead := counter.n.Load() - before
	if perRead == 0 {
		t.Fatal("the tracer counted no statement of Stats")
	}

	qc := telemetry.NewQueueCollector(discardLogger, store, time.Hour)
	before = counter.n.Load()
	body := scrape(t, qc, 300, 30)
	if got := counter.n.Load() - before; got != perRead {
		t.Errorf("300 scrapes, 30 at once, ran %d statements; want %d, one read of the statistics", got, perRead)
	}
	if !strings.Contains(body, `hookd_queue_events{status="dead"} 1`) {
		t.Errorf("the scrape lacks the dead count:\n%s", body)
	}
}

// The statistics are read again once they are older than the collector's
// maxAge, so the figures follow the queue.
func TestQueueCollector_ReadsAgainWhenStale(t *testing.T) {
	t.Parallel()
	b := setup(t)
	qc := telemetry.NewQueueCollector(discardLogger, b.queue, 50*time.Millisecond)
	if body := scrape(t, qc, 1, 1); !strings.Contains(body, `hookd_queue_events{status="dead"} 0`) {
		t.Fatalf("first scrape:\n%s", body)
	}
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: queue.MaxAttempts})
	queuetest.WaitFor(t, 10*time.Second, "the new dead event in /metrics", func() bool {
		return strings.Contains(scrape(t, qc, 1, 1), `hookd_queue_events{status="dead"} 1`)
	})
}

// /metrics counts the suspects: events a crash cut short that wait to run
// alone, and only until a run alone completes.
func TestQueueCollector_CountsSuspects(t *testing.T) {
	t.Parallel()
	b := setup(t)
	qc := telemetry.NewQueueCollector(discardLogger, b.queue, time.Nanosecond)
	if body := scrape(t, qc, 1, 1); !strings.Contains(body, "hookd_queue_suspects 0") {
		t.Fatalf("first scrape:\n%s", body)
	}
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_cut"})
	if _, err := b.pool.Exec(context.Background(), `INSERT INTO webhook_suspects (event_id, path, interruptions)
		VALUES ('evt_cut', 'retry', 1), ('evt_done', 'inline', 1)`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(context.Background(), `UPDATE webhook_suspects SET cleared_at = now() WHERE event_id = 'evt_done'`); err != nil {
		t.Fatal(err)
	}
	if body := scrape(t, qc, 1, 1); !strings.Contains(body, "hookd_queue_suspects 1") {
		t.Errorf("with one suspect open and one cleared:\n%s", body)
	}
}

// Each destination has its own series of depth by status and of its
// oldest pending delivery's age: a configured one with nothing queued at
// 0; the unlabelled totals stay.
func TestQueueCollector_SeriesPerDestination(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	dest := func(name string) queue.AppliedDestination {
		return queue.AppliedDestination{Name: name, URL: "http://" + name + ".internal/stripe", Source: queue.SourceDestinationsFile}
	}
	if _, err := b.queue.ApplyDestinations(ctx, []queue.AppliedDestination{dest("billing"), dest("crm")}, "h"); err != nil {
		t.Fatal(err)
	}
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Destination: "billing", Status: queue.StatusFailed, Age: time.Hour})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Destination: "billing", Status: queue.StatusRetrying})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Destination: "billing", Status: queue.StatusDead, Attempts: queue.MaxAttempts})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: queue.MaxAttempts})

	body := scrape(t, telemetry.NewQueueCollector(discardLogger, b.queue, time.Hour), 1, 1)
	for _, want := range []string{
		`hookd_queue_events{status="dead"} 2`,
		`hookd_queue_events{status="failed"} 1`,
		`hookd_destination_queue_events{destination="billing",status="failed"} 1`,
		`hookd_destination_queue_events{destination="billing",status="retrying"} 1`,
		`hookd_destination_queue_events{destination="billing",status="dead"} 1`,
		`hookd_destination_queue_events{destination="crm",status="failed"} 0`,
		`hookd_destination_queue_events{destination="crm",status="dead"} 0`,
		`hookd_destination_queue_events{destination="default",status="dead"} 1`,
		`hookd_destination_oldest_pending_seconds{destination="crm"} 0`,
		`hookd_destination_oldest_pending_seconds{destination="default"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape lacks %s", want)
		}
	}
	var age float64
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, `hookd_destination_oldest_pending_seconds{destination="billing"} `); ok {
			if _, err := fmt.Sscan(v, &age); err != nil {
				t.Fatal(err)
			}
		}
	}
	if age < 3600 {
		t.Errorf("billing's oldest pending delivery waited %v s, want at least the hour it was received ago", age)
	}
	if t.Failed() {
		t.Log(body)
	}
}

// A call with its destination counts in the totals by path and in the
// destination's series.
func TestMetrics_ObserveDeliveryCountsTheDestination(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := telemetry.NewMetrics(reg, nil)
	m.ObserveDelivery("billing", queue.PathRetry, false, time.Millisecond)
	m.ObserveDelivery("billing", queue.PathRetry, true, time.Millisecond)
	m.ObserveDelivery("crm", queue.PathInline, true, time.Millisecond)
	m.ObserveProcess(queue.PathInline, true, time.Millisecond)
	body := exposition(t, reg)
	for _, want := range []string{
		`hookd_processing_duration_seconds_count{path="retry",result="failed"} 1`,
		`hookd_processing_duration_seconds_count{path="inline",result="succeeded"} 2`,
		`hookd_destination_processing_duration_seconds_count{destination="billing",path="retry",result="failed"} 1`,
		`hookd_destination_processing_duration_seconds_count{destination="billing",path="retry",result="succeeded"} 1`,
		`hookd_destination_processing_duration_seconds_count{destination="crm",path="inline",result="succeeded"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}
}

// Each destination's keys held by a dead event are a series of their own,
// read with the queue depth: a key counts once however many dead events
// it has, and a destination without held keys is at 0.
func TestQueueCollector_HeldKeysPerDestination(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, name := range []string{"billing", "crm"} {
		queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: name})
	}
	dead := queuetest.EventOpts{Destination: "billing", Status: queue.StatusDead, Attempts: queue.MaxAttempts}
	for _, key := range []string{"cus_a", "cus_a", "cus_b"} {
		dead.OrderKey = key
		queuetest.InsertEvent(t, b.pool, dead)
	}
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Destination: "billing", OrderKey: "cus_a"})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Destination: "billing", OrderKey: "cus_c"})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Destination: "crm", Status: queue.StatusDead, Attempts: queue.MaxAttempts})

	body := scrape(t, telemetry.NewQueueCollector(discardLogger, b.queue, time.Hour), 1, 1)
	for _, want := range []string{`hookd_order_held_keys{destination="billing"} 2`, `hookd_order_held_keys{destination="crm"} 0`} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape lacks %s:\n%s", want, body)
		}
	}
}

// Each call that waited under a destination's rate counts in that
// destination's series; the one app's is default.
func TestMetrics_CountRateWaitByDestination(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := telemetry.NewMetrics(reg, nil)
	for range 3 {
		m.CountRateWait("billing")
	}
	m.CountRateWait("")
	var nilMetrics *telemetry.Metrics
	nilMetrics.CountRateWait("billing")
	body := exposition(t, reg)
	for _, want := range []string{`hookd_rate_waits_total{destination="billing"} 3`, `hookd_rate_waits_total{destination="default"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}
}

// exposition is reg's metrics as /metrics serves them.
func exposition(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}
