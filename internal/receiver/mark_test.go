package receiver_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/store/ungenerated"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/internal/stripehealth"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

// countLeaseTakes makes the test's database count every lease ever taken,
// in a table of its own: a lease is deleted when it is given back, so only
// a trigger sees one that came and went.
func countLeaseTakes(t *testing.T, b *testBundle) func() int64 {
	t.Helper()
	if _, err := b.pool.Exec(t.Context(), `
		CREATE TABLE lease_takes (event_id text NOT NULL);
		CREATE FUNCTION count_lease_take() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO lease_takes VALUES (NEW.event_id); RETURN NEW; END $$;
		CREATE TRIGGER count_lease_take AFTER INSERT OR UPDATE ON webhook_leases
		FOR EACH ROW EXECUTE FUNCTION count_lease_take()`); err != nil {
		t.Fatal(err)
	}
	return func() int64 { return queuetest.Count(t, b.pool, `SELECT count(*) FROM lease_takes`) }
}

// Under the discard processor no delivery calls an app, so none has a run
// for a lease to keep to one at a time: a new event's marker, with its
// event log entry, is written without one, and its redelivery reads it.
func TestReceive_DiscardMarksWithoutALease(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	takes := countLeaseTakes(t, bundle)
	r := newReceiver(store, worker.Discard)
	id := stripeevent.NewID("evt")
	body := stripeevent.Minimal(id, "invoice.paid")
	for i, want := range []receiver.Outcome{receiver.Processed, receiver.Duplicate} {
		got, err := r.Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now()))
		if err != nil || got != want {
			t.Fatalf("delivery %d: %v, %v; want %v", i, got, err, want)
		}
	}
	if n := takes(); n != 0 {
		t.Errorf("%d leases taken, want none", n)
	}
	if got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM processed_webhook_events
		WHERE event_id = '`+id+`' AND processed_how = 'inline' AND payload IS NOT NULL`); got != 1 {
		t.Errorf("markers with their event log entry: %d, want 1", got)
	}
}

// Many deliveries of one event at once, under the discard processor: one
// writes its marker and is answered processed, every other one is answered
// as its duplicate, and the event has one marker.
func TestReceive_ConcurrentDiscardedDeliveriesMarkOnce(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	r := newReceiver(store, worker.Discard)
	const deliveries = 64
	for round := range 5 {
		id := stripeevent.NewID("evt")
		body := stripeevent.Minimal(id, "invoice.paid")
		var wg sync.WaitGroup
		var mu sync.Mutex
		outcomes := map[receiver.Outcome]int{}
		var errs []error
		for range deliveries {
			wg.Go(func() {
				got, err := r.Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now()))
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				outcomes[got]++
			})
		}
		wg.Wait()
		if len(errs) > 0 || outcomes[receiver.Processed] != 1 || outcomes[receiver.Duplicate] != deliveries-1 {
			t.Fatalf("round %d: outcomes %v, errors %v; want 1 processed and %d duplicates", round, outcomes, errs, deliveries-1)
		}
		if got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM processed_webhook_events WHERE event_id = '`+id+`'`); got != 1 {
			t.Fatalf("round %d: %d markers, want 1", round, got)
		}
	}
}

// A delivery that needs no lease still finds one that is on its event: a
// live lease (a retry of the event in the app on another replica, say)
// answers it busy and writes nothing; a lease whose run started and never
// reported is taken over, and the event queued as a suspect, uncharged.
func TestReceive_DiscardFindsALeaseOnItsEvent(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	r := newReceiver(store, worker.Discard)

	live := stripeevent.NewID("evt")
	if _, err := store.TryLease(t.Context(), live, queue.PathRetry, time.Minute); err != nil {
		t.Fatal(err)
	}
	body := stripeevent.Minimal(live, "invoice.paid")
	if got, err := r.Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now())); !errors.Is(err, queue.ErrEventLocked) {
		t.Errorf("a delivery while another path holds the lease: %v, %v; want ErrEventLocked", got, err)
	}
	if got := queuetest.Markers(t, bundle.pool); got != 0 {
		t.Errorf("markers = %d, want none while the lease is held", got)
	}

	crashed := stripeevent.NewID("evt")
	if _, err := store.TryLease(t.Context(), crashed, queue.PathInline, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := bundle.pool.Exec(t.Context(), `UPDATE webhook_leases SET expires_at = now() - interval '1 second'
		WHERE event_id = $1`, crashed); err != nil {
		t.Fatal(err)
	}
	body = stripeevent.Minimal(crashed, "invoice.paid")
	got, err := r.Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now()))
	if err != nil || got != receiver.Queued {
		t.Fatalf("a delivery after a run that never reported: %v, %v; want queued, a suspect", got, err)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts WHERE event_id = '`+crashed+`'`); n != 0 {
		t.Errorf("%d attempts recorded, want none: the run cut short is charged to no one", n)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects
		WHERE event_id = '`+crashed+`' AND path = 'inline' AND interruptions = 1 AND crashes = 0`); n != 1 {
		t.Errorf("the event whose inline run never reported is not a suspect")
	}
}

// Stripe's notice that it could not generate an event is kept by hookd
// whatever the processor: under the discard processor it is still run,
// under its lease, while every other event is marked without one.
func TestReceive_DiscardStillKeepsStripesNotices(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	takes := countLeaseTakes(t, bundle)
	r := newReceiver(store, stripehealth.Processor(worker.Discard, ungenerated.New(bundle.pool)))

	paid := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
	notice := stripeevent.NewID("evt")
	lost := stripeevent.GenerationFailure(notice)
	for _, body := range [][]byte{paid, lost} {
		if got, err := r.Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now())); err != nil || got != receiver.Processed {
			t.Fatalf("delivery: %v, %v; want processed", got, err)
		}
	}
	if n := takes(); n != 1 {
		t.Errorf("%d leases taken, want 1: the notice's", n)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM stripe_generation_failures`); n != 1 {
		t.Errorf("%d notices kept, want 1", n)
	}
}
