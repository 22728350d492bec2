package worker_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

// replayApp is the app a replay delivers to, over HTTP: it counts each
// event's requests by their Hookd-Replay header and when each arrived.
type replayApp struct {
	srv   *httptest.Server
	delay time.Duration
	mu    sync.Mutex
	// got counts requests by event id and Hookd-Replay.
	got   map[[2]string]int
	times []time.Time
	reqs  atomic.Int64
}

func newReplayApp(t *testing.T, delay time.Duration) *replayApp {
	a := &replayApp{delay: delay, got: map[[2]string]int{}}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		a.mu.Lock()
		a.got[[2]string{r.Header.Get("Hookd-Event-Id"), r.Header.Get("Hookd-Replay")}]++
		a.times = append(a.times, time.Now())
		a.mu.Unlock()
		a.reqs.Add(1)
		if a.delay > 0 {
			time.Sleep(a.delay) // the app's own work
		}
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *replayApp) forwarder(t *testing.T) worker.Processor {
	f, err := worker.NewForwarder(a.srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// runReplayer runs a Replayer until the test ends.
func runReplayer(t *testing.T, store *queue.Store, cfg worker.ProducerConfig) *worker.Replayer {
	t.Helper()
	cfg.Interval = 50 * time.Millisecond
	r := worker.NewReplayer(store, discardLogger, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

func processedEvents(n int, prefix string) []queuetest.LoggedOpts {
	events := make([]queuetest.LoggedOpts, n)
	for i := range events {
		events[i] = queuetest.LoggedOpts{EventID: fmt.Sprintf("%s_%05d", prefix, i)}
	}
	return events
}

func startReplay(t *testing.T, store *queue.Store, name string, f queue.ReplayFilter) queue.Replay {
	t.Helper()
	if f.From.IsZero() {
		f.From, f.To = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	}
	r, err := store.StartReplay(t.Context(), name, f, "ops@example.com")
	if err != nil {
		t.Fatalf("start replay: %v", err)
	}
	return r
}

func waitReplay(t *testing.T, store *queue.Store, id int64, timeout time.Duration) queue.Replay {
	t.Helper()
	var r queue.Replay
	queuetest.WaitFor(t, timeout, "the replay to end", func() bool {
		var err error
		r, err = store.Replay(context.Background(), id)
		return err == nil && r.State != queue.ReplayRunning
	})
	return r
}

// TestReplay_DeliversEachProcessedEventOnceWithItsHeader: a replay of
// 10,000 processed events, shared by two replicas' runners, reaches a real
// app over HTTP once per event, each request with Hookd-Replay; the
// events it must not take (a dead one not asked for, one whose payload
// was pruned) never reach the app, and the processed events stay so.
func TestReplay_DeliversEachProcessedEventOnceWithItsHeader(t *testing.T) {
	t.Parallel()
	const n, name = 10000, "app bug #123 fix"
	b := setup(t)
	queuetest.InsertLogged(t, b.pool, processedEvents(n, "evt_replay"))
	queuetest.InsertLogged(t, b.pool, []queuetest.LoggedOpts{{EventID: "evt_pruned"}, {EventID: "evt_dead", Queued: true}})
	if _, err := b.pool.Exec(t.Context(), `UPDATE webhook_events SET status = 'dead' WHERE event_id = 'evt_dead'`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(t.Context(), `UPDATE processed_webhook_events SET payload = NULL WHERE event_id = 'evt_pruned'`); err != nil {
		t.Fatal(err)
	}
	f := queue.ReplayFilter{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour), Processed: true, Pending: true}
	preview, err := b.store.PreviewReplay(t.Context(), f)
	if err != nil {
		t.Fatal(err)
	}
	if preview.Matching != n+1 || preview.Unreplayable != 1 || len(preview.Sample) != queue.ReplaySampleSize {
		t.Fatalf("preview: %d matching, %d unreplayable, %d sampled; want %d, 1, %d",
			preview.Matching, preview.Unreplayable, len(preview.Sample), n+1, queue.ReplaySampleSize)
	}
	r := startReplay(t, b.store, name, f)
	if r.Total != n || r.Unreplayable != 1 {
		t.Fatalf("replay of %d events, %d left out; want %d, 1", r.Total, r.Unreplayable, n)
	}

	app := newReplayApp(t, 0)
	for range 2 {
		runReplayer(t, b.store, worker.ProducerConfig{Processor: app.forwarder(t)})
	}
	r = waitReplay(t, b.store, r.ID, 3*time.Minute)
	if r.State != queue.ReplayDone || r.Delivered != n || r.Failed != 0 || r.Skipped != 0 {
		t.Fatalf("replay ended %s with %d delivered, %d failed, %d skipped; want done, %d, 0, 0",
			r.State, r.Delivered, r.Failed, r.Skipped, n)
	}
	app.mu.Lock()
	defer app.mu.Unlock()
	if len(app.got) != n {
		t.Fatalf("the app got %d distinct (event, header) pairs, want %d", len(app.got), n)
	}
	for i := range n {
		key := [2]string{fmt.Sprintf("evt_replay_%05d", i), name}
		if app.got[key] != 1 {
			t.Fatalf("the app got %s with Hookd-Replay %q %d times, want once", key[0], name, app.got[key])
		}
	}
	if got := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_attempts WHERE path = 'replay' AND outcome = 'succeeded'`); got != n {
		t.Fatalf("%d replay attempts in the history, want %d", got, n)
	}
	if got := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_dead' AND status = 'dead'`); got != 1 {
		t.Fatal("the dead event the replay did not ask for changed")
	}
	t.Logf("%d events replayed by two runners, each once with Hookd-Replay; the app got %d requests at %.0f a second",
		n, app.reqs.Load(), r.Rate())
}

// overlapProcessor fails the test's count when two runs of one event
// overlap, and counts each event's runs.
type overlapProcessor struct {
	mu       sync.Mutex
	inFlight map[string]bool
	runs     map[string]int
	replays  map[string]int
	overlaps atomic.Int64
}

func (p *overlapProcessor) Process(_ context.Context, d worker.Delivery) worker.Result {
	p.mu.Lock()
	if p.inFlight[d.EventID] {
		p.overlaps.Add(1)
	}
	p.inFlight[d.EventID] = true
	p.runs[d.EventID]++
	if d.Replay != "" {
		p.replays[d.EventID]++
	}
	p.mu.Unlock()
	time.Sleep(time.Millisecond) // a run long enough for another to overlap it
	p.mu.Lock()
	p.inFlight[d.EventID] = false
	p.mu.Unlock()
	return worker.Result{HTTPStatus: 200}
}

// TestReplay_NeverRunsAnEventAtOnceWithTheRetryLoop: a replay of pending
// events and the retry loop, both due at once on the same events, never
// run one event at the same time: the lease keeps them apart. Each event
// is resolved once, and the replay delivers each of its members once.
func TestReplay_NeverRunsAnEventAtOnceWithTheRetryLoop(t *testing.T) {
	t.Parallel()
	const n = 2000
	b := setup(t)
	events := processedEvents(n, "evt_race")
	for i := range events {
		events[i].Queued = true
	}
	queuetest.InsertLogged(t, b.pool, events)
	r := startReplay(t, b.store, "race", queue.ReplayFilter{Pending: true})
	makeDue(t, b.pool)

	p := &overlapProcessor{inFlight: map[string]bool{}, runs: map[string]int{}, replays: map[string]int{}}
	runReplayer(t, b.store, worker.ProducerConfig{Processor: p})
	runReplayer(t, b.store, worker.ProducerConfig{Processor: p})
	retrier := worker.NewRetrier(b.store, discardLogger, worker.ProducerConfig{Processor: p, BatchSize: 50, Interval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = retrier.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	r = waitReplay(t, b.store, r.ID, 2*time.Minute)
	queuetest.WaitFor(t, time.Minute, "the queue to drain", func() bool { return b.queued(t) == 0 })
	if got := p.overlaps.Load(); got != 0 {
		t.Fatalf("%d runs overlapped another run of the same event", got)
	}
	if r.Delivered != n {
		t.Fatalf("the replay delivered %d, want %d", r.Delivered, n)
	}
	if got := queuetest.Markers(t, b.pool); got != n {
		t.Fatalf("%d markers, want %d", got, n)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var byRetry int
	for id, k := range p.replays {
		if k != 1 {
			t.Fatalf("the replay ran %s %d times", id, k)
		}
	}
	for id, k := range p.runs {
		byRetry += k - p.replays[id]
	}
	if len(p.replays) != n {
		t.Fatalf("the replay ran %d events, want %d", len(p.replays), n)
	}
	t.Logf("%d events: the replay ran each once, the retry loop %d of them first; no two runs of one event overlapped",
		n, byRetry)
}

// TestReplay_CancelStopsBetweenDeliveries: once a cancel is acknowledged
// (and told to this replica's runner, as the dashboard's is), at most the
// deliveries already past their check reach the app: no more than one per
// concurrent delivery. The members left stay pending, not delivered.
func TestReplay_CancelStopsBetweenDeliveries(t *testing.T) {
	t.Parallel()
	const n = 3000
	b := setup(t)
	queuetest.InsertLogged(t, b.pool, processedEvents(n, "evt_cancel"))
	r := startReplay(t, b.store, "to cancel", queue.ReplayFilter{Processed: true})
	app := newReplayApp(t, 5*time.Millisecond)
	runner := runReplayer(t, b.store, worker.ProducerConfig{Processor: app.forwarder(t)})
	queuetest.WaitFor(t, time.Minute, "the replay's first deliveries", func() bool { return app.reqs.Load() >= 100 })

	if _, err := b.store.CancelReplay(t.Context(), r.ID, "ops@example.com"); err != nil {
		t.Fatal(err)
	}
	runner.Cancelled(r.ID)
	acked, ackedAt := app.reqs.Load(), time.Now()
	queuetest.WaitFor(t, 10*time.Second, "the deliveries in flight to settle", func() bool {
		return queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_leases WHERE path = 'replay'`) == 0
	})
	after := app.reqs.Load() - acked
	app.mu.Lock()
	last := app.times[len(app.times)-1]
	app.mu.Unlock()
	if after > worker.DefaultReplayConcurrency {
		t.Fatalf("%d requests reached the app after the cancel was acknowledged, want at most %d in flight",
			after, worker.DefaultReplayConcurrency)
	}
	r, err := b.store.Replay(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != queue.ReplayCancelled || r.Delivered != app.reqs.Load() || r.Remaining() == 0 {
		t.Fatalf("cancelled replay: state %s, %d delivered (the app got %d), %d remaining",
			r.State, r.Delivered, app.reqs.Load(), r.Remaining())
	}
	t.Logf("cancelled after %d deliveries: %d more arrived, the last %s after the cancel; %d left pending",
		acked, after, last.Sub(ackedAt).Round(time.Millisecond), r.Remaining())
}

// TestReplay_CancelOnAnotherReplicaStopsItWithinASecond: a cancel made
// elsewhere (another replica's dashboard, which tells only its own runner)
// reaches this runner through the database: at the delivery rate, fewer
// requests than a second's worth arrive after it.
func TestReplay_CancelOnAnotherReplicaStopsItWithinASecond(t *testing.T) {
	t.Parallel()
	const n, rate = 2000, 40
	b := setup(t)
	queuetest.InsertLogged(t, b.pool, processedEvents(n, "evt_remote"))
	r := startReplay(t, b.store, "cancelled elsewhere", queue.ReplayFilter{Processed: true})
	app := newReplayApp(t, 0)
	runReplayer(t, b.store, worker.ProducerConfig{Processor: app.forwarder(t), Pace: worker.NewPace(rate)})
	queuetest.WaitFor(t, time.Minute, "the replay's first deliveries", func() bool { return app.reqs.Load() >= 20 })

	if _, err := b.store.CancelReplay(t.Context(), r.ID, "ops@example.com"); err != nil {
		t.Fatal(err)
	}
	acked := app.reqs.Load()
	queuetest.WaitFor(t, 10*time.Second, "the runner to notice", func() bool {
		got, err := b.store.Replay(context.Background(), r.ID)
		return err == nil && queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_leases WHERE path = 'replay'`) == 0 &&
			got.Delivered == app.reqs.Load()
	})
	after := app.reqs.Load() - acked
	if after >= rate {
		t.Fatalf("%d requests reached the app after the cancel, a second's worth at %d a second or more", after, rate)
	}
	t.Logf("cancelled on another replica after %d deliveries at %d a second: %d more arrived", acked, rate, after)
}

// TestReplay_MarksEachMemberStartedWhenItsRunStarts: a replay claims its
// members in batches, but marks a member started only when its own run
// starts. A crash then leaves only the members that were running as
// interrupted runs; the rest of the batch was never started and is never
// charged for it.
func TestReplay_MarksEachMemberStartedWhenItsRunStarts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	queuetest.InsertLogged(t, b.pool, processedEvents(worker.DefaultReplayBatch, "evt_started"))
	startReplay(t, b.store, "started one by one", queue.ReplayFilter{Processed: true})
	release := make(chan struct{})
	var running atomic.Int64
	blocking := worker.ProcessorFunc(func(ctx context.Context, d worker.Delivery) worker.Result {
		running.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return worker.Result{HTTPStatus: http.StatusOK}
	})
	runReplayer(t, b.store, worker.ProducerConfig{Processor: blocking})
	t.Cleanup(func() { close(release) })
	queuetest.WaitFor(t, 30*time.Second, "the replay's first runs", func() bool {
		return running.Load() == worker.DefaultReplayConcurrency
	})
	leased := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_leases WHERE path = 'replay'`)
	started := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_leases WHERE path = 'replay' AND started_at IS NOT NULL`)
	if leased != worker.DefaultReplayBatch || started != int64(running.Load()) {
		t.Fatalf("%d members leased, %d marked started, %d running; want the batch of %d leased and only the running ones started",
			leased, started, running.Load(), worker.DefaultReplayBatch)
	}
}
