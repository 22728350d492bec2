package queue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

func TestTryLockEvents_SkipsEventsLockedElsewhere(t *testing.T) {
	t.Parallel()
	s, _ := queuetest.NewStore(t)
	held, err := s.TryLockEvent(t.Context(), "evt_b")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback(t.Context())

	tx, locked, err := s.TryLockEvents(t.Context(), []string{"evt_a", "evt_b", "evt_c"})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(t.Context())
	if len(locked) != 2 || locked[0] != "evt_a" || locked[1] != "evt_c" {
		t.Errorf("locked: got %v, want [evt_a evt_c]", locked)
	}
	if _, err := s.TryLockEvent(t.Context(), "evt_a"); !errors.Is(err, queue.ErrEventLocked) {
		t.Errorf("single lock of a batch-locked event: got %v, want ErrEventLocked", err)
	}
}

func TestClaimStates(t *testing.T) {
	t.Parallel()
	s, pool := queuetest.NewStore(t)
	for _, id := range []string{"evt_held", "evt_marked", "evt_reclaimed", "evt_gone"} {
		queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: id})
	}
	claimed := claim(t, s)
	if len(claimed) != 4 {
		t.Fatalf("claimed %d, want 4", len(claimed))
	}
	if err := s.MarkProcessed(t.Context(), "evt_marked"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), `
		UPDATE webhook_events SET next_retry_at = next_retry_at + interval '1 second' WHERE event_id = 'evt_reclaimed';
		DELETE FROM webhook_events WHERE event_id = 'evt_gone'`); err != nil {
		t.Fatal(err)
	}
	want := map[string]queue.ClaimState{
		"evt_held": queue.ClaimHeld, "evt_marked": queue.ClaimProcessed,
		"evt_reclaimed": queue.ClaimLost, "evt_gone": queue.ClaimLost,
	}
	states, err := s.ClaimStates(t.Context(), claimed)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range claimed {
		if states[i] != want[e.EventID] {
			t.Errorf("%s: got state %d, want %d", e.EventID, states[i], want[e.EventID])
		}
	}
}

func TestResolveAndRescheduleBatch(t *testing.T) {
	t.Parallel()
	s, pool := queuetest.NewStore(t)
	ok := queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_ok"})
	retry := queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_retry", Attempts: 1, Status: queue.StatusRetrying})
	dying := queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_dying", Attempts: 4, Status: queue.StatusRetrying})
	attempt := func(e queue.Event, ok bool) *queue.NewAttempt {
		a := &queue.NewAttempt{Source: e.Source, EventID: e.EventID, Duration: time.Millisecond,
			Succeeded: ok, Path: queue.PathRetry, Number: e.Attempts + 1, HTTPStatus: 500}
		if !ok {
			a.Error = "downstream answered 500"
		}
		return a
	}

	n, err := s.ResolveBatch(t.Context(), []queue.Settled{{Event: ok, Attempt: attempt(ok, true)}})
	if err != nil || n != 1 {
		t.Fatalf("resolve: got %d, %v; want 1", n, err)
	}
	statuses, err := s.RescheduleBatch(t.Context(), []queue.Settled{
		{Event: retry, Attempt: attempt(retry, false)}, {Event: dying, Attempt: attempt(dying, false)},
	})
	if err != nil || len(statuses) != 2 || statuses[0] != queue.StatusRetrying || statuses[1] != queue.StatusDead {
		t.Fatalf("reschedule: got %v, %v; want [retrying dead]", statuses, err)
	}

	if processed, err := s.IsProcessed(t.Context(), "evt_ok"); err != nil || !processed {
		t.Errorf("evt_ok: processed %v, %v; want its marker", processed, err)
	}
	if n := queuetest.Count(t, pool, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_ok'`); n != 0 {
		t.Errorf("evt_ok: %d queue rows, want none", n)
	}
	var delay float64
	if err := pool.QueryRow(t.Context(), `
		SELECT extract(epoch FROM next_retry_at - last_attempt_at) FROM webhook_events
		WHERE event_id = 'evt_retry' AND status = 'retrying' AND attempts = 2 AND NOT manual_retry`).Scan(&delay); err != nil {
		t.Fatalf("evt_retry: %v", err)
	}
	if want := queue.RetryDelay(2).Seconds(); delay != want {
		t.Errorf("evt_retry delay: got %v s, want %v s", delay, want)
	}
	got, err := s.Event(t.Context(), dying.ID)
	if err != nil || got.Status != queue.StatusDead || got.Attempts != queue.MaxAttempts {
		t.Errorf("evt_dying: got %+v, %v; want dead at %d", got, err, queue.MaxAttempts)
	}
	if !got.NextRetryAt.Equal(dying.NextRetryAt) {
		t.Errorf("evt_dying: next retry moved from %s to %s; a dead event has none to schedule", dying.NextRetryAt, got.NextRetryAt)
	}
	for id, want := range map[string]int{"evt_ok": 1, "evt_retry": 1, "evt_dying": 1} {
		attempts, err := s.Attempts(t.Context(), queue.SourceStripe, id)
		if err != nil || len(attempts) != want {
			t.Errorf("%s attempts: got %d, %v; want %d", id, len(attempts), err, want)
		}
	}
}

func TestLockClaims_LocksAndReadsStatesInOneGo(t *testing.T) {
	t.Parallel()
	s, pool := queuetest.NewStore(t)
	for _, id := range []string{"evt_held", "evt_marked", "evt_reclaimed", "evt_busy"} {
		queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: id})
	}
	claimed := claim(t, s)
	if len(claimed) != 4 {
		t.Fatalf("claimed %d, want 4", len(claimed))
	}
	if err := s.MarkProcessed(t.Context(), "evt_marked"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), `
		UPDATE webhook_events SET next_retry_at = next_retry_at + interval '1 second' WHERE event_id = 'evt_reclaimed'`); err != nil {
		t.Fatal(err)
	}
	busy, err := s.TryLockEvent(t.Context(), "evt_busy")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Rollback(t.Context())

	tx, states, err := s.LockClaims(t.Context(), claimed)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(t.Context())
	want := map[string]queue.ClaimState{
		"evt_held": queue.ClaimHeld, "evt_marked": queue.ClaimProcessed,
		"evt_reclaimed": queue.ClaimLost, "evt_busy": queue.ClaimBusy,
	}
	for i, e := range claimed {
		if states[i] != want[e.EventID] {
			t.Errorf("%s: got state %d, want %d", e.EventID, states[i], want[e.EventID])
		}
	}
	// The batch holds the locks it took, and only those.
	if _, err := s.TryLockEvent(t.Context(), "evt_held"); !errors.Is(err, queue.ErrEventLocked) {
		t.Errorf("lock of a batch-locked event: got %v, want ErrEventLocked", err)
	}
}

func TestCommitSettled_WritesEveryOutcomeWithTheCommit(t *testing.T) {
	t.Parallel()
	s, pool := queuetest.NewStore(t)
	for _, id := range []string{"evt_ok", "evt_retry", "evt_cut"} {
		queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: id, Attempts: 1, Status: queue.StatusRetrying})
	}
	claimed := claim(t, s)
	byID := map[string]queue.Event{}
	for _, e := range claimed {
		byID[e.EventID] = e
	}
	tx, _, err := s.LockClaims(t.Context(), claimed)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(t.Context())
	ok, retry := byID["evt_ok"], byID["evt_retry"]
	statuses, err := tx.CommitSettled(t.Context(),
		[]queue.Settled{{Event: ok, Attempt: &queue.NewAttempt{Source: ok.Source, EventID: ok.EventID,
			Succeeded: true, HTTPStatus: 200, Path: queue.PathRetry, Number: 2}}},
		[]queue.Settled{{Event: retry, Attempt: &queue.NewAttempt{Source: retry.Source, EventID: retry.EventID,
			HTTPStatus: 500, Error: "downstream answered 500", Path: queue.PathRetry, Number: 2}}},
		[]queue.Event{byID["evt_cut"]})
	if err != nil || len(statuses) != 1 || statuses[0] != queue.StatusRetrying {
		t.Fatalf("CommitSettled: got %v, %v; want [retrying]", statuses, err)
	}

	var rows string
	if err := pool.QueryRow(t.Context(), `
		SELECT string_agg(event_id || ':' || status || ':' || attempts || ':' || (next_retry_at <= now()), ' ' ORDER BY event_id)
		FROM webhook_events`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if want := "evt_cut:retrying:1:true evt_retry:retrying:2:false"; rows != want {
		t.Errorf("queue rows: got %q, want %q", rows, want)
	}
	if processed, err := s.IsProcessed(t.Context(), "evt_ok"); err != nil || !processed {
		t.Errorf("evt_ok: processed %v, %v; want its marker", processed, err)
	}
	for id, want := range map[string]int{"evt_ok": 1, "evt_retry": 1, "evt_cut": 0} {
		attempts, err := s.Attempts(t.Context(), queue.SourceStripe, id)
		if err != nil || len(attempts) != want {
			t.Errorf("%s attempts: got %d, %v; want %d", id, len(attempts), err, want)
		}
	}
	// The locks went with the commit.
	again, err := s.TryLockEvent(t.Context(), "evt_retry")
	if err != nil {
		t.Fatalf("lock after the commit: %v", err)
	}
	_ = again.Rollback(t.Context())
}
