// Package reconcileruns holds what reconciliation keeps in PostgreSQL: the
// lease that lets one reconcile run go at a time across replicas, and the
// record of each finished run, which the schedule and the dashboard read.
package reconcileruns

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/store"
	"github.com/hookd/hookd/queue"
)

// Store runs the reconcile runs' queries on the queue's database
// (queue.Store's DB): the main pool, or the dashboard's time-limited reader.
type Store struct{ db store.DBTX }

// New returns a Store over db.
func New(db store.DBTX) *Store {
	return &Store{db: db}
}

// ErrRunning is returned by TryLock when a reconcile run
// holds the lock, on this replica or another.
var ErrRunning = errors.New("another reconcile run is in progress")

// Lease is the reconcile run's lease, as TryLock returns it: one run at a
// time, across replicas, because each run lists the same events from
// Stripe's API, and a second one would only spend the account's rate limit
// (the events' own leases would still keep it from processing any event
// twice). It is an event's lease (queue.Store.TryLease) under a key no
// event id can have, and not a lock held in a transaction: a run calls the
// app, and nothing may keep a transaction open across that. The holder
// renews it while it runs (Renew); a holder that died leaves it once its
// replica stops beating, or to expire.
type Lease struct{ lease *queue.Lease }

// leaseKey is the reconcile run's key in webhook_leases. Stripe's
// event ids start with evt_, so it is no event's.
const leaseKey = "hookd:reconcile"

// LeaseFor is how long the reconcile lease lasts past its last
// renewal: a run renews it well within that, and a run whose replica
// beats no more holds the next one off for seconds, one that never beat
// for at most this long.
const LeaseFor = time.Minute

// TryLock takes the reconcile lease through leases, whose replica keeps
// it live, without waiting, or returns ErrRunning when a run holds it.
// Renew it while the run goes on, and end the run with Record or Release.
func TryLock(ctx context.Context, leases *queue.Store) (*Lease, error) {
	l, err := leases.TryLease(ctx, leaseKey, queue.PathReconcile, LeaseFor)
	switch {
	case errors.Is(err, queue.ErrEventLocked):
		return nil, ErrRunning
	case err != nil:
		return nil, fmt.Errorf("lease reconcile run: %w", err)
	}
	return &Lease{lease: l}, nil
}

// Renew extends the lease by LeaseFor from now, or returns
// queue.ErrLeaseLost when it expired and another run took it.
func (l *Lease) Renew(ctx context.Context) error {
	return l.lease.Renew(ctx, LeaseFor)
}

// Release gives the lease back without recording a run.
func (l *Lease) Release(ctx context.Context) error {
	if err := l.lease.Release(ctx); err != nil && !errors.Is(err, queue.ErrLeaseLost) {
		return err
	}
	return nil
}

// Record records the finished run and gives the lease back, in one
// transaction: a replica that finds a run due just before this one ends
// either fails to take the lease or sees this run's record.
func (l *Lease) Record(ctx context.Context, trigger Trigger, startedAt, since time.Time,
	c Counts, errText string) error {
	return l.lease.ReleaseWith(ctx, func(tx pgx.Tx) error {
		return (&Store{db: tx}).Record(ctx, trigger, startedAt, since, c, errText)
	})
}

// Trigger says who started a reconcile run.
type Trigger string

const (
	TriggerSchedule  Trigger = "schedule"  // the loop in hookd serve
	TriggerCommand   Trigger = "command"   // hookd reconcile
	TriggerDashboard Trigger = "dashboard" // an operator, on the dashboard or through /api/v1
	TriggerFailover  Trigger = "failover"  // hookd noticed the database failed over
)

// Counts is what a reconcile run found among the events Stripe
// listed.
type Counts struct {
	// Examined is every event Stripe listed in the window.
	Examined int64 `db:"examined"`
	// AlreadyProcessed had a dedup marker; AlreadyQueued a queue row.
	AlreadyProcessed int64 `db:"already_processed"`
	AlreadyQueued    int64 `db:"already_queued"`
	// Recovered were never seen and are now processed; Queued were never
	// seen, failed processing and are now on the retry queue.
	Recovered int64 `db:"recovered"`
	Queued    int64 `db:"queued"`
	// InFlight were being handled by a delivery at that very moment.
	InFlight int64 `db:"in_flight"`
	// SkippedType are of types the endpoint does not receive;
	// SkippedYoung so recent that Stripe may still be delivering them.
	SkippedType  int64 `db:"skipped_type"`
	SkippedYoung int64 `db:"skipped_young"`
}

// Run is a finished reconcile run.
type Run struct {
	ID         int64     `db:"id"`
	StartedAt  time.Time `db:"started_at"`
	FinishedAt time.Time `db:"finished_at"`
	Trigger    Trigger   `db:"trigger"`
	Since      time.Time `db:"since"`
	Counts
	// Error is why the run stopped early; nil when it completed.
	Error *string `db:"error"`
}

// Record keeps a finished run; errText is empty when it
// completed.
func (s *Store) Record(ctx context.Context, trigger Trigger, startedAt, since time.Time,
	c Counts, errText string) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO reconcile_runs (started_at, trigger, since, examined, already_processed, already_queued,
		                            recovered, queued, in_flight, skipped_type, skipped_young, error)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULLIF($12, ''))`,
		startedAt, trigger, since, c.Examined, c.AlreadyProcessed, c.AlreadyQueued,
		c.Recovered, c.Queued, c.InFlight, c.SkippedType, c.SkippedYoung, errText)
	if err != nil {
		return fmt.Errorf("record reconcile run: %w", err)
	}
	return nil
}

// runColumns are Run's columns.
const runColumns = `id, started_at, finished_at, trigger, since, examined, already_processed, already_queued,
	recovered, queued, in_flight, skipped_type, skipped_young, error`

// Runs returns up to limit finished runs, the latest first: from the
// latest, or those before run id before when it is not 0.
func (s *Store) Runs(ctx context.Context, before int64, limit int) ([]Run, error) {
	runs, err := store.QueryAll[Run](ctx, s.db, `SELECT `+runColumns+` FROM reconcile_runs
		WHERE $1::bigint = 0 OR id < $1 ORDER BY id DESC LIMIT $2`, before, limit)
	if err != nil {
		return nil, fmt.Errorf("read reconcile runs: %w", err)
	}
	return runs, nil
}

// Last returns the most recently finished run, or queue.ErrNotFound.
func (s *Store) Last(ctx context.Context) (Run, error) {
	rows, err := s.db.Query(ctx, `
		SELECT id, started_at, finished_at, trigger, since, examined, already_processed, already_queued,
		       recovered, queued, in_flight, skipped_type, skipped_young, error
		FROM reconcile_runs ORDER BY finished_at DESC, id DESC LIMIT 1`)
	if err != nil {
		return Run{}, fmt.Errorf("read last reconcile run: %w", err)
	}
	run, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Run])
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, queue.ErrNotFound
	}
	if err != nil {
		return Run{}, fmt.Errorf("read last reconcile run: %w", err)
	}
	return run, nil
}
