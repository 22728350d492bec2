package web_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web"
	"github.com/hookd/hookd/worker"
)

// flakyDownstream fails each event's first run and accepts the later ones,
// and records any two runs of one event that overlap.
type flakyDownstream struct {
	mu        sync.Mutex
	runs      map[string]int
	succeeded map[string]int
	inFlight  map[string]bool
	overlaps  int
}

func (d *flakyDownstream) Process(_ context.Context, dl worker.Delivery) worker.Result {
	d.mu.Lock()
	if d.inFlight[dl.EventID] {
		d.overlaps++
	}
	d.inFlight[dl.EventID] = true
	d.runs[dl.EventID]++
	first := d.runs[dl.EventID] == 1
	d.mu.Unlock()

	defer func() {
		d.mu.Lock()
		delete(d.inFlight, dl.EventID)
		if !first {
			d.succeeded[dl.EventID]++
		}
		d.mu.Unlock()
	}()
	if first {
		return worker.Result{Err: fmt.Errorf("downstream answered 503: starting up"), HTTPStatus: 503}
	}
	return worker.Result{HTTPStatus: 200}
}

func TestTwoReplicasShareOneDatabase(t *testing.T) {
	t.Parallel()
	dbURL := setup(t, withoutServer()).dbURL
	down := &flakyDownstream{runs: map[string]int{}, succeeded: map[string]int{}, inFlight: map[string]bool{}}

	type replica struct {
		srv     *httptest.Server
		retrier *worker.Retrier
	}
	var replicas []replica
	var pools []*pgxpool.Pool
	for range 2 {
		pool, err := pgxpool.New(t.Context(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		pools = append(pools, pool)
		store := queue.New(pool)
		receiver := receiver.New(store, discardLogger, receiver.Config{
			Secrets: []string{testSecret}, Processor: down,
		})
		srv := httptest.NewServer(web.NewServer(web.Options{Logger: discardLogger, Stores: storesOn(store, pool),
			Receiver: receiver, Gatherer: prometheus.NewRegistry()}))
		t.Cleanup(srv.Close)
		replicas = append(replicas, replica{srv, worker.NewRetrier(store, discardLogger, worker.ProducerConfig{
			Processor: down, BatchSize: 7, Interval: 5 * time.Millisecond,
		})})
	}

	ctx, cancel := context.WithCancel(t.Context())
	var loops sync.WaitGroup
	for _, r := range replicas {
		loops.Go(func() { _ = r.retrier.Run(ctx) })
	}

	// Stripe delivers every event to both replicas at once, twice.
	const events = 40
	bodies := make([][]byte, events)
	for i := range bodies {
		bodies[i] = stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
	}
	var wg sync.WaitGroup
	for round := range 2 {
		for _, body := range bodies {
			for _, r := range replicas {
				wg.Go(func() {
					got := post(t, r.srv, body, stripeevent.Sign(body, testSecret, time.Now()))
					if got.status != 200 && got.status != 503 {
						t.Errorf("round %d: got %d %q, want 200 or 503", round, got.status, got.body)
					}
				})
			}
		}
		wg.Wait()
	}

	// Time passes for the queue until both retry loops have drained it.
	queuetest.WaitFor(t, 20*time.Second, "the retry loops to drain the queue", func() bool {
		if _, err := pools[0].Exec(t.Context(),
			// Rows a retry loop is writing at this moment are skipped, not
			// waited for, so this never deadlocks with an outcome; the
			// next turn gets them.
			`UPDATE webhook_events SET next_retry_at = now() - interval '1 second'
			 WHERE id IN (SELECT id FROM webhook_events WHERE next_retry_at > now() FOR UPDATE SKIP LOCKED)`); err != nil {
			t.Fatal(err)
		}
		return queuetest.Count(t, pools[0], `SELECT count(*) FROM webhook_events`) == 0
	})
	cancel()
	loops.Wait()

	down.mu.Lock()
	defer down.mu.Unlock()
	if down.overlaps != 0 {
		t.Errorf("overlapping runs of one event: got %d, want 0", down.overlaps)
	}
	if len(down.succeeded) != events {
		t.Errorf("events processed: got %d, want %d", len(down.succeeded), events)
	}
	for id, n := range down.succeeded {
		if n != 1 {
			t.Errorf("%s processed successfully %d times, want 1", id, n)
		}
	}
	if got := queuetest.Markers(t, pools[1]); got != events {
		t.Errorf("markers: got %d, want %d", got, events)
	}
}
