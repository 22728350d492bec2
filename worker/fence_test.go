package worker_test

import (
	"context"
	"net/http"
	"net/http/httptest"
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
