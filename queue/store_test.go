package queue_test

// Tests of what hookd's queue adds beyond the seed's contract.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hookd/hookd/migrations"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

func TestEnqueue_SecondDeliveryOfAnEventKeepsOneRow(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	payload := []byte("{\"id\": \"evt_twice\",\n  \"type\": \"invoice.paid\"}")
	ev := queue.FailedEvent{Source: queue.SourceStripe, EventID: "evt_twice", EventType: "invoice.paid",
		Payload: payload, Signature: "t=1,v1=abc", Error: "downstream answered 500"}

	inserted, err := s.Enqueue(ctx, ev)
	if err != nil || !inserted {
		t.Fatalf("first Enqueue = %v, %v; want inserted", inserted, err)
	}
	ev.Error = "second error"
	inserted, err = s.Enqueue(ctx, ev)
	if err != nil || inserted {
		t.Fatalf("second Enqueue = %v, %v; want not inserted", inserted, err)
	}

	page, err := s.Events(ctx, queue.EventFilter{Status: queue.StatusFailed})
	if err != nil {
		t.Fatal(err)
	}
	if page.Total != 1 {
		t.Fatalf("queue rows = %d, want 1", page.Total)
	}
	got := page.Events[0]
	if got.Payload != string(payload) {
		t.Errorf("payload = %q, want the exact bytes %q", got.Payload, payload)
	}
	if got.LastError == nil || *got.LastError != "downstream answered 500" {
		t.Errorf("last_error = %v, want the first delivery's error", got.LastError)
	}
	if got.Status != queue.StatusFailed || got.Attempts != 0 {
		t.Errorf("new row = (%s, %d attempts), want (failed, 0)", got.Status, got.Attempts)
	}
	var dueIn float64
	if err := bundle.pool.QueryRow(ctx, `SELECT extract(epoch FROM next_retry_at - created_at)
		FROM webhook_events WHERE id = $1`, got.ID).Scan(&dueIn); err != nil {
		t.Fatal(err)
	}
	if dueIn != 60 {
		t.Errorf("a new row is due %v s after it was created, want 60", dueIn)
	}
}

func TestEnqueue_ConcurrentDeliveriesInsertOnce(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)

	const racers = 16
	start := make(chan struct{})
	var inserted sync.Map
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			<-start
			ok, err := s.Enqueue(context.Background(), queue.FailedEvent{Source: queue.SourceStripe,
				EventID: "evt_race_enqueue", EventType: "invoice.paid", Payload: []byte("{}"), Error: "e"})
			if err != nil {
				t.Errorf("enqueue: %v", err)
			}
			inserted.Store(i, ok)
		})
	}
	close(start)
	wg.Wait()
	n := 0
	inserted.Range(func(_, v any) bool {
		if v.(bool) {
			n++
		}
		return true
	})
	if n != 1 {
		t.Fatalf("%d of %d concurrent Enqueue calls reported an insert, want exactly 1", n, racers)
	}
}

func TestResolve_WritesMarkerWithDelete(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ev := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_resolve"})

	if err := s.Resolve(t.Context(), ev.ID); err != nil {
		t.Fatal(err)
	}
	if !isProcessed(t, s, "evt_resolve") {
		t.Fatal("a resolved event must have its dedup marker")
	}
	if err := s.Resolve(t.Context(), ev.ID); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("second Resolve = %v, want ErrNotFound", err)
	}
}

// If the marker cannot be written, the queue row must stay: an event with
// neither would be lost.
func TestResolve_IsAtomic(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	ev := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_atomic"})

	if _, err := bundle.pool.Exec(ctx, `
		CREATE FUNCTION refuse_marker() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN RAISE EXCEPTION 'marker refused'; END $$;
		CREATE TRIGGER refuse_marker BEFORE INSERT ON processed_webhook_events
		FOR EACH ROW EXECUTE FUNCTION refuse_marker();`); err != nil {
		t.Fatal(err)
	}
	if err := s.Resolve(ctx, ev.ID); err == nil {
		t.Fatal("Resolve succeeded although the marker could not be written")
	}
	if _, err := s.Event(ctx, ev.ID); err != nil {
		t.Fatalf("the queue row must survive a failed Resolve: %v", err)
	}
	if isProcessed(t, s, "evt_atomic") {
		t.Fatal("no marker may exist after a failed Resolve")
	}
}

func TestScheduleRetry_FollowsTheBackoffTable(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	ev := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{})

	want := map[int]float64{1: 300, 2: 1800, 3: 7200, 4: 86400}
	for attempts := 1; attempts <= 4; attempts++ {
		if _, err := s.ScheduleRetry(ctx, ev.ID, attempts, "still failing"); err != nil {
			t.Fatal(err)
		}
		var delay float64
		if err := bundle.pool.QueryRow(ctx, `SELECT extract(epoch FROM next_retry_at - last_attempt_at)
			FROM webhook_events WHERE id = $1`, ev.ID).Scan(&delay); err != nil {
			t.Fatal(err)
		}
		if delay != want[attempts] {
			t.Errorf("after %d failed retries the next is %v s later, want %v", attempts, delay, want[attempts])
		}
	}
	if _, err := s.ScheduleRetry(ctx, uuid.New(), 1, "x"); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("ScheduleRetry(unknown) = %v, want ErrNotFound", err)
	}
}

func TestClaimDue_LargerBatchTakesAllDueInOrder(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	for i := range 25 {
		queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{
			EventID: fmt.Sprintf("evt_batch_%02d", i),
			DueIn:   -time.Duration(100-i) * time.Second,
		})
	}
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{DueIn: time.Hour})

	claimed, err := s.ClaimDue(t.Context(), 100, queue.DefaultClaimWindow)
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 25 {
		t.Fatalf("claimed %d events with a batch of 100, want the 25 due ones", len(claimed))
	}
	few, err := queue.New(bundle.pool).ClaimDue(t.Context(), 100, queue.DefaultClaimWindow)
	if err != nil || len(few) != 0 {
		t.Fatalf("second claim = %d events, %v; want none", len(few), err)
	}

	// A batch smaller than what is due takes the longest-overdue first.
	s2, bundle2 := setup(t)
	for i := range 5 {
		queuetest.InsertEvent(t, bundle2.pool, queuetest.EventOpts{
			EventID: fmt.Sprintf("evt_order_%d", i),
			DueIn:   -time.Duration(10-i) * time.Minute,
		})
	}
	first, err := s2.ClaimDue(t.Context(), 2, queue.DefaultClaimWindow)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, e := range first {
		got[e.EventID] = true
	}
	if len(first) != 2 || !got["evt_order_0"] || !got["evt_order_1"] {
		t.Fatalf("claimed %v, want the two longest-overdue events", got)
	}
}

func TestRetryDead_OnNonDeadRowsChangesNothing(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	for _, st := range []queue.Status{queue.StatusFailed, queue.StatusRetrying} {
		ev := queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: st, Attempts: 2, DueIn: time.Hour})
		ok, err := s.RetryDead(ctx, ev.ID)
		if err != nil || ok {
			t.Fatalf("RetryDead(%s) = %v, %v; want false", st, ok, err)
		}
		after, err := s.Event(ctx, ev.ID)
		if err != nil {
			t.Fatal(err)
		}
		if after.Status != st || after.Attempts != 2 || !after.NextRetryAt.Equal(ev.NextRetryAt) || after.ManualRetry {
			t.Fatalf("RetryDead changed a %s row: %+v", st, after)
		}
	}
	if ok, err := s.RetryDead(ctx, uuid.New()); err != nil || ok {
		t.Fatalf("RetryDead(unknown) = %v, %v; want false, nil", ok, err)
	}
}

func TestStats_CountsByStatusDueAndOldest(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()

	empty, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if empty != (queue.Stats{}) {
		t.Fatalf("stats of an empty database = %+v, want zero", empty)
	}

	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusFailed, Age: time.Hour})
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusFailed, DueIn: time.Minute})
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 2})
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5, Age: 48 * time.Hour})
	for i := range 3 {
		if err := s.MarkProcessed(ctx, fmt.Sprintf("evt_done_%d", i)); err != nil {
			t.Fatal(err)
		}
	}

	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Failed != 2 || st.Retrying != 1 || st.Dead != 1 || st.DueNow != 2 || st.Pending() != 3 {
		t.Errorf("stats = %+v, want failed 2, retrying 1, dead 1, due 2", st)
	}
	if st.Markers != 3 || st.MarkersEstimated {
		t.Errorf("markers = %d (estimated %v), want exactly 3", st.Markers, st.MarkersEstimated)
	}
	var oldestAge float64
	if err := bundle.pool.QueryRow(ctx, `SELECT extract(epoch FROM now() - $1::timestamptz)`, st.OldestPending).Scan(&oldestAge); err != nil {
		t.Fatal(err)
	}
	// The oldest pending event is the failed one an hour old, not the dead one.
	if oldestAge < 3600 || oldestAge > 3700 {
		t.Errorf("oldest pending is %v s old, want about an hour", oldestAge)
	}
}

// Above the threshold the marker count is the planner's estimate, which
// costs the same at ten million rows as at ten.
func TestStats_EstimatesALargeMarkerCount(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	if _, err := bundle.pool.Exec(ctx, `
		INSERT INTO processed_webhook_events (event_id)
		SELECT 'evt_bulk_' || g FROM generate_series(1, 250000) g;
		ANALYZE processed_webhook_events`); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.MarkersEstimated {
		t.Fatalf("250,000 markers counted exactly (%d); want the estimate", st.Markers)
	}
	if st.Markers < 225_000 || st.Markers > 275_000 {
		t.Fatalf("estimated %d markers, want within 10%% of 250,000", st.Markers)
	}
}

func TestPruneProcessed_DeletesInBatchesUntilDone(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	// More than two batches of old markers, and some fresh ones.
	if _, err := bundle.pool.Exec(ctx, `
		INSERT INTO processed_webhook_events (event_id, processed_at)
		SELECT 'evt_old_' || g, now() - interval '40 days' + g * interval '1 second'
		FROM generate_series(1, 25000) g;
		INSERT INTO processed_webhook_events (event_id)
		SELECT 'evt_new_' || g FROM generate_series(1, 100) g;`); err != nil {
		t.Fatal(err)
	}
	retention := 30 * 24 * time.Hour
	if n, err := s.CountPrunable(ctx, retention); err != nil || n != 25000 {
		t.Fatalf("CountPrunable = %d, %v; want 25000", n, err)
	}
	deleted, err := s.PruneProcessed(ctx, retention)
	if err != nil {
		t.Fatal(err)
	}
	if deleted != 25000 {
		t.Fatalf("pruned %d, want 25000", deleted)
	}
	if got := bundle.markers(t); got != 100 {
		t.Fatalf("%d markers remain, want the 100 fresh ones", got)
	}
}

func TestEvents_FiltersAndPages(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	for i := range 60 {
		typ, msg := "invoice.paid", "downstream answered 500"
		if i%3 == 0 {
			typ, msg = "charge.refunded", "dial tcp: connection refused"
		}
		queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{
			EventID: fmt.Sprintf("evt_page_%02d", i), EventType: typ, LastError: msg,
			Status: queue.StatusDead, Attempts: 5, Age: time.Duration(60-i) * time.Minute,
		})
	}
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusRetrying})

	first, err := s.DeadEvents(ctx, 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Events) != 50 || first.Total != 60 {
		t.Fatalf("first page: %d events of %d, want 50 of 60", len(first.Events), first.Total)
	}
	if first.Events[0].EventID != "evt_page_59" {
		t.Errorf("first dead event = %s, want the newest, evt_page_59", first.Events[0].EventID)
	}
	second, err := s.DeadEvents(ctx, 50, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Events) != 10 || second.Total != 60 {
		t.Fatalf("second page: %d events of %d, want 10 of 60", len(second.Events), second.Total)
	}

	cases := []struct {
		name   string
		filter queue.EventFilter
		want   int64
	}{
		{"ByType", queue.EventFilter{Status: queue.StatusDead, EventType: "charge.refunded"}, 20},
		{"ByErrorTextIgnoringCase", queue.EventFilter{Status: queue.StatusDead, ErrorContains: "REFUSED"}, 20},
		{"ErrorTextIsLiteral", queue.EventFilter{Status: queue.StatusDead, ErrorContains: "5_0%"}, 0},
		{"ByEventID", queue.EventFilter{Status: queue.StatusDead, EventID: "evt_page_07"}, 1},
		{"OtherStatus", queue.EventFilter{Status: queue.StatusRetrying}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			page, err := s.Events(ctx, tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			if page.Total != tc.want || int64(len(page.Events)) != tc.want {
				t.Fatalf("got %d events (total %d), want %d", len(page.Events), page.Total, tc.want)
			}
		})
	}
}

func TestEvent_UnknownIDIsNotFound(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	if _, err := s.Event(t.Context(), uuid.New()); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("Event(unknown) = %v, want ErrNotFound", err)
	}
}

// Two replicas starting at once must not both apply a migration.
func TestMigrationsUp_ConcurrentRunsApplyOnce(t *testing.T) {
	t.Parallel()
	_, bundle := setup(t)
	ctx := t.Context()
	// The helper's database is already migrated: start from an empty one.
	if _, err := bundle.pool.Exec(ctx, `DROP SCHEMA public CASCADE; CREATE SCHEMA public`); err != nil {
		t.Fatal(err)
	}
	applied := make([][]string, 3)
	errs := make([]error, 3)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range applied {
		wg.Go(func() {
			<-start
			applied[i], errs[i] = migrations.Up(context.Background(), bundle.pool)
		})
	}
	close(start)
	wg.Wait()
	total := 0
	for i := range applied {
		if errs[i] != nil {
			t.Fatalf("concurrent migrate %d: %v", i, errs[i])
		}
		total += len(applied[i])
	}
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if total != len(files) {
		t.Fatalf("the concurrent runs applied %d migrations in all, want each of the %d once", total, len(files))
	}
	again, err := migrations.Up(ctx, bundle.pool)
	if err != nil || len(again) != 0 {
		t.Fatalf("a second migrate applied %v (%v), want nothing", again, err)
	}
}
