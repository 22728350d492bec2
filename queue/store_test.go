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
		if err := queuetest.NewSeed(s).MarkProcessed(ctx, fmt.Sprintf("evt_done_%d", i)); err != nil {
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
	if got := queuetest.Markers(t, bundle.pool); got != 100 {
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

	first, err := queuetest.NewSeed(s).DeadEvents(ctx, 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Events) != 50 || first.Total != 60 {
		t.Fatalf("first page: %d events of %d, want 50 of 60", len(first.Events), first.Total)
	}
	if first.Events[0].EventID != "evt_page_59" {
		t.Errorf("first dead event = %s, want the newest, evt_page_59", first.Events[0].EventID)
	}
	second, err := queuetest.NewSeed(s).DeadEvents(ctx, 50, 50)
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
