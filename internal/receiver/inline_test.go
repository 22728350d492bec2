package receiver_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

func TestReceive_BusyAppDefersToTheQueue(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	const slots, events = 2, 20
	p := newBlockingProcessor()
	p.started = make(chan string, events)
	r := receiver.New(store, discardLogger, receiver.Config{
		Secrets: []string{testSecret}, Processor: p, InlineConcurrency: slots,
	})
	deliver := func(body []byte) (receiver.Outcome, error) {
		return r.Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now()))
	}

	bodies := make(map[string][]byte, events)
	for range events {
		id := stripeevent.NewID("evt")
		bodies[id] = stripeevent.Minimal(id, "invoice.paid")
	}
	// Every event at once, while the app holds each one it gets.
	type answer struct {
		id      string
		outcome receiver.Outcome
		err     error
	}
	answers := make(chan answer, events)
	var wg sync.WaitGroup
	for id, body := range bodies {
		wg.Go(func() {
			o, err := deliver(body)
			answers <- answer{id, o, err}
		})
	}
	deferred := map[string]bool{}
	for range events - slots {
		a := <-answers
		if a.err != nil || a.outcome != receiver.Deferred {
			t.Fatalf("%s: got %v, %v while the app held %d; want Deferred", a.id, a.outcome, a.err, slots)
		}
		deferred[a.id] = true
	}
	inFlight := map[string]bool{}
	for range slots {
		inFlight[<-p.started] = true
	}
	if len(deferred) != events-slots || len(inFlight) != slots {
		t.Fatalf("deferred %d, in flight %d; want %d and %d", len(deferred), len(inFlight), events-slots, slots)
	}

	// A deferred event waits at once, with no attempt made.
	var n int64
	if err := bundle.pool.QueryRow(t.Context(), `
		SELECT count(*) FROM webhook_events
		WHERE status = 'failed' AND attempts = 0 AND next_retry_at <= now() AND last_attempt_at IS NULL
		  AND last_error LIKE 'deferred: the app was busy%'`).Scan(&n); err != nil || n != events-slots {
		t.Fatalf("deferred rows: got %d, %v; want %d, due now, attempts 0, saying why", n, err, events-slots)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts`); n != 0 {
		t.Errorf("%d attempts recorded while the app held every slot, want 0", n)
	}
	// Dedup and the lock still apply.
	for id := range deferred {
		if o, err := deliver(bodies[id]); err != nil || o != receiver.AlreadyQueued {
			t.Errorf("redelivery of deferred %s: got %v, %v; want AlreadyQueued", id, o, err)
		}
		break
	}
	for id := range inFlight {
		if _, err := deliver(bodies[id]); !errors.Is(err, queue.ErrEventLocked) {
			t.Errorf("redelivery of in-flight %s: got %v, want ErrEventLocked", id, err)
		}
		break
	}

	close(p.release)
	wg.Wait()
	close(answers)
	for a := range answers {
		if a.err != nil || a.outcome != receiver.Processed {
			t.Errorf("in-flight %s: got %v, %v; want Processed once the app answered", a.id, a.outcome, a.err)
		}
	}
	if n, err := worker.NewRetrier(store, discardLogger, worker.ProducerConfig{Processor: p, BatchSize: events}).RunBatch(t.Context()); err != nil || n != events-slots {
		t.Fatalf("retry loop: claimed %d, %v; want the %d deferred", n, err, events-slots)
	}
	if q, m := bundle.queued(t), queuetest.Markers(t, bundle.pool); q != 0 || m != events {
		t.Errorf("queue rows %d, markers %d; want 0, %d", q, m, events)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range bodies {
		if p.runs[id] != 1 {
			t.Errorf("%s reached the app %d times, want 1", id, p.runs[id])
		}
	}
}
