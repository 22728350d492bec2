// Package ungenerated keeps the events Stripe could not generate: each
// v2.core.health.event_generation_failure.resolved notice Stripe sent, with
// what it says of the event that was never created. Such an event is in no
// list of Stripe's and reached no endpoint, so nothing can recover it; the
// notices are listed on /failures and alerted on, for a person to look at
// the object in Stripe and do by hand what the event would have made the
// app do.
package ungenerated

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/store"
)

// NoticeType is the type of Stripe's notice.
const NoticeType = "v2.core.health.event_generation_failure.resolved"

// Notice is one notice, as kept.
type Notice struct {
	// EventID is the notice's own id (evt_...).
	EventID    string    `db:"event_id"`
	ReceivedAt time.Time `db:"received_at"`
	Livemode   bool      `db:"livemode"`
	// LostType, ObjectID and Summary are what the notice says of the event
	// Stripe failed to create: its type, the object it was about, and
	// Stripe's summary; "" when the notice did not carry them (a thin
	// notice carries none: Stripe's Workbench shows them).
	LostType string `db:"lost_type"`
	ObjectID string `db:"object_id"`
	Summary  string `db:"summary"`
}

// Store keeps the notices.
type Store struct{ db store.DBTX }

// New returns a Store over db.
func New(db store.DBTX) *Store { return &Store{db: db} }

// Record keeps n. A notice recorded before (a redelivery, a retry) is left
// as it is.
func (s *Store) Record(ctx context.Context, n Notice) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO stripe_generation_failures (event_id, livemode, lost_type, object_id, summary)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (event_id) DO NOTHING`, n.EventID, n.Livemode, n.LostType, n.ObjectID, n.Summary)
	if err != nil {
		return fmt.Errorf("record event-generation failure %s: %w", n.EventID, err)
	}
	return nil
}

// List returns up to limit notices, the newest first, and how many there
// are in all.
func (s *Store) List(ctx context.Context, limit int) ([]Notice, int64, error) {
	var total int64
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM stripe_generation_failures`).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count event-generation failures: %w", err)
	}
	notices, err := store.QueryAll[Notice](ctx, s.db, `
		SELECT event_id, received_at, livemode, lost_type, object_id, summary
		FROM stripe_generation_failures ORDER BY received_at DESC, event_id LIMIT $1`, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("list event-generation failures: %w", err)
	}
	return notices, total, nil
}

// TakeUnannounced marks, in tx, the notices no alert named yet as named
// and returns them, oldest first. Each is returned by one call only,
// whichever replica makes it: the mark is a row update under the row's
// lock.
func TakeUnannounced(ctx context.Context, tx pgx.Tx) ([]Notice, error) {
	notices, err := store.QueryAll[Notice](ctx, tx, `
		WITH taken AS (
			UPDATE stripe_generation_failures SET alerted_at = now()
			WHERE event_id = ANY (ARRAY(
				SELECT event_id FROM stripe_generation_failures WHERE alerted_at IS NULL
				FOR UPDATE SKIP LOCKED))
			RETURNING event_id, received_at, livemode, lost_type, object_id, summary
		)
		SELECT * FROM taken ORDER BY received_at, event_id`)
	if err != nil {
		return nil, fmt.Errorf("take event-generation failures: %w", err)
	}
	return notices, nil
}
