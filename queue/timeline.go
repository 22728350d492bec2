package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Failover is a change of the database's WAL timeline that NoteTimeline
// noticed: the server hookd writes to is a standby promoted since a
// replica last looked (the system identifier does not change with a
// promotion; the timeline does).
type Failover struct {
	From, To int64
	// Newest is when the newest event the new primary holds was processed
	// or queued, within the look-back NoteTimeline was given; zero when it
	// holds none that recent.
	Newest time.Time
}

// timelineSQL is the timeline of the WAL the server writes now: the first
// eight hex digits of its current WAL file's name.
const timelineSQL = `SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint`

// NoteTimeline reads the database's WAL timeline and keeps it in
// database_timeline. When the timeline kept there was another, it returns
// the Failover, and writes a failover entry to the audit log in the same
// transaction: of all the replicas that look, exactly one is told. On a
// first look, or the same timeline, it returns nil. The newest event is
// looked for within lookBack of now.
func (s *Store) NoteTimeline(ctx context.Context, lookBack time.Duration) (*Failover, error) {
	var f *Failover
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var now int64
		if err := tx.QueryRow(ctx, timelineSQL).Scan(&now); err != nil {
			return err
		}
		var old *int64
		var changed bool
		if err := tx.QueryRow(ctx, `
			WITH old AS (SELECT timeline FROM database_timeline WHERE one FOR UPDATE),
			up AS (
				INSERT INTO database_timeline (timeline) VALUES ($1)
				ON CONFLICT (one) DO UPDATE SET timeline = excluded.timeline, seen_at = now()
				WHERE database_timeline.timeline <> excluded.timeline
				RETURNING 1)
			SELECT (SELECT timeline FROM old), (SELECT count(*) FROM up) > 0`, now).Scan(&old, &changed); err != nil {
			return err
		}
		if old == nil || !changed || *old == now {
			return nil
		}
		f = &Failover{From: *old, To: now}
		if _, err := tx.Exec(ctx, `
			INSERT INTO audit_log (user_email, action, target, count) VALUES ('hookd', 'failover', $1, 0)`,
			fmt.Sprintf("database timeline %d to %d", *old, now)); err != nil {
			return err
		}
		// Both reads are bounded to the look-back, which the markers'
		// BRIN index and the queue's created_at answer without a scan of
		// every row.
		var newest *time.Time
		if err := tx.QueryRow(ctx, `
			SELECT greatest(
				(SELECT max(processed_at) FROM processed_webhook_events WHERE processed_at > now() - make_interval(secs => $1)),
				(SELECT max(created_at) FROM webhook_events WHERE created_at > now() - make_interval(secs => $1)))`,
			lookBack.Seconds()).Scan(&newest); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if newest != nil {
			f.Newest = *newest
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("note the database's timeline: %w", err)
	}
	return f, nil
}
