package receiver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/internal/telemetry"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

// gatedProcessor holds each event it gets until its event's gate opens,
// counts its runs per event, and fails the events marked failing.
type gatedProcessor struct {
	mu      sync.Mutex
	runs    map[string]int
	gates   map[string]chan struct{}
	started atomic.Int64
}

func newGatedProcessor() *gatedProcessor {
	return &gatedProcessor{runs: map[string]int{}, gates: map[string]chan struct{}{}}
}

// gate makes the processor hold id until the returned channel is closed.
func (p *gatedProcessor) gate(id string) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := make(chan struct{})
	p.gates[id] = g
	return g
}

func (p *gatedProcessor) Process(ctx context.Context, d worker.Delivery) worker.Result {
	p.mu.Lock()
	p.runs[d.EventID]++
	g := p.gates[d.EventID]
	p.mu.Unlock()
	p.started.Add(1)
	if g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return worker.Result{Err: ctx.Err()}
		}
	}
	return worker.Result{HTTPStatus: 200}
}

func (p *gatedProcessor) runsOf(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runs[id]
}

type received struct {
	id      string
	outcome receiver.Outcome
	err     error
}

func deliver(r *receiver.Receiver, id string, answers chan<- received) {
	body := stripeevent.Minimal(id, "invoice.paid")
	o, err := r.Receive(context.Background(), body, stripeevent.Sign(body, testSecret, time.Now()))
	answers <- received{id, o, err}
}

// One delivery whose write fails is grouped with 15 good ones in one
// transaction of outcomes: the 15 get their normal answer and reach the app
// exactly once, and only the poisoned one is answered 503. Its outcome is
// written once the database takes it, so its redelivery runs nothing.
func TestReceive_PoisonInAGroupChangesNoOtherOutcome(t *testing.T) {
	t.Parallel()
	groupWithOneBadWrite(t, `RAISE EXCEPTION 'poisoned write'`, nil, func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "poisoned write")
	}, true)
}

// One delivery whose write hangs (its marker's insert waits on a lock that
// something else holds) is grouped with 15 good ones: the group's
// transaction runs out of time, and each delivery is written alone with
// time of its own, so the 15 are still answered processed, reaching the
// app once, and only the stuck one is answered 503. Its write outlasted its
// lease, as it would have alone, so its run was cut short: its redelivery
// takes the lease over and queues the event as a suspect, charged nothing,
// which the retry loop runs again alone.
func TestReceive_StuckWriteInAGroupChangesNoOtherOutcome(t *testing.T) {
	t.Parallel()
	groupWithOneBadWrite(t, `PERFORM pg_advisory_lock(4343); PERFORM pg_advisory_unlock(4343)`, func(lock *pgxpool.Conn) {
		if _, err := lock.Exec(t.Context(), `SELECT pg_advisory_lock(4343)`); err != nil {
			t.Fatal(err)
		}
	}, func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }, false)
}

// groupWithOneBadWrite delivers 16 events whose outcomes are written in one
// group, where the marker insert of the first runs badAction (PL/pgSQL),
// and checks that only that one's answer is an error, which isBadErr
// accepts: the other 15 are processed, each reaching the app once. Then the
// bad action is gone: when landsLater, the bad delivery's outcome lands by
// itself and its redelivery finds it; otherwise its lease ran out before
// its write could, and its redelivery queues it as a suspect, charged
// nothing, for the retry loop to run again alone. hold, when set, runs
// on the test's connection before the group meets the bad write, for
// badAction to wait on.
//
// The group is made, not hoped for: the 16 outcomes wait for the database
// while a 17th delivery's outcome is held there (its marker's insert waits
// for an advisory lock the test holds), and are let go together.
func groupWithOneBadWrite(t *testing.T, badAction string, hold func(*pgxpool.Conn), isBadErr func(error) bool, landsLater bool) {
	store, bundle := setup(t)
	ctx := t.Context()
	const good = 15
	bad, holder := stripeevent.NewID("evt"), stripeevent.NewID("evt")
	if _, err := bundle.pool.Exec(ctx, fmt.Sprintf(`
		CREATE FUNCTION test_bad_write() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.event_id = '%s' THEN %s; END IF;
			IF NEW.event_id = '%s' THEN PERFORM pg_advisory_lock(4242); PERFORM pg_advisory_unlock(4242); END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER test_bad_write BEFORE INSERT ON processed_webhook_events
			FOR EACH ROW EXECUTE FUNCTION test_bad_write()`, bad, badAction, holder)); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	p := newGatedProcessor()
	r := receiver.New(store, discardLogger, receiver.Config{
		Secrets: []string{testSecret}, Processor: p, ProcessTimeout: time.Second,
		Metrics: telemetry.NewMetrics(reg, nil),
		// The held group must hold up the 16 until they are let go.
		StallAfter: time.Hour,
	})
	waiting := func() int { return int(gaugeOf(t, reg, "hookd_receiver_waiting_deliveries")) }

	ids := []string{bad}
	for range good {
		ids = append(ids, stripeevent.NewID("evt"))
	}
	gates := map[string]chan struct{}{}
	for _, id := range ids {
		gates[id] = p.gate(id)
	}
	answers := make(chan received, len(ids)+1)
	for _, id := range ids {
		go deliver(r, id, answers)
	}
	queuetest.WaitFor(t, 10*time.Second, "all 16 in the app", func() bool { return p.started.Load() == int64(len(ids)) })

	// Advisory locks belong to a database: the locks are taken in the test's.
	lock, err := bundle.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	if _, err := lock.Exec(ctx, `SELECT pg_advisory_lock(4242)`); err != nil {
		t.Fatal(err)
	}
	if hold != nil {
		hold(lock)
	}
	go deliver(r, holder, answers)
	queuetest.WaitFor(t, 10*time.Second, "the holder's outcome to wait at the database", func() bool {
		return queuetest.Count(t, bundle.pool, `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted
			  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`) == 1
	})
	for _, g := range gates {
		close(g)
	}
	queuetest.WaitFor(t, 10*time.Second, "the 16 outcomes to wait together", func() bool { return waiting() == len(ids) })
	if _, err := lock.Exec(ctx, `SELECT pg_advisory_unlock(4242)`); err != nil {
		t.Fatal(err)
	}

	for range len(ids) + 1 {
		a := <-answers
		switch {
		case a.id == bad:
			if !isBadErr(a.err) {
				t.Errorf("the delivery with the bad write: %v, %v; want its own write's error", a.outcome, a.err)
			}
		case a.err != nil || a.outcome != receiver.Processed:
			t.Errorf("%s: %v, %v; want processed", a.id, a.outcome, a.err)
		}
	}
	for _, id := range ids {
		if n := p.runsOf(id); n != 1 {
			t.Errorf("%s reached the app %d times, want 1", id, n)
		}
	}
	if n := queuetest.Markers(t, bundle.pool); n != good+1 {
		t.Errorf("markers %d, want the %d good ones and the holder's", n, good+1)
	}

	if _, err := bundle.pool.Exec(ctx, `DROP TRIGGER test_bad_write ON processed_webhook_events`); err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, `SELECT pg_advisory_unlock_all()`); err != nil {
		t.Fatal(err)
	}
	want := receiver.Duplicate
	if landsLater {
		queuetest.WaitFor(t, 20*time.Second, "the bad delivery's outcome", func() bool { return queuetest.Markers(t, bundle.pool) == good+2 })
	} else {
		want = receiver.Queued
	}
	go deliver(r, bad, answers)
	if a := <-answers; a.err != nil || a.outcome != want {
		t.Errorf("redelivery of the event with the bad write: %v, %v; want %v", a.outcome, a.err, want)
	}
	if n := p.runsOf(bad); n != 1 {
		t.Errorf("the event with the bad write reached the app %d times, want 1", n)
	}
	if landsLater {
		return
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects
		WHERE event_id = $1 AND path = 'inline' AND interruptions = 1 AND crashes = 0`, bad); n != 1 {
		t.Errorf("the event with the bad write, whose run never reported, is not a suspect charged nothing")
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events`); n != 1 {
		t.Fatalf("%d queue rows; want the event waiting for its first retry", n)
	}
	if _, err := bundle.pool.Exec(ctx, `UPDATE webhook_events SET next_retry_at = now()`); err != nil {
		t.Fatal(err)
	}
	retrier := worker.NewRetrier(store, discardLogger, worker.ProducerConfig{Processor: p})
	if n, err := retrier.RunBatch(ctx); err != nil || n != 0 {
		t.Fatalf("retry batch: claimed %d, %v; want none: the suspect runs alone", n, err)
	}
	if n, err := retrier.RunSuspects(ctx); err != nil || n != 1 {
		t.Fatalf("suspects: ran %d, %v; want the event", n, err)
	}
	if n := p.runsOf(bad); n != 2 || queuetest.Markers(t, bundle.pool) != good+2 {
		t.Errorf("after its retry the event reached the app %d times with %d markers; want 2 and %d", n,
			queuetest.Markers(t, bundle.pool), good+2)
	}
}

// gaugeOf reads the gauge name from reg.
func gaugeOf(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// A delivery waits only for its own processor and its own short
// transactions: with 10 slow events held in the app, 90 fast ones
// delivered beside them are all answered, processed, while the slow ones
// are still held. (make bench-load measures the fast ones' latency.)
func TestReceive_NoHeadOfLineBlocking(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	p := newGatedProcessor()
	r := newReceiver(store, p)
	const slow, fast = 10, 90
	var held []chan struct{}
	answers := make(chan received, slow+fast)
	for range slow {
		id := stripeevent.NewID("evt")
		held = append(held, p.gate(id))
		go deliver(r, id, answers)
	}
	queuetest.WaitFor(t, 10*time.Second, "the slow events in the app", func() bool { return p.started.Load() == slow })
	for range fast {
		go deliver(r, stripeevent.NewID("evt"), answers)
	}
	for range fast {
		if a := <-answers; a.err != nil || a.outcome != receiver.Processed {
			t.Errorf("%s behind slow ones: %v, %v; want processed", a.id, a.outcome, a.err)
		}
	}
	if n := queuetest.Markers(t, bundle.pool); n != fast {
		t.Errorf("markers %d while the slow events are held, want %d", n, fast)
	}
	for _, g := range held {
		close(g)
	}
	for range slow {
		if a := <-answers; a.err != nil || a.outcome != receiver.Processed {
			t.Errorf("slow %s: %v, %v; want processed", a.id, a.outcome, a.err)
		}
	}
}

// A delivery whose outcome's write is stuck at the database (its marker's
// insert waits on a lock something else holds) holds up no other
// delivery: those that reach the database behind it go on beside it once
// it stalls, are processed and answered while it still waits, and it is
// answered in turn once the lock is let go.
func TestReceive_StuckWriteHoldsUpNoOtherDelivery(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	ctx := t.Context()
	stuck := stripeevent.NewID("evt")
	if _, err := bundle.pool.Exec(ctx, fmt.Sprintf(`
		CREATE FUNCTION test_stuck_write() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.event_id = '%s' THEN PERFORM pg_advisory_lock(4444); PERFORM pg_advisory_unlock(4444); END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER test_stuck_write BEFORE INSERT ON processed_webhook_events
			FOR EACH ROW EXECUTE FUNCTION test_stuck_write()`, stuck)); err != nil {
		t.Fatal(err)
	}
	lock, err := bundle.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	if _, err := lock.Exec(ctx, `SELECT pg_advisory_lock(4444)`); err != nil {
		t.Fatal(err)
	}
	p := newGatedProcessor()
	r := newReceiver(store, p)
	answers := make(chan received, 1)
	go deliver(r, stuck, answers)
	queuetest.WaitFor(t, 10*time.Second, "the stuck outcome to wait at the database", func() bool {
		return queuetest.Count(t, bundle.pool, `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted
			  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`) == 1
	})
	// Few enough to be done well within the stuck write's 5 s on a loaded
	// machine: its answer must still be pending when theirs are in.
	const others = 8
	behind := make(chan received, others)
	for range others {
		go deliver(r, stripeevent.NewID("evt"), behind)
	}
	for range others {
		if a := <-behind; a.err != nil || a.outcome != receiver.Processed {
			t.Errorf("%s behind the stuck write: %v, %v; want processed", a.id, a.outcome, a.err)
		}
	}
	select {
	case a := <-answers:
		t.Fatalf("the stuck delivery was answered before its write could go on: %v, %v", a.outcome, a.err)
	default:
	}
	if _, err := lock.Exec(ctx, `SELECT pg_advisory_unlock(4444)`); err != nil {
		t.Fatal(err)
	}
	if a := <-answers; a.err != nil || a.outcome != receiver.Processed {
		t.Errorf("the stuck delivery, once let go: %v, %v; want processed", a.outcome, a.err)
	}
	if n := queuetest.Markers(t, bundle.pool); n != others+1 {
		t.Errorf("markers %d, want %d", n, others+1)
	}
}

// A delivery's lease outlasts its processor's deadline: when the app hangs
// past the timeout, the run is cut off before the lease could be taken
// over, so a redelivery racing it is busy, never a second run beside it.
func TestReceive_RedeliveryWhileTheAppRunsIsBusy(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	p := newGatedProcessor()
	r := newReceiver(store, p)
	id := stripeevent.NewID("evt")
	g := p.gate(id)
	answers := make(chan received, 2)
	go deliver(r, id, answers)
	queuetest.WaitFor(t, 10*time.Second, "the first delivery in the app", func() bool { return p.started.Load() == 1 })
	go deliver(r, id, answers)
	if a := <-answers; !errors.Is(a.err, queue.ErrEventLocked) {
		t.Errorf("redelivery while the app runs: %v, %v; want ErrEventLocked", a.outcome, a.err)
	}
	close(g)
	if a := <-answers; a.err != nil || a.outcome != receiver.Processed {
		t.Errorf("first delivery: %v, %v; want processed", a.outcome, a.err)
	}
	if n := p.runsOf(id); n != 1 {
		t.Errorf("app runs %d, want 1", n)
	}
}
