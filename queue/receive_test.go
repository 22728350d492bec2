package queue_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

func TestBeginEvent_HoldsTheEventLockAndReadsTheStateAfterIt(t *testing.T) {
	t.Parallel()
	s, pool := queuetest.NewStore(t)
	ctx := t.Context()

	tx, processed, queued, err := s.BeginEvent(ctx, queue.SourceStripe, "evt_begin")
	if err != nil || processed || queued {
		t.Fatalf("BeginEvent = %v, %v, %v; want a new event", processed, queued, err)
	}
	// The same lock as TryLockEvent's and the retry loop's.
	if _, _, _, err := s.BeginEvent(ctx, queue.SourceStripe, "evt_begin"); !errors.Is(err, queue.ErrEventLocked) {
		t.Errorf("second BeginEvent while held: got %v, want ErrEventLocked", err)
	}
	if _, err := s.TryLockEvent(ctx, "evt_begin"); !errors.Is(err, queue.ErrEventLocked) {
		t.Errorf("TryLockEvent while held: got %v, want ErrEventLocked", err)
	}
	if err := tx.CommitProcessed(ctx, "evt_begin"); err != nil {
		t.Fatalf("CommitProcessed: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Errorf("Rollback after commit: %v, want nil", err)
	}

	// The next holder sees the marker the previous one committed.
	tx, processed, queued, err = s.BeginEvent(ctx, queue.SourceStripe, "evt_begin")
	if err != nil || !processed || queued {
		t.Fatalf("BeginEvent after the marker = %v, %v, %v; want processed", processed, queued, err)
	}
	_ = tx.Rollback(ctx)
	queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_begin_queued"})
	tx, processed, queued, err = s.BeginEvent(ctx, queue.SourceStripe, "evt_begin_queued")
	if err != nil || processed || !queued {
		t.Fatalf("BeginEvent of a queued event = %v, %v, %v; want queued", processed, queued, err)
	}
	_ = tx.Rollback(ctx)

	// The marker is the whole record of an event processed at once.
	var attempts int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM webhook_attempts`).Scan(&attempts); err != nil || attempts != 0 {
		t.Errorf("attempt rows: %d, %v; want 0", attempts, err)
	}
	// Every connection went back to the pool with no transaction open.
	if st := pool.Stat(); st.AcquiredConns() != 0 {
		t.Errorf("connections still acquired: %d", st.AcquiredConns())
	}
}

func TestBeginEvent_ConcurrentDeliveriesMarkOnce(t *testing.T) {
	t.Parallel()
	s, pool := queuetest.NewStore(t)

	const racers, rounds = 16, 20
	var processedBy atomic.Int64
	for range rounds {
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range racers {
			wg.Go(func() {
				<-start
				for {
					tx, processed, _, err := s.BeginEvent(context.Background(), queue.SourceStripe, "evt_race_begin")
					if errors.Is(err, queue.ErrEventLocked) {
						continue
					}
					if err != nil {
						t.Errorf("BeginEvent: %v", err)
						return
					}
					if !processed {
						processedBy.Add(1)
						if err := tx.CommitProcessed(context.Background(), "evt_race_begin"); err != nil {
							t.Errorf("CommitProcessed: %v", err)
						}
					}
					_ = tx.Rollback(context.Background())
					return
				}
			})
		}
		close(start)
		wg.Wait()
		if _, err := pool.Exec(t.Context(), `DELETE FROM processed_webhook_events`); err != nil {
			t.Fatal(err)
		}
	}
	if got := processedBy.Load(); got != rounds {
		t.Fatalf("%d deliveries saw the event unprocessed over %d rounds of %d racers, want exactly one a round",
			got, rounds, racers)
	}
}

func TestCommitProcessed_AbortedTransactionCommitsNothing(t *testing.T) {
	t.Parallel()
	s, pool := queuetest.NewStore(t)
	ctx := t.Context()

	tx, _, _, err := s.BeginEvent(ctx, queue.SourceStripe, "evt_aborted")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Enqueue(ctx, queue.FailedEvent{Source: queue.SourceStripe, EventID: "evt_aborted",
		EventType: "invoice.paid", Payload: []byte("{}"), Error: "bad\x00byte"}); err == nil {
		t.Fatal("Enqueue of a NUL byte succeeded; the test needs a failing statement")
	}
	if err := tx.CommitProcessed(ctx, "evt_aborted"); err == nil {
		t.Fatal("CommitProcessed of an aborted transaction succeeded")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Errorf("Rollback: %v", err)
	}
	var markers int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM processed_webhook_events`).Scan(&markers); err != nil || markers != 0 {
		t.Errorf("markers: %d, %v; want 0", markers, err)
	}
	// The lock went with the transaction.
	tx, _, _, err = s.BeginEvent(ctx, queue.SourceStripe, "evt_aborted")
	if err != nil {
		t.Fatalf("BeginEvent after the rollback: %v", err)
	}
	_ = tx.Rollback(ctx)
}

func TestCommitProcessed_LostConnectionCommitsNothing(t *testing.T) {
	t.Parallel()
	s, pool := queuetest.NewStore(t)
	ctx := t.Context()

	tx, _, _, err := s.BeginEvent(ctx, queue.SourceStripe, "evt_lost")
	if err != nil {
		t.Fatal(err)
	}
	// The backend holding the event's lock is the transaction's.
	var pid int
	if err := pool.QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	// pg_terminate_backend only signals the backend; its locks go when it
	// has exited.
	queuetest.WaitFor(t, 10*time.Second, "the terminated backend to exit", func() bool {
		var alive bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, pid).Scan(&alive); err != nil {
			t.Fatal(err)
		}
		return !alive
	})
	if err := tx.CommitProcessed(ctx, "evt_lost"); err == nil {
		t.Fatal("CommitProcessed on a terminated connection succeeded")
	}
	_ = tx.Rollback(ctx)
	var markers int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM processed_webhook_events`).Scan(&markers); err != nil || markers != 0 {
		t.Errorf("markers: %d, %v; want 0", markers, err)
	}
	// The pool dropped the dead connection and serves the next delivery.
	tx, processed, _, err := s.BeginEvent(ctx, queue.SourceStripe, "evt_lost")
	if err != nil || processed {
		t.Fatalf("BeginEvent after the lost connection = %v, %v; want a new event", processed, err)
	}
	if err := tx.CommitProcessed(ctx, "evt_lost"); err != nil {
		t.Fatal(err)
	}
}
