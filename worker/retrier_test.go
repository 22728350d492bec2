package worker_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/store/activity"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/internal/telemetry"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

func newRetrier(store *queue.Store, p worker.Processor, batch int) *worker.Retrier {
	return worker.NewRetrier(store, discardLogger, worker.ProducerConfig{
		Processor: p, BatchSize: batch, Interval: 10 * time.Millisecond,
	})
}

// makeDue moves every pending row's next retry into the past, as the
// passing of time would.
func makeDue(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(t.Context(),
		`UPDATE webhook_events SET next_retry_at = now() - interval '1 second' WHERE status <> 'dead'`); err != nil {
		t.Fatalf("make due: %v", err)
	}
}

// recordingProcessor succeeds and records the attempt number of each event.
type recordingProcessor struct {
	mu       sync.Mutex
	attempts map[string]int
}

func (p *recordingProcessor) Process(_ context.Context, d worker.Delivery) worker.Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.attempts == nil {
		p.attempts = map[string]int{}
	}
	p.attempts[d.EventID] = d.Attempt
	return worker.Result{HTTPStatus: 200}
}

func (p *recordingProcessor) attempt(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.attempts[id]
}

// blockingProcessor signals each run on started and waits for release.
type blockingProcessor struct {
	started chan string
	release chan struct{}
	mu      sync.Mutex
	runs    map[string]int
}

func newBlockingProcessor() *blockingProcessor {
	return &blockingProcessor{started: make(chan string, 16), release: make(chan struct{}), runs: map[string]int{}}
}

func (p *blockingProcessor) Process(ctx context.Context, d worker.Delivery) worker.Result {
	p.mu.Lock()
	p.runs[d.EventID]++
	p.mu.Unlock()
	p.started <- d.EventID
	select {
	case <-p.release:
		return worker.Result{}
	case <-ctx.Done():
		return worker.Result{Err: ctx.Err()}
	}
}

func (p *blockingProcessor) total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.runs {
		n += c
	}
	return n
}

func TestRetrier(t *testing.T) {
	t.Parallel()

	t.Run("FailingEventWalksTheBackoffToDead", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		p := &countingProcessor{}
		p.fail.Store(true)
		id := stripeevent.NewID("evt")
		body := stripeevent.Minimal(id, "invoice.paid")
		if got, err := newReceiver(bundle.store, p).Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now())); err != nil || got != receiver.Queued {
			t.Fatalf("inline: got %v, %v; want Queued", got, err)
		}
		r := newRetrier(bundle.store, p, 10)

		type row struct {
			status   queue.Status
			attempts int
			delay    float64
		}
		read := func() row {
			var x row
			if err := bundle.pool.QueryRow(t.Context(), `
				SELECT status, attempts, extract(epoch FROM next_retry_at - last_attempt_at)::float8
				FROM webhook_events WHERE event_id = $1`, id).Scan(&x.status, &x.attempts, &x.delay); err != nil {
				t.Fatalf("read row: %v", err)
			}
			return x
		}
		if got := read(); got.status != queue.StatusFailed || got.attempts != 0 || got.delay != queue.RetryDelay(0).Seconds() {
			t.Fatalf("after inline failure: got %+v, want failed, 0 attempts, %v s", got, queue.RetryDelay(0).Seconds())
		}
		for attempt := 1; attempt <= queue.MaxAttempts; attempt++ {
			makeDue(t, bundle.pool)
			if n, err := r.RunBatch(t.Context()); err != nil || n != 1 {
				t.Fatalf("retry %d: claimed %d, %v; want 1", attempt, n, err)
			}
			got := read()
			if attempt < queue.MaxAttempts {
				want := row{queue.StatusRetrying, attempt, queue.RetryDelay(attempt).Seconds()}
				if got != want {
					t.Fatalf("after retry %d: got %+v, want %+v", attempt, got, want)
				}
				continue
			}
			if got.status != queue.StatusDead || got.attempts != queue.MaxAttempts {
				t.Fatalf("after retry %d: got %+v, want dead with %d attempts", attempt, got, queue.MaxAttempts)
			}
		}
		if _, err := bundle.pool.Exec(t.Context(), `UPDATE webhook_events SET next_retry_at = now() - interval '1 day'`); err != nil {
			t.Fatal(err)
		}
		if n, err := r.RunBatch(t.Context()); err != nil || n != 0 {
			t.Errorf("dead row: claimed %d, %v; want 0", n, err)
		}
		attempts, err := bundle.store.Attempts(t.Context(), queue.SourceStripe, id)
		if err != nil || len(attempts) != 1+queue.MaxAttempts {
			t.Fatalf("attempts: got %d, %v; want %d", len(attempts), err, 1+queue.MaxAttempts)
		}
		for i, a := range attempts {
			wantPath := queue.PathRetry
			if i == 0 {
				wantPath = queue.PathInline
			}
			if a.Number != i || a.Path != wantPath || a.Succeeded {
				t.Errorf("attempt %d: got number %d, path %s, succeeded %v", i, a.Number, a.Path, a.Succeeded)
			}
		}
		if got := p.runs.Load(); got != 1+queue.MaxAttempts {
			t.Errorf("processor runs: got %d, want %d", got, 1+queue.MaxAttempts)
		}
	})

	t.Run("SuccessResolvesAndMarks", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		e := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 2})
		var got worker.Delivery
		p := worker.ProcessorFunc(func(_ context.Context, d worker.Delivery) worker.Result {
			got = d
			return worker.Result{HTTPStatus: 204}
		})
		if n, err := newRetrier(bundle.store, p, 10).RunBatch(t.Context()); err != nil || n != 1 {
			t.Fatalf("claimed %d, %v; want 1", n, err)
		}
		if got.EventID != e.EventID || got.Attempt != 3 || string(got.Payload) != e.Payload {
			t.Errorf("delivery: got %+v, want event %s attempt 3 with the stored payload", got, e.EventID)
		}
		if q, m := bundle.queued(t), queuetest.Markers(t, bundle.pool); q != 0 || m != 1 {
			t.Errorf("queue rows %d, markers %d; want 0, 1", q, m)
		}
		attempts, err := bundle.store.Attempts(t.Context(), queue.SourceStripe, e.EventID)
		if err != nil || len(attempts) != 1 || !attempts[0].Succeeded || *attempts[0].HTTPStatus != 204 || attempts[0].Number != 3 {
			t.Errorf("attempts: got %+v, %v", attempts, err)
		}
	})

	t.Run("ManualRetryIsRecordedAsManual", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		e := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: queue.MaxAttempts})
		if ok, err := bundle.store.RetryDead(t.Context(), e.ID); err != nil || !ok {
			t.Fatalf("retry dead: %v, %v", ok, err)
		}
		p := &countingProcessor{}
		p.fail.Store(true)
		if n, err := newRetrier(bundle.store, p, 10).RunBatch(t.Context()); err != nil || n != 1 {
			t.Fatalf("claimed %d, %v; want 1", n, err)
		}
		after, err := bundle.store.Event(t.Context(), e.ID)
		if err != nil || after.ManualRetry || after.Status != queue.StatusRetrying || after.Attempts != 1 {
			t.Errorf("row: got %+v, %v; want retrying, 1 attempt, manual_retry cleared", after, err)
		}
		attempts, err := bundle.store.Attempts(t.Context(), queue.SourceStripe, e.EventID)
		if err != nil || len(attempts) != 1 || attempts[0].Path != queue.PathManual {
			t.Errorf("attempts: got %+v, %v; want one manual attempt", attempts, err)
		}
	})

	t.Run("EventWithMarkerIsOnlyRemoved", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		e := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{})
		if err := queuetest.NewSeed(bundle.store).MarkProcessed(t.Context(), e.EventID); err != nil {
			t.Fatal(err)
		}
		p := &countingProcessor{}
		if n, err := newRetrier(bundle.store, p, 10).RunBatch(t.Context()); err != nil || n != 1 {
			t.Fatalf("claimed %d, %v; want 1", n, err)
		}
		if q, runs := bundle.queued(t), p.runs.Load(); q != 0 || runs != 0 {
			t.Errorf("queue rows %d, processor runs %d; want 0, 0", q, runs)
		}
	})

	t.Run("CrashBetweenClaimAndResolveLosesNothing", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{})
		// A replica claims the event and dies before resolving it.
		if claimed, err := queuetest.NewSeed(bundle.store).ClaimDue(t.Context(), 10, queuetest.DefaultClaimWindow); err != nil || len(claimed) != 1 {
			t.Fatalf("claim: got %d, %v", len(claimed), err)
		}
		p := &countingProcessor{}
		r := newRetrier(bundle.store, p, 10)
		if n, err := r.RunBatch(t.Context()); err != nil || n != 0 {
			t.Fatalf("within the claim window: claimed %d, %v; want 0", n, err)
		}
		// The claim window passes.
		if _, err := bundle.pool.Exec(t.Context(),
			`UPDATE webhook_events SET next_retry_at = next_retry_at - interval '2 minutes 1 second'`); err != nil {
			t.Fatal(err)
		}
		if n, err := r.RunBatch(t.Context()); err != nil || n != 1 {
			t.Fatalf("after the claim window: claimed %d, %v; want 1", n, err)
		}
		if q, m, runs := bundle.queued(t), queuetest.Markers(t, bundle.pool), p.runs.Load(); q != 0 || m != 1 || runs != 1 {
			t.Errorf("queue rows %d, markers %d, runs %d; want 0, 1, 1", q, m, runs)
		}
	})

	// A redelivery of an event the retry loop is running is answered from
	// its state, queued, without waiting for the lease: the queue owns it.
	t.Run("InlineDeliveryWhileRetryRunsIsAlreadyQueued", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		e := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{})
		p := newBlockingProcessor()
		done := make(chan error, 1)
		go func() {
			_, err := newRetrier(bundle.store, p, 10).RunBatch(t.Context())
			done <- err
		}()
		<-p.started
		body := []byte(e.Payload)
		if got, err := newReceiver(bundle.store, p).Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now())); err != nil || got != receiver.AlreadyQueued {
			t.Errorf("inline during retry: got %v, %v; want AlreadyQueued", got, err)
		}
		close(p.release)
		if err := <-done; err != nil {
			t.Fatalf("retry batch: %v", err)
		}
		if got, err := newReceiver(bundle.store, p).Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now())); err != nil || got != receiver.Duplicate {
			t.Errorf("redelivery after retry: got %v, %v; want Duplicate", got, err)
		}
		if got := p.total(); got != 1 {
			t.Errorf("processor runs: got %d, want 1", got)
		}
	})

	t.Run("RetryWhileInlineRunsLeavesTheEvent", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		id := stripeevent.NewID("evt")
		body := stripeevent.Minimal(id, "invoice.paid")
		p := newBlockingProcessor()
		type answer struct {
			o   receiver.Outcome
			err error
		}
		done := make(chan answer, 1)
		go func() {
			o, err := newReceiver(bundle.store, p).Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now()))
			done <- answer{o, err}
		}()
		<-p.started
		// The same event shows up due on the queue while the inline run holds it.
		queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: id, Payload: string(body)})
		r := newRetrier(bundle.store, p, 10)
		// The inline run's lease keeps the claim off the event: it stays due.
		if n, err := r.RunBatch(t.Context()); err != nil || n != 0 {
			t.Fatalf("retry during inline: claimed %d, %v; want 0", n, err)
		}
		close(p.release)
		if a := <-done; a.err != nil || a.o != receiver.Processed {
			t.Fatalf("inline: got %v, %v; want Processed", a.o, a.err)
		}
		makeDue(t, bundle.pool)
		if n, err := r.RunBatch(t.Context()); err != nil || n != 1 {
			t.Fatalf("retry after inline: claimed %d, %v; want 1", n, err)
		}
		if q, m, runs := bundle.queued(t), queuetest.Markers(t, bundle.pool), p.total(); q != 0 || m != 1 || runs != 1 {
			t.Errorf("queue rows %d, markers %d, runs %d; want 0, 1, 1", q, m, runs)
		}
	})

	t.Run("TwoRetriersProcessEachEventOnce", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		const events = 200
		if _, err := bundle.pool.Exec(t.Context(), `
			INSERT INTO webhook_events (source, event_id, event_type, payload, next_retry_at)
			SELECT 'stripe', 'evt_two_' || i, 'invoice.paid', '{}', now() - interval '1 minute'
			FROM generate_series(1, $1) i`, events); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		runs := map[string]int{}
		p := worker.ProcessorFunc(func(_ context.Context, d worker.Delivery) worker.Result {
			mu.Lock()
			runs[d.EventID]++
			mu.Unlock()
			return worker.Result{}
		})
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range 2 {
			r := newRetrier(bundle.store, p, 25)
			wg.Go(func() {
				<-start
				for {
					n, err := r.RunBatch(t.Context())
					if err != nil {
						t.Errorf("run batch: %v", err)
						return
					}
					if n == 0 {
						return
					}
				}
			})
		}
		close(start)
		wg.Wait()
		if len(runs) != events {
			t.Errorf("events processed: got %d, want %d", len(runs), events)
		}
		for id, n := range runs {
			if n != 1 {
				t.Errorf("%s processed %d times, want 1", id, n)
			}
		}
		if q, m := bundle.queued(t), queuetest.Markers(t, bundle.pool); q != 0 || m != events {
			t.Errorf("queue rows %d, markers %d; want 0, %d", q, m, events)
		}
	})

	t.Run("RunOverlapsBatchesAndProcessesEachEventOnce", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		const events = 300
		if _, err := bundle.pool.Exec(t.Context(), `
			INSERT INTO webhook_events (source, event_id, event_type, payload, next_retry_at)
			SELECT 'stripe', 'evt_run_' || i, 'invoice.paid', '{}', now() - interval '1 minute'
			FROM generate_series(1, $1) i`, events); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		runs := map[string]int{}
		p := worker.ProcessorFunc(func(_ context.Context, d worker.Delivery) worker.Result {
			mu.Lock()
			runs[d.EventID]++
			mu.Unlock()
			return worker.Result{}
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- newRetrier(bundle.store, p, 20).Run(ctx) }()
		queuetest.WaitFor(t, 30*time.Second, "the backlog drained", func() bool { return bundle.queued(t) == 0 })
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("run: got %v, want nil", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(runs) != events {
			t.Errorf("events processed: got %d, want %d", len(runs), events)
		}
		for id, n := range runs {
			if n != 1 {
				t.Errorf("%s processed %d times, want 1", id, n)
			}
		}
		if m := queuetest.Markers(t, bundle.pool); m != events {
			t.Errorf("markers %d, want %d", m, events)
		}
	})

	t.Run("RunFinishesInFlightWorkOnStop", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{})
		p := newBlockingProcessor()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- newRetrier(bundle.store, p, 10).Run(ctx) }()
		<-p.started
		cancel()
		close(p.release)
		if err := <-done; err != nil {
			t.Fatalf("run: got %v, want nil", err)
		}
		if q, m := bundle.queued(t), queuetest.Markers(t, bundle.pool); q != 0 || m != 1 {
			t.Errorf("queue rows %d, markers %d; want 0, 1: the in-flight event finishes", q, m)
		}
		ws, err := bundle.store.WorkerStatus(t.Context())
		if err != nil || ws.RetrierTick == nil {
			t.Errorf("worker status: got %+v, %v; want a retrier tick", ws, err)
		}
	})

	t.Run("ShutdownCutsNoAttempts", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		// One event is on its last retry: a cut run counted as a failure
		// would make it dead over a deploy.
		var ids []string
		for _, attempts := range []int{queue.MaxAttempts - 1, 1, 1, 2} {
			e := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{
				Status: queue.StatusRetrying, Attempts: attempts, LastError: fmt.Sprintf("downstream answered 500 (%d)", attempts),
			})
			ids = append(ids, e.EventID)
		}
		type row struct {
			status    queue.Status
			attempts  int
			lastError string
		}
		read := func() map[string]row {
			rows, err := bundle.pool.Query(t.Context(), `SELECT event_id, status, attempts, last_error FROM webhook_events`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			got := map[string]row{}
			for rows.Next() {
				var id string
				var x row
				if err := rows.Scan(&id, &x.status, &x.attempts, &x.lastError); err != nil {
					t.Fatal(err)
				}
				got[id] = x
			}
			return got
		}
		before := read()

		p := newBlockingProcessor()
		r := worker.NewRetrier(bundle.store, discardLogger, worker.ProducerConfig{
			Processor: p, StopTimeout: time.Millisecond, Concurrency: 2, BatchSize: 10,
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		<-p.started
		<-p.started
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("run: got %v, want nil", err)
		}

		if n := p.total(); n != 2 {
			t.Errorf("processor runs: got %d, want the 2 in flight: none starts once shutdown cancelled the work", n)
		}
		if after := read(); !maps.Equal(after, before) {
			t.Errorf("rows after shutdown:\n got %v\nwant %v: status, attempts and last error unchanged", after, before)
		}
		if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts`); n != 0 {
			t.Errorf("%d attempts recorded, want none: a cut run is no attempt", n)
		}
		if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE next_retry_at <= now()`); n != 4 {
			t.Errorf("%d of 4 rows due, want all released and due again at once", n)
		}

		// The next start retries them at once, each as the attempt it was.
		next := &recordingProcessor{}
		if n, err := newRetrier(bundle.store, next, 10).RunBatch(t.Context()); err != nil || n != 4 {
			t.Fatalf("next start: claimed %d, %v; want 4", n, err)
		}
		if q, m := bundle.queued(t), queuetest.Markers(t, bundle.pool); q != 0 || m != 4 {
			t.Errorf("queue rows %d, markers %d; want 0, 4", q, m)
		}
		for _, id := range ids {
			if got, want := next.attempt(id), before[id].attempts+1; got != want {
				t.Errorf("%s: retried as attempt %d, want %d", id, got, want)
			}
		}
	})
}

// Retries and deaths are counted for the charts once committed.
func TestRetrier_CountsRetriesAndDeathsWhenCommitted(t *testing.T) {
	t.Parallel()
	bundle := setup(t)
	act := telemetry.NewActivity(activity.New(bundle.pool), discardLogger, telemetry.ActivityConfig{Replica: "r"})
	metrics := telemetry.NewMetrics(prometheus.NewRegistry(), act)
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: queue.MaxAttempts - 1})
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 1})
	p := &countingProcessor{}
	p.fail.Store(true)
	r := worker.NewRetrier(bundle.store, discardLogger, worker.ProducerConfig{Processor: p, Metrics: metrics})
	if n, err := r.RunBatch(t.Context()); err != nil || n != 2 {
		t.Fatalf("batch: %d, %v; want 2 claimed", n, err)
	}
	p.fail.Store(false)
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusFailed})
	if n, err := r.RunBatch(t.Context()); err != nil || n != 1 {
		t.Fatalf("batch: %d, %v; want 1 claimed", n, err)
	}
	if err := act.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	var retried, processed, dead int64
	if err := bundle.pool.QueryRow(t.Context(), `SELECT sum(retried), sum(processed), sum(dead) FROM activity_minutes`).
		Scan(&retried, &processed, &dead); err != nil {
		t.Fatal(err)
	}
	if retried != 3 || processed != 1 || dead != 1 {
		t.Errorf("got %d retried, %d processed, %d dead; want 3, 1, 1", retried, processed, dead)
	}
}

// concurrencyProcessor succeeds after a moment of work and records how
// many runs were under way at once, at the most, and each event's runs.
type concurrencyProcessor struct {
	mu            sync.Mutex
	running, most int
	runs          map[string]int
}

func (p *concurrencyProcessor) Process(_ context.Context, d worker.Delivery) worker.Result {
	p.mu.Lock()
	p.running++
	p.most = max(p.most, p.running)
	p.runs[d.EventID]++
	p.mu.Unlock()
	time.Sleep(2 * time.Millisecond) // the app's work, long enough for the runs to overlap
	p.mu.Lock()
	p.running--
	p.mu.Unlock()
	return worker.Result{HTTPStatus: 200}
}

// HOOKD_RETRY_CONCURRENCY bounds the runs the app gets at once, not the
// runs of each batch: the retry loop keeps two batches in flight, and
// their runs share the Concurrency slots.
func TestRetrier_ConcurrencyBoundsTheRunsOfEveryBatchInFlight(t *testing.T) {
	t.Parallel()
	bundle := setup(t)
	const events, concurrency = 60, 3
	for range events {
		queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{})
	}
	p := &concurrencyProcessor{runs: map[string]int{}}
	r := worker.NewRetrier(bundle.store, discardLogger, worker.ProducerConfig{
		Processor: p, BatchSize: 4, Concurrency: concurrency, Interval: 10 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	queuetest.WaitFor(t, time.Minute, "every event processed", func() bool { return bundle.queued(t) == 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.most > concurrency {
		t.Errorf("%d runs at once, want at most %d", p.most, concurrency)
	}
	if len(p.runs) != events {
		t.Errorf("%d events run, want %d", len(p.runs), events)
	}
	for id, n := range p.runs {
		if n != 1 {
			t.Errorf("%s run %d times, want once", id, n)
		}
	}
}

// A replica whose beats are late claims nothing: its fence would cancel
// each run as it starts, spending an attempt the app never saw. Its loop
// still ticks, and it claims again once a beat gets through.
func TestRetrier_AReplicaWhoseBeatsAreLateClaimsNothing(t *testing.T) {
	t.Parallel()
	bundle := setup(t)
	id := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{}).EventID
	store := queue.New(bundle.pool, queue.WithReplica(uuid.New()))
	// Registered, then never beating: as if every beat of its own failed.
	hb := worker.NewHeartbeat(store, discardLogger)
	if err := hb.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	queuetest.WaitFor(t, 2*queue.ReplicaSilence, "the replica's beats to be overdue", hb.Overdue)

	p := &countingProcessor{}
	r := worker.NewRetrier(store, discardLogger, worker.ProducerConfig{
		Processor: p, BatchSize: 10, Interval: 10 * time.Millisecond, Heartbeat: hb,
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	queuetest.WaitFor(t, 30*time.Second, "the retry loop's tick", func() bool {
		return queuetest.Count(t, bundle.pool, `SELECT count(*) FROM worker_status WHERE component = 'retrier'`) == 1
	})
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE event_id = $1 AND claims = 0 AND attempts = 0`, id); n != 1 {
		t.Errorf("the due event was claimed by a replica whose beats are late")
	}
	if n := p.runs.Load(); n != 0 {
		t.Errorf("processor runs while the beats are late: got %d, want 0", n)
	}

	// The replica beats again, and keeps beating.
	if err := hb.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	beatCtx, stopBeating := context.WithCancel(context.Background())
	beating := make(chan struct{})
	go func() { defer close(beating); _ = hb.Run(beatCtx) }()
	defer func() { stopBeating(); <-beating }()
	queuetest.WaitFor(t, 30*time.Second, "the event processed once the replica beats", func() bool { return bundle.queued(t) == 0 })
	if n := p.runs.Load(); n != 1 {
		t.Errorf("processor runs: got %d, want 1", n)
	}
}
