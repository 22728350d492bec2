package receiver_test

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

// testApp is the user's app over real HTTP: it answers every delivery
// with the status its mode says, and counts what it got.
type testApp struct {
	srv    *httptest.Server
	status atomic.Int64
	mu     sync.Mutex
	got    map[string]int // 2xx answers per event
	times  []time.Time    // when each request arrived
	reqs   atomic.Int64
}

func newTestApp(t *testing.T) *testApp {
	a := &testApp{got: map[string]int{}}
	a.status.Store(http.StatusOK)
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.reqs.Add(1)
		status := int(a.status.Load())
		a.mu.Lock()
		a.times = append(a.times, time.Now())
		if status < 300 {
			a.got[r.Header.Get("Hookd-Event-Id")]++
		}
		a.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *testApp) answer(status int) { a.status.Store(int64(status)) }

// replica is one hookd replica's delivery path over the shared database:
// its store (counting the breaker), its copy of delivery_control, its
// receiver and its retry loop.
type replica struct {
	store    *queue.Store
	control  *worker.Control
	receiver *receiver.Receiver
	retrier  *worker.Retrier
}

type replicaConfig struct {
	breakerFailures int
	probe           time.Duration
	pace            *worker.Pace
	// timeout is the processor's; 2 s when zero.
	timeout time.Duration
	// logger is the control's and the retry loop's; none when nil.
	logger *slog.Logger
}

func newReplica(t *testing.T, pool *pgxpool.Pool, app *testApp, cfg replicaConfig) *replica {
	t.Helper()
	// Each replica has its own pool on the one database, as two processes
	// would.
	own, err := pgxpool.New(context.Background(), pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(own.Close)
	fwd, err := worker.NewForwarder(app.srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	logger := cmp.Or(cfg.logger, discardLogger)
	r := &replica{control: worker.NewControl(queue.New(own), logger)}
	r.store = queue.New(own, queue.WithBreaker(cfg.breakerFailures, cfg.probe, r.control))
	timeout := cmp.Or(cfg.timeout, 2*time.Second)
	r.receiver = receiver.New(r.store, discardLogger, receiver.Config{
		Secrets: []string{testSecret}, Processor: fwd, ProcessTimeout: timeout,
		Control: r.control, Pace: cfg.pace})
	r.retrier = worker.NewRetrier(r.store, logger, worker.ProducerConfig{
		Interval: 50 * time.Millisecond, ProcessTimeout: timeout, Processor: fwd,
		Control: r.control, Pace: cfg.pace})
	return r
}

// run starts the replica's control poll and, with loop, its retry loop,
// until the test ends.
func (r *replica) run(t *testing.T, loop bool) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.control.Run(ctx) })
	if loop {
		wg.Go(func() { _ = r.retrier.Run(ctx) })
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func deliverTo(t *testing.T, r *replica, id string) (receiver.Outcome, error) {
	body := stripeevent.Minimal(id, "invoice.paid")
	return r.receiver.Receive(context.Background(), body, stripeevent.Sign(body, testSecret, time.Now()))
}

func breakerRow(t *testing.T, pool *pgxpool.Pool) (failures int64, open bool) {
	t.Helper()
	err := pool.QueryRow(context.Background(),
		`SELECT breaker_failures, breaker_opened_at IS NOT NULL FROM delivery_control`).Scan(&failures, &open)
	if err != nil {
		t.Fatal(err)
	}
	return failures, open
}

// TestBreaker_OpensAfterExactlyNAppDownFailuresAcrossReplicas: two
// replicas over one database count the app's 503s in a row together; a
// 400 or a 500 between them starts the count over; the Nth opens the
// breaker, after which deliveries are queued without an attempt and the
// app hears only probes, one event each, whose failures spend no attempt;
// the first probe that succeeds closes it and the queue drains.
func TestBreaker_OpensAfterExactlyNAppDownFailuresAcrossReplicas(t *testing.T) {
	t.Parallel()
	const n = 6
	_, b := setup(t)
	app := newTestApp(t)
	cfg := replicaConfig{breakerFailures: n, probe: 200 * time.Millisecond}
	replicas := []*replica{newReplica(t, b.pool, app, cfg), newReplica(t, b.pool, app, cfg)}
	for _, r := range replicas {
		r.run(t, false)
	}
	seq := 0
	send := func(status int, k int) {
		t.Helper()
		app.answer(status)
		for range k {
			r := replicas[seq%2]
			seq++
			want := receiver.Queued
			if status < 300 {
				want = receiver.Processed
			}
			o, err := deliverTo(t, r, fmt.Sprintf("evt_breaker_%03d", seq))
			if err != nil || o != want {
				t.Fatalf("delivery %d: %v, %v; want %v", seq, o, err, want)
			}
		}
	}

	send(http.StatusServiceUnavailable, n-1)
	if f, open := breakerRow(t, b.pool); f != n-1 || open {
		t.Fatalf("after %d 503s: failures %d, open %v; want %d, closed", n-1, f, open, n-1)
	}
	// The app took one: the count starts over.
	send(http.StatusOK, 1)
	if f, open := breakerRow(t, b.pool); f != 0 || open {
		t.Fatalf("after a success: failures %d, open %v; want 0, closed", f, open)
	}
	send(http.StatusServiceUnavailable, n-1)
	// The app answered, wrongly: that is no outage.
	send(http.StatusBadRequest, 1)
	send(http.StatusInternalServerError, 1)
	send(http.StatusBadGateway, n-1)
	if f, open := breakerRow(t, b.pool); f != n-1 || open {
		t.Fatalf("after a 400, a 500 and %d 502s: failures %d, open %v; want %d, closed", n-1, f, open, n-1)
	}
	send(http.StatusGatewayTimeout, 1)
	if f, open := breakerRow(t, b.pool); f != n || !open {
		t.Fatalf("after the %dth app-down failure in a row: failures %d, open %v; want open", n, f, open)
	}
	queuetest.WaitFor(t, 15*time.Second, "both replicas to hold delivery", func() bool {
		return replicas[0].control.Held() && replicas[1].control.Held()
	})

	// Open: deliveries are answered and queued, the app hears nothing.
	before := app.reqs.Load()
	for i := range 10 {
		o, err := deliverTo(t, replicas[i%2], fmt.Sprintf("evt_held_%02d", i))
		if err != nil || o != receiver.Deferred {
			t.Fatalf("delivery while open: %v, %v; want deferred", o, err)
		}
	}
	if got := app.reqs.Load(); got != before {
		t.Fatalf("the app got %d requests while the breaker was open and nothing probed", got-before)
	}
	held := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_events WHERE event_id LIKE 'evt_held_%' AND attempts = 0
		AND last_error LIKE 'delivery is paused: the circuit breaker is open%'`)
	if held != 10 {
		t.Fatalf("%d of 10 deliveries while open queued with no attempt and the breaker's reason", held)
	}
	attemptsBefore := queuetest.Count(t, b.pool, `SELECT coalesce(sum(attempts), 0) FROM webhook_events`)

	// Probes: the retry loops probe, one event at a time, while the app is
	// still down; their failures spend no attempt.
	for _, r := range replicas {
		r.run(t, true)
	}
	queuetest.WaitFor(t, 15*time.Second, "three probes", func() bool { return app.reqs.Load() >= before+3 })
	// A probe's attempt is counted while it runs and given back when it
	// fails app-down: once the last probe has settled, none is spent.
	queuetest.WaitFor(t, 15*time.Second, "the probes to spend no attempt", func() bool {
		return queuetest.Count(t, b.pool, `SELECT coalesce(sum(attempts), 0) FROM webhook_events`) == attemptsBefore
	})
	app.mu.Lock()
	probes := app.times[len(app.times)-3:]
	app.mu.Unlock()
	// One event per probe: two probes never reach the app together.
	for i := 1; i < len(probes); i++ {
		if gap := probes[i].Sub(probes[i-1]); gap < 100*time.Millisecond {
			t.Fatalf("probes %v apart: more than one event per probe", gap)
		}
	}

	// The app is back: the first probe that succeeds closes the breaker,
	// and every event is delivered exactly once.
	app.answer(http.StatusOK)
	queuetest.WaitFor(t, 15*time.Second, "the breaker to close", func() bool { _, open := breakerRow(t, b.pool); return !open })
	// The failures from before the breaker opened wait for their backoff
	// (a minute); the test does not.
	if _, err := b.pool.Exec(context.Background(), `UPDATE webhook_events SET next_retry_at = now()`); err != nil {
		t.Fatal(err)
	}
	queuetest.WaitFor(t, 15*time.Second, "the queue to drain", func() bool {
		return queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_events`) == 0
	})
	app.mu.Lock()
	defer app.mu.Unlock()
	if len(app.got) != seq+10 {
		t.Fatalf("the app took %d events, want %d", len(app.got), seq+10)
	}
	for id, k := range app.got {
		if k != 1 {
			t.Fatalf("the app took %s %d times", id, k)
		}
	}
}

// TestPause_DuringLoadLosesNothingAndSpendsNoAttempt: deliveries keep
// coming to two replicas while a person pauses delivery; every one is
// answered (Receive returns nil, the receiver's 200), the retry loops
// deliver nothing while paused, no attempt is spent, and after resume
// every event reaches the app exactly once.
func TestPause_DuringLoadLosesNothingAndSpendsNoAttempt(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	app := newTestApp(t)
	// An app that answers at once, given the time a loaded machine may
	// take to let it: an inline delivery that timed out would be retried
	// a minute later, after this test.
	cfg := replicaConfig{breakerFailures: worker.DefaultBreakerFailures, probe: worker.DefaultBreakerProbe,
		timeout: 10 * time.Second}
	replicas := []*replica{newReplica(t, b.pool, app, cfg), newReplica(t, b.pool, app, cfg)}
	for _, r := range replicas {
		r.run(t, true)
	}
	// Senders deliver without pause until told to stop: 100 deliveries
	// before the pause, then on while it reaches the replicas, and 200
	// more once both hold delivery.
	const senders = 8
	var sent, deferred atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				o, err := deliverTo(t, replicas[(g+i)%2], fmt.Sprintf("evt_pause_%d_%05d", g, i))
				if err != nil {
					t.Errorf("delivery answered with an error: %v", err)
					return
				}
				sent.Add(1)
				if o == receiver.Deferred {
					deferred.Add(1)
				}
			}
		})
	}
	queuetest.WaitFor(t, 15*time.Second, "100 deliveries", func() bool { return sent.Load() >= 100 })
	if err := replicas[0].store.PauseDelivery(context.Background(), "ops@example.com", "app deploy"); err != nil {
		t.Fatal(err)
	}
	queuetest.WaitFor(t, 15*time.Second, "both replicas to hold delivery", func() bool {
		return replicas[0].control.Held() && replicas[1].control.Held()
	})
	// A retry batch that a replica began before it read the pause (of
	// events the other replica had deferred already) runs the attempts it
	// started to their end, and starts no other: from when no retry holds
	// a lease, nothing may reach the app.
	queuetest.WaitFor(t, 15*time.Second, "the retries begun before the pause to end", func() bool {
		return queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_leases WHERE path IN ('retry', 'manual')`) == 0
	})
	// Before the pause an inline delivery may have failed (the app is
	// slow on a loaded machine) and spent its attempt; from here on none
	// may.
	attemptsAtPause := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_attempts`)
	var pausedAt time.Time
	if err := b.pool.QueryRow(context.Background(), `SELECT now()`).Scan(&pausedAt); err != nil {
		t.Fatal(err)
	}
	more := sent.Load() + 200
	queuetest.WaitFor(t, 15*time.Second, "200 deliveries while paused", func() bool { return sent.Load() >= more })
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}
	// Every delivery was answered, and the retry loops had nothing to do
	// before the pause (the app took every event inline): from here on
	// the app must hear nothing until delivery resumes.
	settled := app.reqs.Load()
	// Of the 200 answered once both replicas held delivery, only those in
	// flight at that moment (one per sender) may have started before.
	if deferred.Load() < 200-senders {
		t.Fatalf("%d deliveries deferred by the pause, want at least the %d made while both replicas held it",
			deferred.Load(), 200-senders)
	}
	if got := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_attempts`); got != attemptsAtPause {
		t.Fatalf("%d attempts recorded while paused; a pause spends none", got-attemptsAtPause)
	}
	if got := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_events WHERE claims <> 0`); got != 0 {
		t.Fatalf("%d queued events claimed while paused", got)
	}
	if got := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_events
		WHERE attempts = 0
		  AND last_error NOT LIKE 'delivery is paused by ops@example.com (app deploy)%'
		  AND last_error NOT LIKE 'deferred%'`); got != 0 {
		t.Fatalf("%d events queued unattempted without the pause's reason", got)
	}
	// The retry loops keep looking for due events while paused (they
	// record that they are alive): once one has looked well after the
	// pause reached both replicas, it had its chance to deliver.
	queuetest.WaitFor(t, 15*time.Second, "a retry loop to look for due events while paused", func() bool {
		ws, err := replicas[0].store.WorkerStatus(context.Background())
		return err == nil && ws.RetrierTick != nil && ws.RetrierTick.After(pausedAt.Add(2*worker.ControlRefresh))
	})
	if got := app.reqs.Load(); got != settled {
		t.Fatalf("the app got %d requests while paused", got-settled)
	}

	if err := replicas[1].store.ResumeDelivery(context.Background()); err != nil {
		t.Fatal(err)
	}
	queuetest.WaitFor(t, 15*time.Second, "the queue to drain", func() bool {
		return queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_events`) == 0
	})
	t.Logf("%d deliveries answered, %d of them queued by the pause with no attempt, all delivered once after resume",
		sent.Load(), deferred.Load())
	total := sent.Load()
	if got := queuetest.Markers(t, b.pool); got != total {
		t.Fatalf("%d markers, want %d", got, total)
	}
	app.mu.Lock()
	defer app.mu.Unlock()
	if int64(len(app.got)) != total {
		t.Fatalf("the app took %d events, want %d", len(app.got), total)
	}
	for id, k := range app.got {
		if k != 1 {
			t.Fatalf("the app took %s %d times", id, k)
		}
	}
}

// TestPace_HoldsAcrossTheReceiverAndTheRetryLoop: with HOOKD_FORWARD_RATE
// set, a retry loop draining a backlog and deliveries arriving at the same
// time reach the app at the rate, counted per second window over 10 s:
// the receiver shares the bucket, deferring to the queue what would wait
// past receiver.PaceWait for its turn.
//
// Not parallel, like its neighbour below: it counts requests per second of
// real time, and a commit's flush held up by the package's parallel tests
// creating their databases starves the retry loop for a moment that then
// reads as a window short of the rate (once, in a CI run: 31 of 50).
func TestPace_HoldsAcrossTheReceiverAndTheRetryLoop(t *testing.T) {
	paceHolds(t, false)
}

// TestPace_HoldsAcrossTheReceiverTheRetryLoopAndAReplay: the same with a
// replay of processed events running too, whose deliveries take the same
// tokens.
func TestPace_HoldsAcrossTheReceiverTheRetryLoopAndAReplay(t *testing.T) {
	paceHolds(t, true)
}

// paceHolds counts the app's requests per second window over 10 s while a
// retry loop drains a backlog, deliveries arrive, and, with replay, a
// replay runs, all under one Pace.
func paceHolds(t *testing.T, replay bool) {
	const rate, windows = 50, 10
	_, b := setup(t)
	app := newTestApp(t)
	for i := range rate * (windows + 3) {
		queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: fmt.Sprintf("evt_backlog_%04d", i)})
	}
	pace := worker.NewPace(rate)
	r := newReplica(t, b.pool, app, replicaConfig{breakerFailures: worker.DefaultBreakerFailures,
		probe: worker.DefaultBreakerProbe, pace: pace})
	r.run(t, true)
	var replayID int64
	if replay {
		logged := make([]queuetest.LoggedOpts, rate*(windows+3))
		for i := range logged {
			logged[i] = queuetest.LoggedOpts{EventID: fmt.Sprintf("evt_replayed_%04d", i)}
		}
		queuetest.InsertLogged(t, b.pool, logged)
		started, err := r.store.StartReplay(t.Context(), "pace", queue.ReplayFilter{From: time.Now().Add(-time.Hour),
			To: time.Now().Add(time.Hour), Processed: true}, "ops@example.com")
		if err != nil {
			t.Fatal(err)
		}
		replayID = started.ID
		fwd, err := worker.NewForwarder(app.srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		replayer := worker.NewReplayer(r.store, discardLogger, worker.ProducerConfig{Interval: 50 * time.Millisecond,
			ProcessTimeout: 2 * time.Second, Processor: fwd, Control: r.control, Pace: pace})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = replayer.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var inline, deferred atomic.Int64
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				o, err := deliverTo(t, r, fmt.Sprintf("evt_inline_%d_%05d", g, i))
				switch {
				case err != nil:
					t.Errorf("delivery: %v", err)
					return
				case o == receiver.Processed:
					inline.Add(1)
				case o == receiver.Deferred:
					deferred.Add(1)
				}
				time.Sleep(20 * time.Millisecond) // a steady arrival, not a flood
			}
		})
	}
	queuetest.WaitFor(t, 15*time.Second, "the app's first request", func() bool { return app.reqs.Load() > 0 })
	app.mu.Lock()
	start := app.times[0].Add(time.Second) // past the start's first token
	app.mu.Unlock()
	end := start.Add(windows * time.Second)
	queuetest.WaitFor(t, 15*time.Second, "10 s of deliveries", func() bool { return time.Now().After(end.Add(100 * time.Millisecond)) })
	close(stop)
	wg.Wait()

	counts := make([]int, windows)
	app.mu.Lock()
	for _, at := range app.times {
		if !at.Before(start) && at.Before(end) {
			counts[int(at.Sub(start)/time.Second)]++
		}
	}
	app.mu.Unlock()
	total := 0
	for _, c := range counts {
		total += c
	}
	t.Logf("requests per 1 s window at %d a second: %v (total %d over %d s); inline processed %d, deferred %d",
		rate, counts, total, windows, inline.Load(), deferred.Load())
	for i, c := range counts {
		if c < rate*9/10 || c > rate*11/10 {
			t.Errorf("window %d: %d requests, want %d ±10%%", i, c, rate)
		}
	}
	if deferred.Load() == 0 {
		t.Error("no delivery was deferred: the receiver did not share the rate with the retry loop")
	}
	if replay {
		got, err := r.store.Replay(context.Background(), replayID)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the replay delivered %d of its %d events meanwhile", got.Delivered, got.Total)
		if got.Delivered == 0 {
			t.Error("the replay delivered nothing: it did not share the rate")
		}
	}
}

// lockedBuffer is a log the replica's goroutines write while the test
// reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// The breaker's opening is a warning with its cause and its closing a
// plain line; the probes between, whose events are given back while the
// app is still down, are not a shutdown cutting retries short.
func TestBreaker_LogsOpeningAndClosingPlainly(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	app := newTestApp(t)
	var log lockedBuffer
	r := newReplica(t, b.pool, app, replicaConfig{breakerFailures: 2, probe: 100 * time.Millisecond,
		logger: slog.New(slog.NewTextHandler(&log, nil))})
	r.run(t, false)
	app.answer(http.StatusServiceUnavailable)
	for i := range 2 {
		if o, err := deliverTo(t, r, fmt.Sprintf("evt_down_%d", i)); err != nil || o != receiver.Queued {
			t.Fatalf("delivery %d: %v, %v; want queued", i, o, err)
		}
	}
	queuetest.WaitFor(t, 15*time.Second, "the opening logged", func() bool {
		return strings.Contains(log.String(), `level=WARN msg="circuit breaker opened`)
	})
	if opened := log.String(); !strings.Contains(opened, "cause=") || !strings.Contains(opened, "503") {
		t.Errorf("the opening does not give its cause, the app's 503:\n%s", opened)
	}

	// Deliveries while open wait, due now, for the probes to take.
	for i := range 3 {
		if o, err := deliverTo(t, r, fmt.Sprintf("evt_held_%d", i)); err != nil || o != receiver.Deferred {
			t.Fatalf("delivery while open: %v, %v; want deferred", o, err)
		}
	}
	before := app.reqs.Load()
	r.run(t, true)
	queuetest.WaitFor(t, 15*time.Second, "two probes finding the app down", func() bool { return app.reqs.Load() >= before+2 })
	app.answer(http.StatusOK)
	queuetest.WaitFor(t, 15*time.Second, "the closing logged", func() bool {
		return strings.Contains(log.String(), `level=INFO msg="circuit breaker closed`)
	})
	if strings.Contains(log.String(), "shutdown cut retries short") {
		t.Errorf("probes logged a shutdown while nothing shut down:\n%s", log.String())
	}
}

// TestBreaker_CountsOnlyCallsToTheApp: an open breaker closes only on a call
// that reached the app. A test-mode event its endpoint discards, and a
// redelivery of an event processed before, are answered without any call:
// they say nothing of whether the app is back, and the breaker stays open.
func TestBreaker_CountsOnlyCallsToTheApp(t *testing.T) {
	t.Parallel()
	const n = 3
	_, b := setup(t)
	app := newTestApp(t)
	r := newReplica(t, b.pool, app, replicaConfig{breakerFailures: n, probe: time.Hour})
	r.run(t, false)
	if o, err := deliverTo(t, r, "evt_taken_before"); err != nil || o != receiver.Processed {
		t.Fatalf("first delivery: %v, %v; want processed", o, err)
	}
	app.answer(http.StatusServiceUnavailable)
	for i := range n {
		if o, err := deliverTo(t, r, fmt.Sprintf("evt_down_%d", i)); err != nil || o != receiver.Queued {
			t.Fatalf("delivery while the app is down: %v, %v; want queued", o, err)
		}
	}
	if _, open := breakerRow(t, b.pool); !open {
		t.Fatalf("after %d app-down failures the breaker is closed; want open", n)
	}

	discarding := endpoint.New(endpoint.DefaultLabel)
	discarding.Secrets, discarding.TestEvents = []string{testSecret}, endpoint.DiscardTestEvents
	fwd, err := worker.NewForwarder(app.srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	rcv := receiver.New(r.store, discardLogger, receiver.Config{Endpoints: []endpoint.Endpoint{discarding},
		Processor: fwd, ProcessTimeout: 2 * time.Second, Control: r.control})
	body := stripeevent.Minimal("evt_test_mode", "invoice.paid") // livemode false
	if o, err := rcv.Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now())); err != nil || o != receiver.TestDiscarded {
		t.Fatalf("a test-mode event its endpoint discards: %v, %v; want discarded", o, err)
	}
	if f, open := breakerRow(t, b.pool); !open {
		t.Fatalf("a discarded test-mode event closed the breaker (failures %d); want it open", f)
	}
	if o, err := deliverTo(t, r, "evt_taken_before"); err != nil || o != receiver.Duplicate {
		t.Fatalf("redelivery of a processed event: %v, %v; want duplicate", o, err)
	}
	if f, open := breakerRow(t, b.pool); !open {
		t.Fatalf("a redelivery answered from its state closed the breaker (failures %d); want it open", f)
	}
}
