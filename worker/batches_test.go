package worker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
	"github.com/hookd/hookd/worker/stripeevent"
)

// holdMarkers takes a lock on the dedup-marker table that every batch's
// state read waits for, and returns the func that lets them go: the batch at
// the database then stays there, with its place, while the deliveries that
// arrive meanwhile wait for the next one.
func holdMarkers(t *testing.T, pool *pgxpool.Pool) (release func()) {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `LOCK TABLE processed_webhook_events IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = tx.Rollback(context.Background()) }) }
	t.Cleanup(release)
	return release
}

// newMeteredReceiver returns a receiver over store with processor p and
// the registry of its metrics.
func newMeteredReceiver(store *queue.Store, p worker.Processor) (*worker.Receiver, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	return worker.NewReceiver(store, discardLogger, worker.ReceiverConfig{
		Secrets: []string{testSecret}, Processor: p, Metrics: worker.NewMetrics(reg, nil),
	}), reg
}

// holdABatch delivers one new event to r and holds its batch at the
// database (holdMarkers): the deliveries that come next wait for the next
// batch until release is called. The held delivery's answer arrives on
// first.
func holdABatch(t *testing.T, r *worker.Receiver, reg *prometheus.Registry, pool *pgxpool.Pool) (
	first <-chan answer, release func()) {
	t.Helper()
	release = holdMarkers(t, pool)
	first = deliverAll(t, r, newEvents(1))
	queuetest.WaitFor(t, 10*time.Second, "the first batch to start", func() bool {
		return gauge(t, reg, "hookd_receiver_batch_deliveries") == 1
	})
	return first, release
}

// gauge reads a metric without labels from reg; histograms give their count.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name || len(f.GetMetric()) == 0 {
			continue
		}
		m := f.GetMetric()[0]
		if h := m.GetHistogram(); h != nil {
			return float64(h.GetSampleCount())
		}
		return m.GetGauge().GetValue()
	}
	return 0
}

type answer struct {
	id      string
	outcome worker.Outcome
	err     error
}

// deliverAll delivers each body from a goroutine of its own and returns
// where the answers arrive.
func deliverAll(t *testing.T, r *worker.Receiver, bodies map[string][]byte) <-chan answer {
	answers := make(chan answer, len(bodies))
	for id, body := range bodies {
		go func() {
			o, err := r.Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now()))
			answers <- answer{id, o, err}
		}()
	}
	return answers
}

func newEvents(n int) map[string][]byte {
	bodies := make(map[string][]byte, n)
	for range n {
		id := stripeevent.NewID("evt")
		bodies[id] = stripeevent.Minimal(id, "invoice.paid")
	}
	return bodies
}

// The deliveries that arrive while a batch is at the database go together
// in the next one: one transaction, however many they are, and each event
// still processed exactly once.
func TestReceive_DeliveriesThatArriveTogetherShareOneBatch(t *testing.T) {
	t.Parallel()
	store, pool := queuetest.NewStore(t)
	p := &countingProcessor{}
	r, reg := newMeteredReceiver(store, p)
	first, release := holdABatch(t, r, reg, pool)

	const together = 40
	rest := deliverAll(t, r, newEvents(together))
	queuetest.WaitFor(t, 10*time.Second, "every delivery to wait for the next batch", func() bool {
		return gauge(t, reg, "hookd_receiver_waiting_deliveries") == together
	})
	release()

	if a := <-first; a.err != nil || a.outcome != worker.Processed {
		t.Fatalf("%s: got %v, %v; want Processed", a.id, a.outcome, a.err)
	}
	for range together {
		if a := <-rest; a.err != nil || a.outcome != worker.Processed {
			t.Fatalf("%s: got %v, %v; want Processed", a.id, a.outcome, a.err)
		}
	}
	if got := gauge(t, reg, "hookd_receiver_batch_deliveries"); got != 2 {
		t.Errorf("batches: got %v, want 2 (the first delivery, then the %d that waited)", got, together)
	}
	if got := p.runs.Load(); got != together+1 {
		t.Errorf("processor runs: got %d, want %d", got, together+1)
	}
	if got := markers(t, pool); got != together+1 {
		t.Errorf("markers: got %d, want %d", got, together+1)
	}
	if got := gauge(t, reg, "hookd_receiver_waiting_deliveries"); got != 0 {
		t.Errorf("still waiting: %v", got)
	}
}

// Redeliveries of one event that land in the same batch: one is processed,
// and the others are told the event is being handled, as they would be
// from another batch or another replica.
func TestReceive_SameEventTwiceInABatchIsProcessedOnce(t *testing.T) {
	t.Parallel()
	store, pool := queuetest.NewStore(t)
	p := &countingProcessor{}
	r, reg := newMeteredReceiver(store, p)
	first, release := holdABatch(t, r, reg, pool)

	id := stripeevent.NewID("evt")
	body := stripeevent.Minimal(id, "invoice.paid")
	const copies = 20
	answers := make(chan answer, copies)
	for range copies {
		go func() {
			o, err := r.Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now()))
			answers <- answer{id, o, err}
		}()
	}
	queuetest.WaitFor(t, 10*time.Second, "every copy to wait for the next batch", func() bool {
		return gauge(t, reg, "hookd_receiver_waiting_deliveries") == copies
	})
	release()
	<-first

	processed, locked := 0, 0
	for range copies {
		a := <-answers
		switch {
		case a.err == nil && a.outcome == worker.Processed:
			processed++
		case isLocked(a.err):
			locked++
		default:
			t.Errorf("got %v, %v; want Processed or ErrEventLocked", a.outcome, a.err)
		}
	}
	if processed != 1 || locked != copies-1 {
		t.Errorf("got %d processed and %d locked; want 1 and %d", processed, locked, copies-1)
	}
	if got := p.runs.Load(); got != 2 {
		t.Errorf("processor runs: got %d, want 2 (the first event, then the copied one once)", got)
	}
}

// When the inline slots run out inside a batch, the events without one are
// deferred without waiting for the app to finish with those that got one.
func TestReceive_SlotsRunningOutInsideABatchDeferWithoutWaiting(t *testing.T) {
	t.Parallel()
	// A pool of three connections, so the test can take those the
	// receiver is not using and hold a batch at the database.
	cfg, err := pgxpool.ParseConfig(queuetest.NewDatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 3
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	reg := prometheus.NewRegistry()
	const slots = 2
	p := newBlockingProcessor()
	r := worker.NewReceiver(queue.New(pool), discardLogger, worker.ReceiverConfig{
		Secrets: []string{testSecret}, Processor: p, InlineConcurrency: slots,
		Metrics: worker.NewMetrics(reg, nil),
	})
	plug := stripeevent.NewID("evt")
	if _, err := pool.Exec(t.Context(), `INSERT INTO processed_webhook_events (event_id) VALUES ($1)`, plug); err != nil {
		t.Fatal(err)
	}

	// The app holds the first event, with one of the two slots, and its
	// batch holds a connection.
	first := deliverAll(t, r, newEvents(1))
	<-p.started
	// With the other two connections taken, the next batch (a redelivery,
	// which needs no slot) waits for one, holding its place, while two new
	// events gather behind it.
	var held []*pgxpool.Conn
	for range 2 {
		c, err := pool.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	plugAnswer := deliverAll(t, r, map[string][]byte{plug: stripeevent.Minimal(plug, "invoice.paid")})
	queuetest.WaitFor(t, 10*time.Second, "the redelivery's batch to start", func() bool {
		return gauge(t, reg, "hookd_receiver_batch_deliveries") == 2
	})
	answers := deliverAll(t, r, newEvents(2))
	queuetest.WaitFor(t, 10*time.Second, "both events to wait for the next batch", func() bool {
		return gauge(t, reg, "hookd_receiver_waiting_deliveries") == 2
	})
	for _, c := range held {
		c.Release()
	}
	if a := <-plugAnswer; a.err != nil || a.outcome != worker.Duplicate {
		t.Fatalf("redelivery: got %v, %v; want Duplicate", a.outcome, a.err)
	}

	// One of the two takes the last slot; the other is deferred, and
	// answered while the app still holds both.
	if a := <-answers; a.err != nil || a.outcome != worker.Deferred {
		t.Fatalf("%s: got %v, %v while the app held %d; want Deferred", a.id, a.outcome, a.err, slots)
	}
	<-p.started
	close(p.release)
	for _, ch := range []<-chan answer{answers, first} {
		if a := <-ch; a.err != nil || a.outcome != worker.Processed {
			t.Fatalf("%s: got %v, %v; want Processed", a.id, a.outcome, a.err)
		}
	}
	if got := queuetest.Count(t, pool, `SELECT count(*) FROM webhook_events WHERE attempts = 0 AND last_attempt_at IS NULL`); got != 1 {
		t.Errorf("deferred queue rows: got %d, want 1", got)
	}
	if got := p.total(); got != slots {
		t.Errorf("processor runs: got %d, want %d", got, slots)
	}
}

func isLocked(err error) bool {
	return errors.Is(err, queue.ErrEventLocked)
}
