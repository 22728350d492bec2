package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/store"
)

// Retired reports whether the destination left the configuration with
// deliveries still queued or dead.
func (d DestinationState) Retired() bool { return d.RetiredAt != nil }

// DestinationStats is a destination and what the destinations page shows
// of its deliveries: how many wait to retry and how many are dead, since
// when the oldest waits, and its calls over the last hour.
type DestinationStats struct {
	DestinationState
	Pending int64 `db:"pending"`
	Dead    int64 `db:"dead"`
	// OldestPending is when the oldest delivery waiting to retry was
	// queued; nil when none waits.
	OldestPending *time.Time `db:"oldest_pending"`
	// Calls and Succeeded count its attempts over the last hour.
	Calls     int64 `db:"calls"`
	Succeeded int64 `db:"succeeded"`
	// P50MS and P95MS are the median and 95th percentile of those calls'
	// durations, in milliseconds; nil without calls.
	P50MS *float64 `db:"p50_ms"`
	P95MS *float64 `db:"p95_ms"`
	// Now is the database's clock when the row was read.
	Now time.Time `db:"now"`
}

// SuccessRate is the share of the last hour's calls that succeeded, and
// false when there were none.
func (s DestinationStats) SuccessRate() (float64, bool) {
	if s.Calls == 0 {
		return 0, false
	}
	return float64(s.Succeeded) / float64(s.Calls), true
}

// StatsWindow is how far back a destination's success rate and latency
// look.
const StatsWindow = time.Hour

const destinationColumns = `d.name, d.url, d.route, d.source, d.concurrency, d.timeout_seconds, d.added_at, d.applied_at,
	d.retired_at, d.paused_at, d.paused_by, d.paused_reason, d.breaker_failures, d.breaker_opened_at, d.breaker_error,
	d.probe_due_at, d.retries_narrowed_at`

// DestinationsStats reads every destination with its deliveries' counts
// and its calls over the last StatsWindow: the configured ones by name,
// then the retired ones.
func (s *Store) DestinationsStats(ctx context.Context) ([]DestinationStats, error) {
	stats, err := store.QueryAll[DestinationStats](ctx, s.db, `
		SELECT `+destinationColumns+`,
		       coalesce(q.pending, 0) AS pending, coalesce(q.dead, 0) AS dead, q.oldest_pending,
		       coalesce(a.calls, 0) AS calls, coalesce(a.succeeded, 0) AS succeeded, a.p50_ms, a.p95_ms, now() AS now
		FROM destinations d
		LEFT JOIN LATERAL (
			SELECT count(*) FILTER (WHERE status IN ('failed', 'retrying')) AS pending,
			       count(*) FILTER (WHERE status = 'dead') AS dead,
			       min(created_at) FILTER (WHERE status IN ('failed', 'retrying')) AS oldest_pending
			FROM webhook_events WHERE destination = d.name
		) q ON true
		LEFT JOIN LATERAL (
			SELECT count(*) AS calls, count(*) FILTER (WHERE outcome = 'succeeded') AS succeeded,
			       percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) AS p50_ms,
			       percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) AS p95_ms
			FROM webhook_attempts
			WHERE destination = d.name AND attempted_at > now() - make_interval(secs => $1)
		) a ON true
		ORDER BY d.retired_at IS NOT NULL, d.name`, StatsWindow.Seconds())
	if err != nil {
		return nil, fmt.Errorf("read destinations: %w", err)
	}
	return stats, nil
}

// Destination reads the destination name, or ErrNotFound.
func (s *Store) Destination(ctx context.Context, name string) (DestinationState, error) {
	return oneRow[DestinationState](ctx, s.db, "read destination "+name,
		`SELECT `+destinationColumns+` FROM destinations d WHERE d.name = $1`, name)
}

// DestinationNames are the names of every destination, configured or
// retired, in order: the choices of a destination filter.
func (s *Store) DestinationNames(ctx context.Context) ([]string, error) {
	rows, err := s.db.Query(ctx, `SELECT name FROM destinations ORDER BY retired_at IS NOT NULL, name`)
	if err != nil {
		return nil, fmt.Errorf("read destination names: %w", err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("read destination names: %w", err)
		}
		names = append(names, n)
	}
	return names, rows.Err()
}

// DeliveriesOf returns every queue row of the Stripe event eventID, one
// per destination its delivery to which waits or is dead, in the order of
// the destinations' names; none when the event is not on the queue.
func (s *Store) DeliveriesOf(ctx context.Context, eventID string) ([]Event, error) {
	rows, err := store.QueryAll[Event](ctx, s.db, `SELECT `+eventColumns+`
		FROM webhook_events WHERE source = $1 AND event_id = $2 ORDER BY destination`, SourceStripe, eventID)
	if err != nil {
		return nil, fmt.Errorf("read deliveries of %s: %w", eventID, err)
	}
	return rows, nil
}

// ErrDestinationNotPaused, ErrDestinationPaused and ErrNotRetired are the
// answers of the destination changes when there is nothing to change, or
// the destination is not in the state the change needs.
var (
	ErrDestinationPaused    = errors.New("the destination is paused already")
	ErrDestinationNotPaused = errors.New("the destination is not paused, and its circuit breaker is closed")
	ErrNotRetired           = errors.New("the destination is not retired: its deliveries are still delivered")
)

// PauseDestination pauses the destination name in the name of by, for
// reason: it gets no calls until resumed, its deliveries waiting on the
// queue with no attempt spent. ErrNotFound when there is no such
// destination. Run it in the transaction that audits it.
func (s *Store) PauseDestination(ctx context.Context, name, by, reason string) error {
	var paused bool
	err := s.db.QueryRow(ctx, `
		WITH d AS (SELECT name, paused_at IS NOT NULL AS paused FROM destinations WHERE name = $1 FOR UPDATE),
		     u AS (UPDATE destinations SET paused_at = now(), paused_by = $2, paused_reason = $3
		           WHERE name = $1 AND paused_at IS NULL RETURNING 1)
		SELECT d.paused FROM d`, name, by, reason).Scan(&paused)
	return destinationChange(err, paused, ErrDestinationPaused, "pause destination "+name)
}

// ResumeDestination ends a person's pause of the destination name and
// closes its circuit breaker: the person who resumes says the app is
// ready. ErrNotFound when there is no such destination. Run it in the
// transaction that audits it.
func (s *Store) ResumeDestination(ctx context.Context, name string) error {
	var held bool
	err := s.db.QueryRow(ctx, `
		WITH d AS (SELECT name, paused_at IS NOT NULL OR breaker_opened_at IS NOT NULL AS held
		           FROM destinations WHERE name = $1 FOR UPDATE),
		     u AS (UPDATE destinations
		           SET paused_at = NULL, paused_by = NULL, paused_reason = NULL,
		               breaker_failures = 0, breaker_opened_at = NULL, breaker_error = NULL,
		               probe_due_at = NULL, probe_wait_seconds = 0
		           WHERE name = $1 AND (paused_at IS NOT NULL OR breaker_opened_at IS NOT NULL) RETURNING 1)
		SELECT d.held FROM d`, name).Scan(&held)
	return destinationChange(err, !held, ErrDestinationNotPaused, "resume destination "+name)
}

// destinationChange is a pause's or a resume's error: the read's, or
// ErrNotFound when the destination was missing, or unchanged when it was
// so already.
func destinationChange(err error, already bool, unchanged error, what string) error {
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ErrNotFound
	case err != nil:
		return fmt.Errorf("%s: %w", what, err)
	case already:
		return unchanged
	}
	return nil
}

// Moved is what MoveDeliveries did: how many deliveries it gave the other
// destination, and how many it merged into a delivery of the same event
// that destination had already (the retired one's removed).
type Moved struct {
	Moved, Merged int64
}

// MoveDeliveries gives every delivery of the retired destination from to
// the destination to, each keeping its status, attempts and due time; a
// delivery of an event to already has is merged into that one (the
// retired destination's row is removed). ErrNotFound when either
// destination is missing, ErrNotRetired when from is configured. Run it
// in the transaction that audits it.
func (s *Store) MoveDeliveries(ctx context.Context, from, to string) (Moved, error) {
	if err := s.retiredDestination(ctx, from); err != nil {
		return Moved{}, err
	}
	if _, err := s.Destination(ctx, to); err != nil {
		return Moved{}, err
	}
	var m Moved
	err := s.db.QueryRow(ctx, `
		WITH merged AS (
			DELETE FROM webhook_events f
			WHERE f.destination = $1
			  AND EXISTS (SELECT 1 FROM webhook_events t
			              WHERE t.source = f.source AND t.event_id = f.event_id AND t.destination = $2)
			RETURNING f.id
		), moved AS (
			UPDATE webhook_events f SET destination = $2
			WHERE f.destination = $1 AND f.id NOT IN (SELECT id FROM merged)
			RETURNING f.id
		)
		SELECT (SELECT count(*) FROM moved), (SELECT count(*) FROM merged)`, from, to).Scan(&m.Moved, &m.Merged)
	if err != nil {
		return Moved{}, fmt.Errorf("move deliveries of %s to %s: %w", from, to, err)
	}
	return m, nil
}

// DropDeliveries removes every delivery of the retired destination name
// from the queue, and says how many. An event whose dropped delivery was
// its last on the queue gets its marker then, as a resolved delivery's
// would: it is done, and a redelivery from Stripe is a duplicate. ErrNotFound when the destination is
// missing, ErrNotRetired when it is configured. Run it in the transaction
// that audits it.
func (s *Store) DropDeliveries(ctx context.Context, name string) (int64, error) {
	if err := s.retiredDestination(ctx, name); err != nil {
		return 0, err
	}
	var n int64
	err := s.db.QueryRow(ctx, `
		WITH resolved AS (
			DELETE FROM webhook_events e WHERE e.destination = $1
			RETURNING e.event_id, e.event_type, e.endpoint, e.livemode, e.account, e.api_version, e.object_id,
			          e.object_type, e.customer, e.stripe_created, e.created_at, e.attempts, convert_to(e.payload, 'UTF8') AS payload,
			          CASE WHEN e.last_attempt_at IS NOT NULL THEN '`+string(LogQueued)+`'
			               ELSE '`+string(LogDeferred)+`' END AS how,
			          e.payload_erased_at, e.payload_erased_by, e.id
		), marked AS (`+insertResolvedMarkersSQL+`
		)
		SELECT count(*) FROM resolved`, name).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("drop deliveries of %s: %w", name, err)
	}
	return n, nil
}

// retiredDestination locks the destination name's row, so that no apply
// brings it back while its deliveries are moved or dropped, and checks
// that it is retired.
func (s *Store) retiredDestination(ctx context.Context, name string) error {
	var retired bool
	err := s.db.QueryRow(ctx, `SELECT retired_at IS NOT NULL FROM destinations WHERE name = $1 FOR UPDATE`, name).Scan(&retired)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ErrNotFound
	case err != nil:
		return fmt.Errorf("read destination %s: %w", name, err)
	case !retired:
		return ErrNotRetired
	}
	return nil
}
