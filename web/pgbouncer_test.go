package web_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/e2e/e2etest"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web"
	"github.com/hookd/hookd/worker"
)

// The pipeline's guarantees hold for replicas that reach PostgreSQL through
// PgBouncer in transaction pooling mode, as hookd is deployed: leases keep
// one processor run per event although no session, and so no advisory lock
// or open transaction, outlives a statement's server connection. Each
// scenario runs three replicas, each with its own pool through PgBouncer,
// receiver, retry loop and HTTP server, on one database; under load the
// pools hold more client connections than PgBouncer keeps server
// connections for a database, so it multiplexes them, and the statements of
// one client connection run on several server ones.
func TestThreeReplicasBehindPgBouncer(t *testing.T) {
	t.Parallel()

	t.Run("DeliveryIsProcessed", func(t *testing.T) {
		t.Parallel()
		app := newCountingApp(nil)
		b := startBouncedReplicas(t, app)
		for i := range b.replicas {
			id := stripeevent.NewID("evt")
			if got := b.post(t, i, stripeevent.Minimal(id, "invoice.paid")); got.status != 200 || got.body != "processed\n" {
				t.Errorf("replica %d: got %d %q, want 200 processed", i, got.status, got.body)
			}
			if got := queuetest.Count(t, b.db, `SELECT count(*) FROM processed_webhook_events WHERE event_id = $1`, id); got != 1 {
				t.Errorf("replica %d: markers of %s: got %d, want 1", i, id, got)
			}
		}
		app.check(t, len(b.replicas), 1)
	})

	t.Run("RedeliveryToEachReplicaIsDuplicate", func(t *testing.T) {
		t.Parallel()
		app := newCountingApp(nil)
		b := startBouncedReplicas(t, app)
		body := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
		if got := b.post(t, 0, body); got.status != 200 || got.body != "processed\n" {
			t.Fatalf("first delivery: got %d %q, want 200 processed", got.status, got.body)
		}
		for i := range b.replicas {
			if got := b.post(t, i, body); got.status != 200 || got.body != "duplicate\n" {
				t.Errorf("redelivery to replica %d: got %d %q, want 200 duplicate", i, got.status, got.body)
			}
		}
		app.check(t, 1, 1)
	})

	t.Run("ConcurrentRedeliveriesRunTheProcessorOnce", func(t *testing.T) {
		t.Parallel()
		const deliveries = 30
		var answered atomic.Int64
		othersAnswered := make(chan struct{})
		app := newCountingApp(nil)
		// The one delivery that gets the lease holds it until all the
		// others have been answered, so every one of them overlaps it.
		app.during = func(ctx context.Context) {
			select {
			case <-othersAnswered:
			case <-ctx.Done():
			}
		}
		b := startBouncedReplicas(t, app)
		body := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")

		start := make(chan struct{})
		answers := make(chan answer, deliveries)
		var wg sync.WaitGroup
		for i := range deliveries {
			wg.Go(func() {
				<-start
				answers <- b.post(t, i%len(b.replicas), body)
				if answered.Add(1) == deliveries-1 {
					close(othersAnswered)
				}
			})
		}
		close(start)
		wg.Wait()
		close(answers)
		byAnswer := map[string]int{}
		for a := range answers {
			byAnswer[fmt.Sprintf("%d %s", a.status, strings.TrimSpace(a.body))]++
			if a.status == http.StatusServiceUnavailable && a.header.Get("Retry-After") == "" {
				t.Errorf("503 %q without Retry-After: not a delivery turned away by the lease", a.body)
			}
		}
		const locked = "503 event is being handled by another delivery"
		if byAnswer["200 processed"] != 1 || byAnswer[locked] != deliveries-1 {
			t.Errorf("answers: got %v, want one 200 processed and %d %q", byAnswer, deliveries-1, locked)
		}
		for i := range b.replicas {
			if got := b.post(t, i, body); got.status != 200 || got.body != "duplicate\n" {
				t.Errorf("redelivery to replica %d: got %d %q, want 200 duplicate", i, got.status, got.body)
			}
		}
		app.check(t, 1, 1)
		b.checkMarkers(t, 1)
	})

	t.Run("RetryLoopsDrainTheQueueRunningEachEventOnce", func(t *testing.T) {
		t.Parallel()
		var down atomic.Bool
		down.Store(true)
		app := newCountingApp(func(string, int) bool { return down.Load() })
		b := startBouncedReplicas(t, app)
		const events = 30
		for i := range events {
			body := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
			if got := b.post(t, i%len(b.replicas), body); got.status != 200 || got.body != "queued\n" {
				t.Fatalf("delivery %d while the app fails: got %d %q, want 200 queued", i, got.status, got.body)
			}
		}

		// The app recovers, and the first retry falls due.
		down.Store(false)
		b.makeDue(t)
		b.runRetriers(t, 0, 1, 2)
		b.waitDrained(t)
		app.check(t, events, 2)
		b.checkMarkers(t, events)
		if got := queuetest.Count(t, b.db,
			`SELECT count(*) FROM webhook_attempts WHERE path = 'retry' AND outcome = 'succeeded' AND attempt = 1`); got != events {
			t.Errorf("first retries that succeeded: got %d, want %d", got, events)
		}
	})

	t.Run("AbandonedClaimIsTakenOverAndItsRunsChargedNothing", func(t *testing.T) {
		t.Parallel()
		var down atomic.Bool
		down.Store(true)
		app := newCountingApp(func(string, int) bool { return down.Load() })
		b := startBouncedReplicas(t, app)
		const events = 12
		ids := make([]string, events)
		for i := range ids {
			ids[i] = stripeevent.NewID("evt")
			if got := b.post(t, i%len(b.replicas), stripeevent.Minimal(ids[i], "invoice.paid")); got.status != 200 || got.body != "queued\n" {
				t.Fatalf("delivery %d while the app fails: got %d %q, want 200 queued", i, got.status, got.body)
			}
		}
		down.Store(false)
		b.makeDue(t)

		// Replica 0 claims every event for its first retry, starts each
		// run and dies before it settles any: the claim is never given
		// back.
		claim, err := b.replicas[0].store.ClaimAttempts(t.Context(), 100, time.Minute)
		if err != nil || len(claim.Claimed) != events {
			t.Fatalf("claim: got %d events, %v; want %d", len(claim.Claimed), err, events)
		}
		if _, _, err := b.replicas[0].store.SettleAndStart(t.Context(), nil, claim.Claimed); err != nil {
			t.Fatal(err)
		}
		for _, c := range claim.Claimed {
			if c.Event.Attempts != 1 {
				t.Errorf("%s: claimed as attempt %d, want 1", c.Event.EventID, c.Event.Attempts)
			}
		}
		// Due again, but the dead replica's leases still hold them. Unlike
		// makeDue, this makes leased rows due: safe only because their
		// holder is dead, so no outcome of its comes to wait for them.
		if _, err := b.db.Exec(t.Context(), `UPDATE webhook_events SET next_retry_at = now() - interval '1 second'`); err != nil {
			t.Fatal(err)
		}
		if got := queuetest.Count(t, b.db, `SELECT count(*) FROM webhook_events WHERE next_retry_at <= now()`); got != events {
			t.Fatalf("due events: got %d, want %d", got, events)
		}
		if n, err := b.replicas[1].retrier.RunBatch(t.Context()); err != nil || n != 0 {
			t.Fatalf("another replica under live leases: claimed %d, %v; want 0", n, err)
		}

		// The leases expire: the other replicas' loops take the events over.
		if _, err := b.db.Exec(t.Context(), `UPDATE webhook_leases SET expires_at = now() - interval '1 second'`); err != nil {
			t.Fatal(err)
		}
		b.runRetriers(t, 1, 2)
		b.waitDrained(t)
		app.check(t, events, 2)
		b.checkMarkers(t, events)

		history := queue.New(b.db)
		for _, id := range ids {
			if got := app.attemptsOf(id); !slices.Equal(got, []int{0, 1}) {
				t.Errorf("%s: the app saw attempts %v, want [0 1]: the abandoned run is charged nothing", id, got)
			}
			attempts, err := history.Attempts(t.Context(), queue.SourceStripe, id)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range attempts {
				got = append(got, fmt.Sprintf("%s %d %s", a.Path, a.Number, a.Outcome))
			}
			want := []string{"inline 0 failed", "retry 1 succeeded"}
			if strings.Join(got, ", ") != strings.Join(want, ", ") {
				t.Errorf("%s: history %q, want %q", id, got, want)
			}
		}
		// Each ran alone after the abandoned claim, and was cleared.
		if got := queuetest.Count(t, b.db, `SELECT count(*) FROM webhook_suspects
			WHERE cleared_at IS NOT NULL AND interruptions = 1 AND crashes = 0`); got != events {
			t.Errorf("suspects run alone and cleared: got %d, want %d", got, events)
		}
	})

	t.Run("StormOnEveryReplicaProcessesEachEventOnce", func(t *testing.T) {
		t.Parallel()
		// Each event's first run fails, whichever path makes it.
		app := newCountingApp(func(_ string, run int) bool { return run == 1 })
		b := startBouncedReplicas(t, app)
		b.runRetriers(t, 0, 1, 2)

		// Stripe delivers every event to every replica at once, twice.
		const events = 40
		bodies := make([][]byte, events)
		for i := range bodies {
			bodies[i] = stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
		}
		var wg sync.WaitGroup
		for round := range 2 {
			for _, body := range bodies {
				for i := range b.replicas {
					wg.Go(func() {
						got := b.post(t, i, body)
						if got.status != 200 && (got.status != 503 || got.header.Get("Retry-After") == "") {
							t.Errorf("round %d, replica %d: got %d %q, want 200, or 503 with Retry-After", round, i, got.status, got.body)
						}
					})
				}
			}
			wg.Wait()
		}

		// Time passes for the queue until the retry loops have drained it.
		queuetest.WaitFor(t, 20*time.Second, "the retry loops to drain the queue", func() bool {
			b.makeDue(t)
			return queuetest.Count(t, b.db, `SELECT count(*) FROM webhook_events`) == 0
		})
		app.check(t, events, -1)
		b.checkMarkers(t, events)
	})
}

// bouncedReplicas are three hookd replicas on one fresh database, each
// reaching it through PgBouncer.
type bouncedReplicas struct {
	replicas [3]bouncedReplica
	// db goes to PostgreSQL directly: the test's own reads, and the
	// passing of time.
	db *pgxpool.Pool
}

type bouncedReplica struct {
	srv     *httptest.Server
	store   *queue.Store
	retrier *worker.Retrier
}

// bouncedPoolConns is each replica's pool size: together the replicas hold
// more client connections than the 20 server connections PgBouncer keeps
// for a database (.ci/pgbouncer.sh), so PgBouncer really multiplexes them.
const bouncedPoolConns = 8

// startBouncedReplicas starts the replicas over app. Whatever they log at
// level ERROR fails the test: a statement PgBouncer breaks surfaces there
// with its error, not only as a 503.
func startBouncedReplicas(t *testing.T, app worker.Processor) *bouncedReplicas {
	t.Helper()
	direct := setup(t, withoutServer()).dbURL
	pooled := queuetest.PgBouncerURL(t, direct)
	logs := &e2etest.SyncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	t.Cleanup(func() {
		for line := range strings.Lines(logs.String()) {
			if strings.Contains(line, "level=ERROR") {
				t.Errorf("a replica logged an error: %s", line)
			}
		}
	})

	b := &bouncedReplicas{db: openPool(t, direct, 4)}
	for i := range b.replicas {
		pool := openPool(t, pooled, bouncedPoolConns)
		store := queue.New(pool)
		l := logger.With("replica", i)
		receiver := receiver.New(store, l, receiver.Config{Secrets: []string{testSecret}, Processor: app})
		srv := httptest.NewServer(web.NewServer(web.Options{Logger: l, Stores: storesOn(store, pool),
			Receiver: receiver, Gatherer: prometheus.NewRegistry()}))
		t.Cleanup(srv.Close)
		b.replicas[i] = bouncedReplica{srv: srv, store: store, retrier: worker.NewRetrier(store, l, worker.ProducerConfig{
			Processor: app, BatchSize: 7, Interval: 5 * time.Millisecond,
		})}
	}
	return b
}

func openPool(t *testing.T, url string, conns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = conns
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// post delivers body to replica i, signed now.
func (b *bouncedReplicas) post(t *testing.T, i int, body []byte) answer {
	t.Helper()
	return post(t, b.replicas[i].srv, body, stripeevent.Sign(body, testSecret, time.Now()))
}

// runRetriers runs the retry loops of the replicas numbered which until
// the test ends.
func (b *bouncedReplicas) runRetriers(t *testing.T, which ...int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	var loops sync.WaitGroup
	for _, i := range which {
		loops.Go(func() { _ = b.replicas[i].retrier.Run(ctx) })
	}
	t.Cleanup(func() {
		cancel()
		loops.Wait()
	})
}

// makeDue moves the next retry of every pending row that no processor is
// running into the past, as the passing of time would. A claimed row stays
// as it is: time makes it due only once its lease has expired (a claim sets
// next_retry_at to the lease's expiry), and RetryNow leaves it alone for
// the same reason. Made due earlier, a claim on another replica would lock
// it and wait for its lease while the holder's outcome waits for the row: a
// deadlock. Rows being written at this moment are skipped, not waited for.
func (b *bouncedReplicas) makeDue(t *testing.T) {
	t.Helper()
	if _, err := b.db.Exec(t.Context(), `
		UPDATE webhook_events SET next_retry_at = now() - interval '1 second'
		WHERE id IN (
			SELECT id FROM webhook_events e
			WHERE status <> 'dead' AND next_retry_at > now()
			  AND NOT EXISTS (SELECT 1 FROM webhook_leases l WHERE l.event_id = e.event_id AND l.expires_at > now())
			FOR UPDATE SKIP LOCKED)`); err != nil {
		t.Fatalf("make due: %v", err)
	}
}

// waitDrained waits until the retry loops have emptied the queue.
func (b *bouncedReplicas) waitDrained(t *testing.T) {
	t.Helper()
	queuetest.WaitFor(t, 20*time.Second, "the retry loops to drain the queue", func() bool {
		return queuetest.Count(t, b.db, `SELECT count(*) FROM webhook_events`) == 0
	})
}

// checkMarkers fails t unless the database holds want dedup markers.
func (b *bouncedReplicas) checkMarkers(t *testing.T, want int64) {
	t.Helper()
	if got := queuetest.Markers(t, b.db); got != want {
		t.Errorf("markers: got %d, want %d", got, want)
	}
}

// countingApp is the app behind the replicas: it fails a run when fail
// says so, and records each event's runs, successes and attempt numbers,
// and any two runs of one event that overlap.
type countingApp struct {
	fail func(eventID string, run int) bool
	// during, when set, runs inside each run, before it answers.
	during func(context.Context)

	mu        sync.Mutex
	runs      map[string]int
	succeeded map[string]int
	attempts  map[string][]int
	inFlight  map[string]bool
	overlaps  int
}

func newCountingApp(fail func(eventID string, run int) bool) *countingApp {
	return &countingApp{fail: fail, runs: map[string]int{}, succeeded: map[string]int{},
		attempts: map[string][]int{}, inFlight: map[string]bool{}}
}

func (a *countingApp) Process(ctx context.Context, d worker.Delivery) worker.Result {
	a.mu.Lock()
	if a.inFlight[d.EventID] {
		a.overlaps++
	}
	a.inFlight[d.EventID] = true
	a.runs[d.EventID]++
	run := a.runs[d.EventID]
	a.attempts[d.EventID] = append(a.attempts[d.EventID], d.Attempt)
	a.mu.Unlock()

	if a.during != nil {
		a.during(ctx)
	}
	failed := a.fail != nil && a.fail(d.EventID, run)
	a.mu.Lock()
	delete(a.inFlight, d.EventID)
	if !failed {
		a.succeeded[d.EventID]++
	}
	a.mu.Unlock()
	if failed {
		return worker.Result{Err: fmt.Errorf("downstream answered 503: starting up"), HTTPStatus: 503}
	}
	return worker.Result{HTTPStatus: 200}
}

func (a *countingApp) attemptsOf(eventID string) []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.attempts[eventID]
}

// check fails t unless the app saw events events, never two runs of one
// at once, each succeeding exactly once in runs runs (any number: -1).
func (a *countingApp) check(t *testing.T, events, runs int) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.overlaps != 0 {
		t.Errorf("overlapping runs of one event: got %d, want 0", a.overlaps)
	}
	if len(a.runs) != events || len(a.succeeded) != events {
		t.Errorf("events run: got %d, %d of them succeeded; want %d, all", len(a.runs), len(a.succeeded), events)
	}
	for id, n := range a.succeeded {
		if n != 1 {
			t.Errorf("%s succeeded %d times, want 1", id, n)
		}
	}
	if runs < 0 {
		return
	}
	for id, n := range a.runs {
		if n != runs {
			t.Errorf("%s run %d times, want %d", id, n, runs)
		}
	}
}
