package receiver_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

// A replica whose own beats stop getting through (a loaded machine, the
// database just back) fences itself, but its deliveries still commit: each
// exchange then carries a beat, so the lease it takes is granted on a beat
// the replica knows of, the replica runs again, and the event is processed
// inline once instead of being cancelled as it starts and queued with an
// attempt the app never saw.
func TestReceive_AFencedReplicaWhoseDeliveriesCommitBeatsThroughThem(t *testing.T) {
	t.Parallel()
	_, bundle := setup(t)
	store := queue.New(bundle.pool, queue.WithReplica(uuid.New()))
	// Registered, then never beating: as if every beat of its own failed.
	hb := worker.NewHeartbeat(store, discardLogger)
	if err := hb.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	queuetest.WaitFor(t, 2*queue.ReplicaSilence, "the replica to fence itself", func() bool {
		run, unbind := hb.Bind(context.Background())
		defer unbind()
		return run.Err() != nil
	})
	// And the database no longer grants a lease on its last beat.
	queuetest.WaitFor(t, 2*queue.ReplicaSilence, "the replica's last beat to be too old for a lease", func() bool {
		return queuetest.Count(t, bundle.pool, `SELECT count(*) FROM hookd_replicas WHERE id = $1 AND beat_at > now() - $2::interval`,
			store.Replica(), queue.FenceAfter.String()) == 0
	})

	// A run, like a forward to the app, fails once its context is done.
	var runs atomic.Int64
	p := worker.ProcessorFunc(func(ctx context.Context, _ worker.Delivery) worker.Result {
		if err := ctx.Err(); err != nil {
			return worker.Result{Err: context.Cause(ctx)}
		}
		runs.Add(1)
		return worker.Result{HTTPStatus: 200}
	})
	r := receiver.New(store, discardLogger, receiver.Config{
		Secrets: []string{testSecret}, Processor: p, Heartbeat: hb,
	})
	var before time.Time
	if err := bundle.pool.QueryRow(t.Context(), `SELECT now()`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	body := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
	got, err := r.Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now()))
	if err != nil || got != receiver.Processed {
		t.Fatalf("delivery to a fenced replica that reaches the database: got %v, %v; want %v", got, err, receiver.Processed)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("processor runs: got %d, want 1", n)
	}
	if n := queuetest.Markers(t, bundle.pool); n != 1 {
		t.Errorf("markers: got %d, want 1", n)
	}
	if n := bundle.queued(t); n != 0 {
		t.Errorf("queue rows: got %d, want 0", n)
	}
	// The beat the delivery carried is the database's and the replica's.
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM hookd_replicas WHERE id = $1 AND beat_at >= $2`,
		store.Replica(), before); n != 1 {
		t.Errorf("replica rows with a beat from the delivery: got %d, want 1", n)
	}
	run, unbind := hb.Bind(context.Background())
	defer unbind()
	if run.Err() != nil {
		t.Errorf("a run bound after the delivery's beat: %v, want it running", context.Cause(run))
	}
}

// While the database grants no lease (here: it lost its unlogged lease
// tables, as crash recovery and a promoted standby do, and the grace after
// has not passed), an event the database has never seen needs no lease to
// be queued: it is queued unprocessed and answered 200, and runs once
// leases are granted again. An event with a lease on it is answered that
// its lease cannot be taken yet, not that another delivery holds it: the
// operator reading the 503s and the metrics must not go looking for one.
// (Before, every delivery in the grace was answered 503.)
func TestReceive_NoLeaseGrantedQueuesANewEvent(t *testing.T) {
	t.Parallel()
	_, bundle := setup(t)
	store := queue.New(bundle.pool, queue.WithReplica(uuid.New()))
	if err := store.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := bundle.pool.Exec(t.Context(), `TRUNCATE webhook_leases, hookd_replicas, lease_epoch`); err != nil {
		t.Fatal(err)
	}
	p := &countingProcessor{}
	r := newReceiver(store, p)
	body := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
	got, err := r.Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now()))
	if err != nil || got != receiver.Deferred {
		t.Fatalf("a new event no lease can be granted for: got %v, %v; want %v", got, err, receiver.Deferred)
	}
	if n := p.runs.Load(); n != 0 {
		t.Errorf("processor runs: got %d, want 0", n)
	}
	if n := bundle.queued(t); n != 1 {
		t.Errorf("queue rows: got %d, want 1", n)
	}
	if n := queuetest.Markers(t, bundle.pool); n != 0 {
		t.Errorf("markers: got %d, want 0", n)
	}
	// Its redelivery is answered from its state.
	got, err = r.Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now()))
	if err != nil || got != receiver.AlreadyQueued {
		t.Fatalf("its redelivery: got %v, %v; want %v", got, err, receiver.AlreadyQueued)
	}

	leased := stripeevent.NewID("evt")
	if _, err := bundle.pool.Exec(t.Context(), `
		INSERT INTO webhook_leases (event_id, owner, path, expires_at) VALUES ($1, gen_random_uuid(), 'inline', now() + interval '1 minute')`,
		leased); err != nil {
		t.Fatal(err)
	}
	body = stripeevent.Minimal(leased, "invoice.paid")
	got, err = r.Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now()))
	if !errors.Is(err, queue.ErrNotGranted) || errors.Is(err, queue.ErrEventLocked) {
		t.Fatalf("a leased event no lease can be granted for: got %v, %v; want ErrNotGranted", got, err)
	}
	if n := p.runs.Load(); n != 0 {
		t.Errorf("processor runs: got %d, want 0", n)
	}
	if n := bundle.queued(t); n != 1 {
		t.Errorf("queue rows after the leased event: got %d, want 1", n)
	}
}
