package activity_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/store/activity"
	"github.com/hookd/hookd/queue/queuetest"
)

// testBundle is what a test of the activity counts works with besides its
// Store.
type testBundle struct {
	// pool is on the test's own fresh, migrated database, for the rows a
	// test puts in place and the assertions it makes in SQL.
	pool *pgxpool.Pool
}

// setup returns a Store on a fresh, migrated database of t's own, and the
// bundle of what else the test needs. Every test of the package starts
// with it.
func setup(t testing.TB) (*activity.Store, *testBundle) {
	t.Helper()
	pool := queuetest.NewPool(t)
	return activity.New(pool), &testBundle{pool: pool}
}

// insertActivity writes one replica's counts of one minute, and adds them to
// its hour, as flushes would have left them.
func insertActivity(t *testing.T, pool *pgxpool.Pool, minute time.Time, replica string, c activity.Counts) {
	t.Helper()
	_, err := pool.Exec(t.Context(), `
		WITH minute AS (
			INSERT INTO activity_minutes (minute, replica, received, processed, queued, retried, dead, rejected, bad_signature)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		)
		INSERT INTO activity_hours AS a (hour, replica, received, processed, queued, retried, dead, rejected, bad_signature)
		VALUES (date_bin('1 hour', $1::timestamptz, timestamptz 'epoch'), $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (hour, replica) DO UPDATE SET received = a.received + excluded.received,
			processed = a.processed + excluded.processed, queued = a.queued + excluded.queued,
			retried = a.retried + excluded.retried, dead = a.dead + excluded.dead,
			rejected = a.rejected + excluded.rejected, bad_signature = a.bad_signature + excluded.bad_signature`,
		minute, replica, c.Received, c.Processed, c.Queued, c.Retried, c.Dead, c.Rejected, c.BadSignature)
	if err != nil {
		t.Fatalf("insert activity: %v", err)
	}
}

func TestActivity(t *testing.T) {
	t.Parallel()
	// A fixed end, so the buckets do not move if the test crosses a minute.
	end := time.Date(2026, 3, 10, 12, 34, 56, 0, time.UTC)
	minute := func(h, m int) time.Time { return time.Date(2026, 3, 10, h, m, 0, 0, time.UTC) }

	t.Run("PerMinuteBucketsSumReplicasAndFillGapsWithZero", func(t *testing.T) {
		t.Parallel()
		store, bundle := setup(t)
		insertActivity(t, bundle.pool, minute(12, 34), "a", activity.Counts{Received: 3, Processed: 2, Queued: 1})
		insertActivity(t, bundle.pool, minute(12, 34), "b", activity.Counts{Received: 4, Processed: 4})
		insertActivity(t, bundle.pool, minute(12, 30), "a", activity.Counts{Retried: 5, Dead: 2, Rejected: 3, BadSignature: 1})
		insertActivity(t, bundle.pool, minute(11, 35), "b", activity.Counts{Received: 9})
		// Outside the hour: the minute before its first bucket, and a
		// minute after its last.
		insertActivity(t, bundle.pool, minute(11, 34), "a", activity.Counts{Received: 100})
		insertActivity(t, bundle.pool, minute(12, 35), "a", activity.Counts{Received: 100})

		buckets, err := store.Buckets(t.Context(), activity.Range{Step: time.Minute, Buckets: 60, End: end})
		if err != nil {
			t.Fatal(err)
		}
		if len(buckets) != 60 {
			t.Fatalf("got %d buckets, want 60", len(buckets))
		}
		want := map[time.Time]activity.Counts{
			minute(11, 35): {Received: 9},
			minute(12, 30): {Retried: 5, Dead: 2, Rejected: 3, BadSignature: 1},
			minute(12, 34): {Received: 7, Processed: 6, Queued: 1},
		}
		for i, b := range buckets {
			if wantStart := minute(11, 35).Add(time.Duration(i) * time.Minute); !b.Start.Equal(wantStart) {
				t.Fatalf("bucket %d starts %s, want %s", i, b.Start.UTC(), wantStart)
			}
			if b.Counts != want[b.Start.UTC()] {
				t.Errorf("bucket %s: got %+v, want %+v", b.Start.UTC().Format("15:04"), b.Counts, want[b.Start.UTC()])
			}
		}
	})

	t.Run("PerHourBucketsSumTheirMinutes", func(t *testing.T) {
		t.Parallel()
		store, bundle := setup(t)
		first := minute(12, 0).Add(-167 * time.Hour)
		insertActivity(t, bundle.pool, minute(12, 0), "a", activity.Counts{Received: 1})
		insertActivity(t, bundle.pool, minute(12, 34), "a", activity.Counts{Received: 2})
		insertActivity(t, bundle.pool, minute(12, 34), "b", activity.Counts{Received: 4, Dead: 1})
		insertActivity(t, bundle.pool, minute(11, 59), "a", activity.Counts{Processed: 8})
		insertActivity(t, bundle.pool, first, "b", activity.Counts{Queued: 16})
		insertActivity(t, bundle.pool, first.Add(59*time.Minute), "b", activity.Counts{Queued: 32})
		insertActivity(t, bundle.pool, first.Add(-time.Minute), "b", activity.Counts{Queued: 1000})

		buckets, err := store.Buckets(t.Context(), activity.Range{Step: time.Hour, Buckets: 168, End: end})
		if err != nil {
			t.Fatal(err)
		}
		if len(buckets) != 168 {
			t.Fatalf("got %d buckets, want 168", len(buckets))
		}
		want := map[time.Time]activity.Counts{
			first:         {Queued: 48},
			minute(11, 0): {Processed: 8},
			minute(12, 0): {Received: 7, Dead: 1},
		}
		for i, b := range buckets {
			if wantStart := first.Add(time.Duration(i) * time.Hour); !b.Start.Equal(wantStart) {
				t.Fatalf("bucket %d starts %s, want %s", i, b.Start.UTC(), wantStart)
			}
			if b.Counts != want[b.Start.UTC()] {
				t.Errorf("bucket %s: got %+v, want %+v", b.Start.UTC().Format("01-02 15:04"), b.Counts, want[b.Start.UTC()])
			}
		}
	})

	t.Run("EmptyTableGivesZeroBucketsEndingNow", func(t *testing.T) {
		t.Parallel()
		store, _ := setup(t)
		buckets, err := store.Buckets(t.Context(), activity.LastHour)
		if err != nil {
			t.Fatal(err)
		}
		if len(buckets) != 60 {
			t.Fatalf("got %d buckets, want 60", len(buckets))
		}
		for _, b := range buckets {
			if !b.IsZero() {
				t.Errorf("bucket %s: got %+v, want zeros", b.Start, b.Counts)
			}
		}
		if last := buckets[59].Start; time.Since(last) > 2*time.Minute || time.Since(last) < -time.Minute {
			t.Errorf("last bucket starts %s; want the current minute", last)
		}
	})

	t.Run("AddAddsToTheReplicasRowOfTheMinute", func(t *testing.T) {
		t.Parallel()
		store, bundle := setup(t)
		for range 3 {
			if err := store.Add(t.Context(), "a", activity.Counts{Received: 2, BadSignature: 1, Rejected: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if err := store.Add(t.Context(), "b", activity.Counts{Received: 1}); err != nil {
			t.Fatal(err)
		}
		for _, table := range []string{"activity_minutes", "activity_hours"} {
			var rows, received int64
			if err := bundle.pool.QueryRow(t.Context(), `SELECT count(*), sum(received) FROM `+table).Scan(&rows, &received); err != nil {
				t.Fatal(err)
			}
			// Three flushes of a may straddle a minute or an hour: two
			// rows then.
			if rows < 2 || rows > 3 || received != 7 {
				t.Errorf("%s: got %d rows receiving %d; want a row per replica and step, 7 received", table, rows, received)
			}
		}
		n, err := store.SignatureFailures(t.Context(), 5*time.Minute)
		if err != nil || n != 3 {
			t.Errorf("signature failures: got %d, %v; want 3", n, err)
		}
	})

	t.Run("AddThatNeverReachedTheDatabaseSaysSo", func(t *testing.T) {
		t.Parallel()
		// Nothing listens on port 1: the counts cannot have been added.
		pool, err := pgxpool.New(t.Context(), "postgres://postgres@127.0.0.1:1/none?connect_timeout=5")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		err = activity.New(pool).Add(t.Context(), "a", activity.Counts{Received: 1})
		if !errors.Is(err, activity.ErrNotAdded) {
			t.Errorf("unreachable database: got %v, want ErrNotAdded", err)
		}
		store, _ := setup(t)
		cancelled, cancel := context.WithCancel(t.Context())
		cancel()
		if err := store.Add(cancelled, "a", activity.Counts{Received: 1}); !errors.Is(err, activity.ErrNotAdded) {
			t.Errorf("cancelled context: got %v, want ErrNotAdded", err)
		}
	})

	t.Run("SignatureFailuresCountsTheWindowOnly", func(t *testing.T) {
		t.Parallel()
		store, bundle := setup(t)
		if _, err := bundle.pool.Exec(t.Context(), `
			INSERT INTO activity_minutes (minute, replica, bad_signature, rejected) VALUES
			  (date_trunc('minute', now()), 'a', 4, 4),
			  (date_trunc('minute', now()) - interval '3 minutes', 'b', 5, 5),
			  (date_trunc('minute', now()) - interval '6 minutes', 'a', 100, 100)`); err != nil {
			t.Fatal(err)
		}
		n, err := store.SignatureFailures(t.Context(), 5*time.Minute)
		if err != nil || n != 9 {
			t.Errorf("got %d, %v; want 9", n, err)
		}
	})

	t.Run("PruneDeletesRowsPastRetention", func(t *testing.T) {
		t.Parallel()
		store, bundle := setup(t)
		if _, err := bundle.pool.Exec(t.Context(), `
			INSERT INTO activity_minutes (minute, replica, received) VALUES
			  (date_trunc('minute', now()) - interval '8 days 1 minute', 'a', 1),
			  (date_trunc('minute', now()) - interval '7 days 23 hours', 'a', 1),
			  (date_trunc('minute', now()), 'a', 1);
			INSERT INTO activity_hours (hour, replica, received) VALUES
			  (date_trunc('hour', now()) - interval '8 days 1 hour', 'a', 1),
			  (date_trunc('hour', now()) - interval '7 days 22 hours', 'a', 1),
			  (date_trunc('hour', now()), 'a', 1)`); err != nil {
			t.Fatal(err)
		}
		n, err := store.Prune(t.Context())
		if err != nil || n != 1 {
			t.Fatalf("pruned %d, %v; want 1", n, err)
		}
		for _, table := range []string{"activity_minutes", "activity_hours"} {
			var left int64
			if err := bundle.pool.QueryRow(t.Context(), `SELECT count(*) FROM `+table).Scan(&left); err != nil || left != 2 {
				t.Errorf("%s: left %d rows, %v; want 2", table, left, err)
			}
		}
	})
}
