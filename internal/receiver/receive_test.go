package receiver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

func TestReceive(t *testing.T) {
	t.Parallel()

	t.Run("ProcessesOnceThenDuplicate", func(t *testing.T) {
		t.Parallel()
		store, bundle := setup(t)
		p := &countingProcessor{}
		r := newReceiver(store, p)
		body := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")

		for i, want := range []receiver.Outcome{receiver.Processed, receiver.Duplicate} {
			got, err := r.Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now()))
			if err != nil || got != want {
				t.Fatalf("delivery %d: got %v, %v; want %v", i, got, err, want)
			}
		}
		if got := p.runs.Load(); got != 1 {
			t.Errorf("processor runs: got %d, want 1", got)
		}
		if got := queuetest.Markers(t, bundle.pool); got != 1 {
			t.Errorf("markers: got %d, want 1", got)
		}
		// Processed on its first delivery: the marker is its whole record.
		if got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_attempts`); got != 0 {
			t.Errorf("attempt rows: got %d, want 0", got)
		}
	})

	t.Run("FailureQueuesOnceThenAlreadyQueued", func(t *testing.T) {
		t.Parallel()
		store, bundle := setup(t)
		p := &countingProcessor{}
		p.fail.Store(true)
		r := newReceiver(store, p)
		id := stripeevent.NewID("evt")
		body := stripeevent.Minimal(id, "invoice.paid")

		for i, want := range []receiver.Outcome{receiver.Queued, receiver.AlreadyQueued} {
			got, err := r.Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now()))
			if err != nil || got != want {
				t.Fatalf("delivery %d: got %v, %v; want %v", i, got, err, want)
			}
		}
		if got := p.runs.Load(); got != 1 {
			t.Errorf("processor runs: got %d, want 1", got)
		}
		var payload, lastErr string
		var status queue.Status
		if err := bundle.pool.QueryRow(t.Context(),
			`SELECT payload, last_error, status FROM webhook_events WHERE event_id = $1`, id).
			Scan(&payload, &lastErr, &status); err != nil {
			t.Fatalf("read queue row: %v", err)
		}
		if payload != string(body) || status != queue.StatusFailed || lastErr != "downstream answered 500: boom" {
			t.Errorf("queue row: got payload equal %v, status %s, last_error %q", payload == string(body), status, lastErr)
		}
		attempts, err := store.Attempts(t.Context(), queue.SourceStripe, id)
		if err != nil || len(attempts) != 1 || attempts[0].Succeeded || *attempts[0].HTTPStatus != 500 {
			t.Errorf("attempts: got %+v, %v; want one failed inline attempt with status 500", attempts, err)
		}
		if got := queuetest.Markers(t, bundle.pool); got != 0 {
			t.Errorf("markers: got %d, want 0", got)
		}
	})

	t.Run("DeadEventRedeliveredStaysDead", func(t *testing.T) {
		t.Parallel()
		store, bundle := setup(t)
		id := stripeevent.NewID("evt")
		queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: id, Status: queue.StatusDead, Attempts: queue.MaxAttempts})
		p := &countingProcessor{}
		body := stripeevent.Minimal(id, "invoice.paid")
		got, err := newReceiver(store, p).Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now()))
		if err != nil || got != receiver.AlreadyQueued {
			t.Fatalf("got %v, %v; want AlreadyQueued", got, err)
		}
		if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE event_id = $1 AND status = 'dead'`, id); n != 1 || p.runs.Load() != 0 {
			t.Errorf("dead rows: got %d, processor runs %d; want 1, 0", n, p.runs.Load())
		}
	})

	t.Run("AnyConfiguredSecretVerifies", func(t *testing.T) {
		t.Parallel()
		store, _ := setup(t)
		r := receiver.New(store, discardLogger, receiver.Config{
			Secrets: []string{"whsec_old", "whsec_new"},
		})
		for _, secret := range []string{"whsec_old", "whsec_new"} {
			body := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
			if got, err := r.Receive(t.Context(), body, stripeevent.Sign(body, secret, time.Now())); err != nil || got != receiver.Processed {
				t.Errorf("signed with %s: got %v, %v; want Processed", secret, got, err)
			}
		}
	})

	t.Run("PanickingProcessorQueuesTheEvent", func(t *testing.T) {
		t.Parallel()
		store, bundle := setup(t)
		r := newReceiver(store, worker.ProcessorFunc(func(context.Context, worker.Delivery) worker.Result {
			panic("handler bug")
		}))
		body := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
		if got, err := r.Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now())); err != nil || got != receiver.Queued {
			t.Fatalf("got %v, %v; want Queued", got, err)
		}
		if got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE last_error = 'processor panicked: handler bug'`); got != 1 {
			t.Errorf("queue rows with the panic as last error: got %d, want 1", got)
		}
	})

	t.Run("NoSecretConfigured", func(t *testing.T) {
		t.Parallel()
		store, bundle := setup(t)
		r := receiver.New(store, discardLogger, receiver.Config{})
		body := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
		if _, err := r.Receive(t.Context(), body, stripeevent.Sign(body, testSecret, time.Now())); !errors.Is(err, receiver.ErrNoSecret) {
			t.Errorf("got %v, want ErrNoSecret", err)
		}
		if got := queuetest.Markers(t, bundle.pool) + bundle.queued(t); got != 0 {
			t.Errorf("rows stored: got %d, want 0", got)
		}
	})
}
