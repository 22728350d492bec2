package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

// An app that fails every call is retried a few deliveries at a time until
// one succeeds, at the retry loop's default batch and concurrency: the
// deliveries it did not get to wait on the queue, due, with no attempt
// spent, and once the app answers again every delivery is taken exactly
// once.
func TestRetrier_AnAppFailingEveryCallIsRetriedFewerAtATime(t *testing.T) {
	t.Parallel()
	bundle := setup(t)
	queuetest.InsertDestination(t, bundle.pool, queuetest.DestinationOpts{Name: queue.DefaultDestination, Source: "forward_url"})
	narrowed := func() bool {
		t.Helper()
		d, err := bundle.store.Destination(t.Context(), queue.DefaultDestination)
		if err != nil {
			t.Fatal(err)
		}
		return d.RetriesNarrowed(time.Now())
	}
	// Three times the batch, due at once, as the first retries of a
	// minute's events are once the app began to fail.
	const deliveries = 3 * worker.DefaultRetryBatch
	if _, err := bundle.pool.Exec(t.Context(), `
		INSERT INTO webhook_events (source, event_id, event_type, payload, status, attempts, last_error, next_retry_at)
		SELECT 'stripe', 'evt_window_' || i, 'invoice.paid', '{}', 'retrying', 1, 'downstream returned 500',
		       now() - interval '1 second'
		FROM generate_series(1, $1) i`, deliveries); err != nil {
		t.Fatal(err)
	}
	app := &countingProcessor{}
	app.fail.Store(true)
	// The interval only spaces the turns; the batch and the concurrency
	// are the defaults.
	r := worker.NewRetrier(bundle.store, discardLogger, worker.ProducerConfig{Processor: app, Interval: 20 * time.Millisecond})
	stop := start(t, r)

	queuetest.WaitFor(t, 30*time.Second, "the window narrowed to one delivery", func() bool { return worker.RetryWindow(r) == 1 })
	// Each loop's claims halve from the whole batch: the two loops
	// together retry at most twice the series 500, 250, ..., 1.
	calls := app.runs.Load()
	if bound := int64(2 * 2 * worker.DefaultRetryBatch); calls >= bound {
		t.Errorf("calls to the failing app before the window reached one: %d, want under %d", calls, bound)
	}
	t.Logf("%d calls to the failing app until the window reached one delivery", calls)
	// Every call is one failed attempt of one delivery; the others were
	// not called and spent nothing.
	stop()
	app.fail.Store(false)
	calls = app.runs.Load()
	spent := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE attempts = 2 AND status = 'retrying'`)
	untouched := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE attempts = 1 AND next_retry_at <= now()`)
	recorded := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts WHERE outcome = 'failed'`)
	if !narrowed() {
		t.Error("the destination does not say its retries are narrowed")
	}
	if spent != calls || recorded != calls || untouched != deliveries-calls || untouched == 0 {
		t.Fatalf("after %d failed calls: %d deliveries with a second attempt, %d attempts recorded, %d due untouched; want %d, %d, %d (over 0)",
			calls, spent, recorded, untouched, calls, calls, deliveries-calls)
	}

	// The app is back: the next turn's success opens the window again and
	// the backlog drains, each delivery called once more.
	if _, err := bundle.pool.Exec(t.Context(), `UPDATE webhook_events SET next_retry_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	start(t, r)
	queuetest.WaitFor(t, 60*time.Second, "the backlog drained", func() bool { return bundle.queued(t) == 0 })
	if got := worker.RetryWindow(r); got != worker.DefaultRetryBatch {
		t.Errorf("window after the drain: %d, want the whole batch %d", got, worker.DefaultRetryBatch)
	}
	if narrowed() {
		t.Error("the destination still says its retries are narrowed after the drain")
	}
	if got, want := app.runs.Load(), calls+deliveries; got != want {
		t.Errorf("calls in all: %d, want %d (each delivery once after the failures)", got, want)
	}
	if m := queuetest.Markers(t, bundle.pool); m != deliveries {
		t.Errorf("markers %d, want %d", m, deliveries)
	}
}

// start runs r until the test ends or the returned stop is called.
func start(t *testing.T, r *worker.Retrier) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
