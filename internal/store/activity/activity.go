// Package activity holds the per-minute and per-hour counts of what the
// pipeline did, per replica: what the overview's charts and the signature
// alert read.
//
// Its guarantee: each replica adds only to rows of its own, so no two
// writers ever wait on one row, and a flush adds to a minute and to its hour
// in one statement, so the minute and the hour charts never disagree.
package activity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookd/hookd/internal/store"
)

// Store reads and adds activity counts.
type Store struct{ db store.DBTX }

// New returns a Store over db: the pool, or a transaction (a pgx.Tx) whose
// other reads its own belong with, as the alerter's do.
func New(db store.DBTX) *Store {
	return &Store{db: db}
}

// Counts is what the pipeline did over some time: the counts behind
// the overview's charts.
type Counts struct {
	// Received counts deliveries to the receiver, whatever the answer.
	Received int64 `db:"received"`
	// Processed counts events processed successfully, inline or retried.
	Processed int64 `db:"processed"`
	// Queued counts deliveries whose inline processing failed and which
	// went on the retry queue.
	Queued int64 `db:"queued"`
	// Retried counts the retries the retry loop ran, whatever their result.
	Retried int64 `db:"retried"`
	// Dead counts events that used up their retries.
	Dead int64 `db:"dead"`
	// Rejected counts deliveries refused with a 4xx; BadSignature those of
	// them refused for their signature.
	Rejected     int64 `db:"rejected"`
	BadSignature int64 `db:"bad_signature"`
}

// IsZero reports whether nothing was counted.
func (c Counts) IsZero() bool { return c == Counts{} }

// Bucket is the activity of one step of a chart, from Start.
type Bucket struct {
	Start time.Time `db:"start"`
	Counts
}

// Range selects the buckets of a chart: Buckets steps of Step, the
// last one holding End (the database's now() when zero). Step is a whole
// number of minutes; buckets start at multiples of it since the Unix epoch.
// A step of whole hours is read from the hourly sums.
type Range struct {
	Step    time.Duration
	Buckets int
	End     time.Time
}

var (
	// LastHour is the last hour, minute by minute.
	LastHour = Range{Step: time.Minute, Buckets: 60}
	// LastWeek is the last 7 days, hour by hour.
	LastWeek = Range{Step: time.Hour, Buckets: 7 * 24}
)

// Retention is how long activity rows are kept: the 7 days the
// longest chart shows, and a day for clocks and late flushes.
const Retention = 8 * 24 * time.Hour

// ErrNotAdded is wrapped by an Add error that happened
// before the statement reached the database, so adding the counts again
// cannot count them twice. After any other error they may have been added.
var ErrNotAdded = errors.New("activity counts not added")

// addActivitySQL adds $2..$8 to replica $1's row of the current minute and
// of the current hour, in one statement so the minute and the hour charts
// never disagree.
var addActivitySQL = `WITH minute AS (` + addToBucketSQL("activity_minutes", "minute", "1 minute") + `) ` +
	addToBucketSQL("activity_hours", "hour", "1 hour")

// addToBucketSQL is the upsert that adds one flush's counts to replica $1's
// row of the bucket of table that now falls in.
func addToBucketSQL(table, bucket, width string) string {
	return `INSERT INTO ` + table + ` AS a (` + bucket + `, replica, received, processed, queued, retried, dead, rejected, bad_signature)
		VALUES (date_bin('` + width + `', now(), timestamptz 'epoch'), $1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (` + bucket + `, replica) DO UPDATE SET
			received = a.received + excluded.received,
			processed = a.processed + excluded.processed,
			queued = a.queued + excluded.queued,
			retried = a.retried + excluded.retried,
			dead = a.dead + excluded.dead,
			rejected = a.rejected + excluded.rejected,
			bad_signature = a.bad_signature + excluded.bad_signature`
}

// Add adds c to replica's counts of the current minute and of the
// current hour. Each replica writes only rows of its own, so no two writers
// ever wait on one row; its flushes within a minute add to the same row.
func (s *Store) Add(ctx context.Context, replica string, c Counts) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotAdded, err)
	}
	_, err := s.db.Exec(ctx, addActivitySQL,
		replica, c.Received, c.Processed, c.Queued, c.Retried, c.Dead, c.Rejected, c.BadSignature)
	var connect *pgconn.ConnectError
	switch {
	case err == nil:
		return nil
	case pgconn.SafeToRetry(err) || errors.As(err, &connect):
		return fmt.Errorf("%w: %w", ErrNotAdded, err)
	default:
		return fmt.Errorf("add activity counts: %w", err)
	}
}

// Buckets returns the activity of every replica in r, one bucket per step,
// oldest first; a step nothing was counted in is a bucket of zeros.
func (s *Store) Buckets(ctx context.Context, r Range) ([]Bucket, error) {
	if r.Step < time.Minute || r.Step%time.Minute != 0 || r.Buckets < 1 {
		return nil, fmt.Errorf("activity: step %s and %d buckets: want whole minutes and at least one bucket", r.Step, r.Buckets)
	}
	table, column := "activity_minutes", "minute"
	if r.Step%time.Hour == 0 {
		table, column = "activity_hours", "hour"
	}
	var end *time.Time
	if !r.End.IsZero() {
		end = &r.End
	}
	// The rows are summed per bucket first and joined to the series of
	// buckets afterwards, so the range is one scan of the primary key.
	buckets, err := store.QueryAll[Bucket](ctx, s.db, `
		WITH bounds AS (
			SELECT date_bin($2, coalesce($1::timestamptz, now()), timestamptz 'epoch') AS last
		), sums AS (
			SELECT date_bin($2, a.`+column+`, timestamptz 'epoch') AS start,
			       sum(received) AS received, sum(processed) AS processed, sum(queued) AS queued,
			       sum(retried) AS retried, sum(dead) AS dead, sum(rejected) AS rejected,
			       sum(bad_signature) AS bad_signature
			FROM `+table+` a, bounds
			WHERE a.`+column+` >= bounds.last - $2 * ($3 - 1) AND a.`+column+` < bounds.last + $2
			GROUP BY 1
		)
		SELECT b.start,
		       coalesce(s.received, 0)::bigint AS received, coalesce(s.processed, 0)::bigint AS processed,
		       coalesce(s.queued, 0)::bigint AS queued, coalesce(s.retried, 0)::bigint AS retried,
		       coalesce(s.dead, 0)::bigint AS dead, coalesce(s.rejected, 0)::bigint AS rejected,
		       coalesce(s.bad_signature, 0)::bigint AS bad_signature
		FROM bounds, generate_series(bounds.last - $2 * ($3 - 1), bounds.last, $2) AS b(start)
		LEFT JOIN sums s ON s.start = b.start
		ORDER BY b.start`,
		end, r.Step, r.Buckets)
	if err != nil {
		return nil, fmt.Errorf("read activity: %w", err)
	}
	return buckets, nil
}

// SignatureFailures returns how many deliveries were refused for their
// signature in the current minute and the minutes before it that fit in
// within: what the signature-failure alert watches.
func (s *Store) SignatureFailures(ctx context.Context, within time.Duration) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, `
		SELECT coalesce(sum(bad_signature), 0)::bigint FROM activity_minutes
		WHERE minute > now() - make_interval(secs => $1)`, within.Seconds()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count signature failures: %w", err)
	}
	return n, nil
}

// Prune deletes the activity rows, per minute and per hour, older
// than Retention and returns how many per-minute rows it deleted:
// at most a day's rows per replica when the pruner runs hourly, so one
// statement.
func (s *Store) Prune(ctx context.Context) (int64, error) {
	return store.Delete(ctx, s.db, "prune activity", `
		WITH hours AS (
			DELETE FROM activity_hours WHERE hour < now() - $1::interval
		)
		DELETE FROM activity_minutes WHERE minute < now() - $1::interval`, Retention)
}
