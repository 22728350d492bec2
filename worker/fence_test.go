package worker_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

// A replica whose beats cannot reach the database for longer than
// FenceAfter (here: hookd_replicas locked for 7 s, every beat waiting on
// it) fences itself. It then starts nothing: a run it had claimed but not
// begun is given back uncounted, as is one the fence cuts short, so no
// attempt is recorded of a call the app never received. 400 due events run
// at the retry loop's default concurrency meanwhile.
func TestRetrier_AFencedReplicaChargesNoAttemptTheAppNeverSaw(t *testing.T) {
	t.Parallel()
	const events = 400
	bundle := setup(t)
	for range events {
		queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{})
	}
	var mu sync.Mutex
	received := map[string]int{}
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received[r.Header.Get("Hookd-Event-Id")]++
		mu.Unlock()
		// The app's own latency: the 400 runs take longer than the
		// fence takes to come, so runs start after it too.
		time.Sleep(1500 * time.Millisecond)
	}))
	t.Cleanup(app.Close)
	fwd, err := worker.NewForwarder(app.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	// The replica's own pool, as a process has.
	own, err := pgxpool.New(t.Context(), bundle.pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(own.Close)
	store := queue.New(own, queue.WithReplica(uuid.New()))
	hb := worker.NewHeartbeat(store, discardLogger)
	if err := hb.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = hb.Run(ctx) })
	r := worker.NewRetrier(store, discardLogger, worker.ProducerConfig{
		Processor: fwd, Interval: 50 * time.Millisecond, Heartbeat: hb})
	wg.Go(func() { _ = r.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	appGot := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(received)
	}
	queuetest.WaitFor(t, 60*time.Second, "the app to receive its first calls", func() bool { return appGot() >= 20 })
	tx, err := bundle.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `LOCK TABLE hookd_replicas IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	queuetest.WaitFor(t, 2*queue.ReplicaSilence, "the replica to fence itself", func() bool {
		bound, unbind := hb.Bind(context.Background())
		defer unbind()
		return bound.Err() != nil
	})
	// The scenario's own length: the lock is held 7 s in all.
	time.Sleep(7*time.Second - queue.FenceAfter)
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Every event has run once since, processed or waiting to retry, and
	// nothing is leased.
	queuetest.WaitFor(t, 120*time.Second, "every event run and no lease held", func() bool {
		return queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE status = 'failed'`) == 0 &&
			queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_leases`) == 0
	})

	rows, err := bundle.pool.Query(t.Context(), `SELECT event_id, count(*) FROM webhook_attempts GROUP BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	attempts := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		attempts[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range attempts {
		if got := received[id]; n > got {
			t.Errorf("%s: %d attempts recorded, the app received %d calls", id, n, got)
		}
	}
}

// fencedRig is one replica's retry loop and heartbeat on a pool of its
// own, as a process has, and the means to fence it: hookd_replicas locked
// from the test's pool, so that its beats wait until FenceAfter passes.
type fencedRig struct {
	t    *testing.T
	pool *pgxpool.Pool
	hb   *worker.Heartbeat
}

func newFencedRig(t *testing.T, pool *pgxpool.Pool, proc worker.Processor) *fencedRig {
	own, err := pgxpool.New(t.Context(), pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(own.Close)
	store := queue.New(own, queue.WithReplica(uuid.New()))
	hb := worker.NewHeartbeat(store, discardLogger)
	if err := hb.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = hb.Run(ctx) })
	r := worker.NewRetrier(store, discardLogger, worker.ProducerConfig{Processor: proc, Interval: 50 * time.Millisecond,
		Heartbeat: hb})
	wg.Go(func() { _ = r.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &fencedRig{t: t, pool: pool, hb: hb}
}

// fence holds hookd_replicas locked until the replica has fenced itself,
// then lets its beats through.
func (f *fencedRig) fence() {
	t := f.t
	tx, err := f.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(t.Context(), `LOCK TABLE hookd_replicas IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	queuetest.WaitFor(t, 2*queue.ReplicaSilence, "the replica to fence itself", func() bool {
		bound, unbind := f.hb.Bind(context.Background())
		defer unbind()
		return bound.Err() != nil
	})
}

// An event whose run the fence stops is given back uncounted; the second
// time, it becomes a suspect and runs alone next, where a stop is charged.
// Three events the app holds until the fence cuts them short, twice: after
// the first fence each has one cut counted and none is a suspect; after the
// second each has two and is a suspect, with one uncharged interruption. A
// third fence stops the first suspect's run alone: it is charged one
// attempt (FencedFormat). Then, the app answering, each runs alone, is
// processed and cleared; the history holds the three successes and that
// one charged attempt.
func TestRetrier_AnEventTheFenceCutsTwiceBecomesASuspect(t *testing.T) {
	t.Parallel()
	const events = 3
	bundle := setup(t)
	ids := make([]string, events)
	for i := range ids {
		ids[i] = queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{}).EventID
	}
	var mu sync.Mutex
	received := map[string]int{}
	// The app holds every call until the fence cancels it, or until
	// answer is closed.
	answer := make(chan struct{})
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received[r.Header.Get("Hookd-Event-Id")]++
		mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-answer:
		}
	}))
	t.Cleanup(app.Close)
	arrivals := func(want int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				if received[id] != want {
					return false
				}
			}
			return true
		}
	}
	fwd, err := worker.NewForwarder(app.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	rig := newFencedRig(t, bundle.pool, fwd)
	count := func(sql string) int64 { return queuetest.Count(t, bundle.pool, sql, ids) }
	cuts := func(n int) string {
		return `SELECT count(*) FROM webhook_fence_cuts WHERE event_id = ANY ($1) AND cuts = ` + strconv.Itoa(n)
	}

	queuetest.WaitFor(t, time.Minute, "each event's first run in the app", arrivals(1))
	rig.fence()
	queuetest.WaitFor(t, time.Minute, "the runs the fence stopped given back, each cut counted", func() bool {
		return count(cuts(1)) == events
	})
	if n := count(`SELECT count(*) FROM webhook_events WHERE event_id = ANY ($1) AND attempts = 0`); n != events {
		t.Errorf("after one fence: %d events still at no attempt, want %d", n, events)
	}
	if n := count(`SELECT count(*) FROM webhook_suspects WHERE event_id = ANY ($1)`); n != 0 {
		t.Errorf("after one fence: %d suspects, want none", n)
	}
	if n := count(`SELECT count(*) FROM webhook_attempts WHERE event_id = ANY ($1)`); n != 0 {
		t.Errorf("after one fence: %d attempts recorded, want none", n)
	}

	queuetest.WaitFor(t, time.Minute, "each event's second run in the app", arrivals(2))
	rig.fence()
	queuetest.WaitFor(t, time.Minute, "the second cuts counted", func() bool { return count(cuts(2)) == events })
	if n := count(`SELECT count(*) FROM webhook_suspects WHERE event_id = ANY ($1)
		AND path = 'retry' AND interruptions = 1 AND crashes = 0 AND cleared_at IS NULL`); n != events {
		t.Errorf("after two fences: %d suspects with one uncharged interruption, want %d", n, events)
	}
	if n := count(`SELECT count(*) FROM webhook_attempts WHERE event_id = ANY ($1)`); n != 0 {
		t.Errorf("after two fences: %d attempts recorded, want none", n)
	}

	// A suspect's run alone that the fence stops was the only run: it is
	// charged one attempt.
	var alone string
	queuetest.WaitFor(t, time.Minute, "a suspect's run alone in the app", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			if received[id] == 3 {
				alone = id
				return true
			}
		}
		return false
	})
	rig.fence()
	stalled := strings.Replace(queue.FencedFormat, "%s", "1", 1)
	queuetest.WaitFor(t, time.Minute, "the run alone the fence stopped charged", func() bool {
		return queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects WHERE event_id = $1 AND crashes = 1
			AND cleared_at IS NULL`, alone) == 1
	})
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE event_id = $1 AND attempts = 1
		AND last_error = $2`, alone, stalled); n != 1 {
		t.Errorf("the suspect the fence stopped alone is not charged one attempt with %q", stalled)
	}

	close(answer)
	queuetest.WaitFor(t, time.Minute, "every event processed", func() bool {
		return count(`SELECT count(*) FROM processed_webhook_events WHERE event_id = ANY ($1)`) == events
	})
	if n := count(`SELECT count(*) FROM webhook_suspects WHERE event_id = ANY ($1)
		AND cleared_at IS NOT NULL AND ran_alone_at IS NOT NULL`); n != events {
		t.Errorf("%d suspects ran alone and were cleared, want %d", n, events)
	}
	if n := count(`SELECT count(*) FROM webhook_suspects WHERE event_id = ANY ($1) AND crashes <> 0`); n != 1 {
		t.Errorf("%d suspects charged, want 1", n)
	}
	if n := count(`SELECT count(*) FROM webhook_attempts WHERE event_id = ANY ($1) AND outcome = 'succeeded'`); n != events {
		t.Errorf("%d successes recorded, want %d", n, events)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts WHERE event_id = $1 AND outcome = 'failed'
		AND attempt = 1 AND path = 'retry' AND error = $2`, alone, stalled); n != 1 {
		t.Errorf("the stopped run alone is not in the history as attempt 1, %q", stalled)
	}
	if n := count(`SELECT count(*) FROM webhook_attempts WHERE event_id = ANY ($1) AND outcome <> 'succeeded'`); n != 1 {
		t.Errorf("%d failed attempts recorded, want the 1 the fence stopped alone", n)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		want := 3
		if id == alone {
			want = 4
		}
		if received[id] != want {
			t.Errorf("%s reached the app %d times, want %d", id, received[id], want)
		}
	}
}
