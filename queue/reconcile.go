package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ErrReconcileRunning is returned by TryLockReconcile when a reconcile run
// holds the lock, on this replica or another.
var ErrReconcileRunning = errors.New("another reconcile run is in progress")

// ReconcileLease is the reconcile run's lease, as TryLockReconcile returns
// it: one run at a time, across replicas, because each run lists the same
// events from Stripe's API, and a second one would only spend the account's
// rate limit (the events' own leases would still keep it from processing
// any event twice). It is a lease like an event's, a row of webhook_leases
// under a key no event id can have, and not a lock held in a transaction:
// a run calls the app, and nothing may keep a transaction open across that.
// The holder renews it while it runs (Renew); a holder that died leaves it
// to expire.
type ReconcileLease struct {
	store *Store
	owner uuid.UUID
}

// reconcileLeaseKey is the reconcile run's key in webhook_leases. Stripe's
// event ids start with evt_, so it is no event's.
const reconcileLeaseKey = "hookd:reconcile"

// ReconcileLeaseFor is how long the reconcile lease lasts past its last
// renewal: a run renews it well within that, and a run that died holds
// the next one off for at most this long.
const ReconcileLeaseFor = time.Minute

// TryLockReconcile takes the reconcile lease without waiting, or returns
// ErrReconcileRunning when a run holds it. Renew it while the run goes on,
// and end the run with Record or Release.
func (s *Store) TryLockReconcile(ctx context.Context) (*ReconcileLease, error) {
	owner := uuid.New()
	tag, err := s.db.Exec(ctx, `
		INSERT INTO webhook_leases AS l (event_id, owner, path, expires_at)
		VALUES ($1, $2, 'reconcile', now() + make_interval(secs => $3))
		ON CONFLICT (event_id) DO UPDATE
		SET owner = excluded.owner, taken_at = excluded.taken_at, expires_at = excluded.expires_at
		WHERE l.expires_at <= now()`, reconcileLeaseKey, owner, ReconcileLeaseFor.Seconds())
	if err != nil {
		return nil, fmt.Errorf("lease reconcile run: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return nil, ErrReconcileRunning
	}
	return &ReconcileLease{store: s, owner: owner}, nil
}

// Renew extends the lease by ReconcileLeaseFor from now, or returns
// ErrLeaseLost when it expired and another run took it.
func (l *ReconcileLease) Renew(ctx context.Context) error {
	tag, err := l.store.db.Exec(ctx, `
		UPDATE webhook_leases SET expires_at = now() + make_interval(secs => $3)
		WHERE event_id = $1 AND owner = $2`, reconcileLeaseKey, l.owner, ReconcileLeaseFor.Seconds())
	if err != nil {
		return fmt.Errorf("renew reconcile lease: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrLeaseLost
	}
	return nil
}

// Release gives the lease back without recording a run.
func (l *ReconcileLease) Release(ctx context.Context) error {
	_, err := l.store.releaseLeases(ctx, []string{reconcileLeaseKey}, []uuid.UUID{l.owner})
	return err
}

// Record records the finished run and gives the lease back, in one
// transaction: a replica that finds a run due just before this one ends
// either fails to take the lease or sees this run's record.
func (l *ReconcileLease) Record(ctx context.Context, trigger ReconcileTrigger, startedAt, since time.Time,
	c ReconcileCounts, errText string) error {
	return l.store.InTx(ctx, func(tx *Tx) error {
		if err := tx.recordReconcileRun(ctx, trigger, startedAt, since, c, errText); err != nil {
			return err
		}
		_, err := tx.releaseLeases(ctx, []string{reconcileLeaseKey}, []uuid.UUID{l.owner})
		return err
	})
}

// Now returns the database's clock, the one every replica shares.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := s.db.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("read clock: %w", err)
	}
	return now, nil
}

// SeenEvents returns which of eventIDs have a dedup marker and which have a
// row on the retry queue (in any status), in one round trip: a reconcile
// run reads a whole page of Stripe's events at once and runs the pipeline
// only for the ones hookd never saw, which then checks again under the
// event's lock.
func (s *Store) SeenEvents(ctx context.Context, source string, eventIDs []string) (processed, queued map[string]bool, err error) {
	rows, err := s.db.Query(ctx, eventStatesSQL, source, eventIDs)
	if err != nil {
		return nil, nil, fmt.Errorf("read event states: %w", err)
	}
	defer rows.Close()
	processed, queued = map[string]bool{}, map[string]bool{}
	for rows.Next() {
		var id string
		var ord int64
		var p, q bool
		if err := rows.Scan(&id, &ord, &p, &q); err != nil {
			return nil, nil, fmt.Errorf("read event states: %w", err)
		}
		if p {
			processed[id] = true
		}
		if q {
			queued[id] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read event states: %w", err)
	}
	return processed, queued, nil
}

// ReconcileTrigger says who started a reconcile run.
type ReconcileTrigger string

const (
	TriggerSchedule  ReconcileTrigger = "schedule"  // the loop in hookd serve
	TriggerCommand   ReconcileTrigger = "command"   // hookd reconcile
	TriggerDashboard ReconcileTrigger = "dashboard" // an operator
)

// ReconcileCounts is what a reconcile run found among the events Stripe
// listed.
type ReconcileCounts struct {
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

// ReconcileRun is a finished reconcile run.
type ReconcileRun struct {
	ID         int64            `db:"id"`
	StartedAt  time.Time        `db:"started_at"`
	FinishedAt time.Time        `db:"finished_at"`
	Trigger    ReconcileTrigger `db:"trigger"`
	Since      time.Time        `db:"since"`
	ReconcileCounts
	// Error is why the run stopped early; nil when it completed.
	Error *string `db:"error"`
}

// recordReconcileRun keeps a finished run; errText is empty when it
// completed.
func (s *Store) recordReconcileRun(ctx context.Context, trigger ReconcileTrigger, startedAt, since time.Time,
	c ReconcileCounts, errText string) error {
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

// LastReconcileRun returns the most recently finished run, or ErrNotFound.
func (s *Store) LastReconcileRun(ctx context.Context) (ReconcileRun, error) {
	rows, err := s.db.Query(ctx, `
		SELECT id, started_at, finished_at, trigger, since, examined, already_processed, already_queued,
		       recovered, queued, in_flight, skipped_type, skipped_young, error
		FROM reconcile_runs ORDER BY finished_at DESC, id DESC LIMIT 1`)
	if err != nil {
		return ReconcileRun{}, fmt.Errorf("read last reconcile run: %w", err)
	}
	run, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[ReconcileRun])
	if errors.Is(err, pgx.ErrNoRows) {
		return ReconcileRun{}, ErrNotFound
	}
	if err != nil {
		return ReconcileRun{}, fmt.Errorf("read last reconcile run: %w", err)
	}
	return run, nil
}
