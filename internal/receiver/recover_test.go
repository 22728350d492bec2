package receiver_test

import (
	"testing"
	"time"

	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue/queuetest"
)

// TestRecover_TakesNoInlineSlot: while every inline slot is held by a
// delivery Stripe waits for, a recovered event is still processed, and
// recorded as recovered, rather than deferred.
func TestRecover_TakesNoInlineSlot(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	p := newBlockingProcessor()
	r := receiver.New(store, discardLogger, receiver.Config{
		Secrets: []string{testSecret}, Processor: p, InlineConcurrency: 1,
	})
	held := stripeevent.NewID("evt")
	body := stripeevent.Minimal(held, "invoice.paid")
	delivered := make(chan error, 1)
	go func() {
		_, err := r.Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now()))
		delivered <- err
	}()
	if got := <-p.started; got != held {
		t.Fatalf("the app got %s first, want the delivery %s", got, held)
	}

	recovered := stripeevent.NewID("evt")
	done := make(chan error, 1)
	var outcome receiver.Outcome
	go func() {
		var err error
		outcome, err = r.RecoverThrough(t.Context(), endpoint.DefaultLabel, stripeevent.Minimal(recovered, "invoice.paid"))
		done <- err
	}()
	if got := <-p.started; got != recovered {
		t.Fatalf("the app got %s, want the recovered %s", got, recovered)
	}
	close(p.release)
	if err := <-done; err != nil || outcome != receiver.Processed {
		t.Fatalf("recover: got %v, %v; want processed", outcome, err)
	}
	if err := <-delivered; err != nil {
		t.Fatal(err)
	}
	if got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts WHERE event_id = $1 AND path = 'reconcile' AND outcome = 'succeeded'`, recovered); got != 1 {
		t.Errorf("reconcile attempts: got %d, want 1", got)
	}
	if got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events`); got != 0 {
		t.Errorf("queue rows: got %d, want none deferred", got)
	}
}
