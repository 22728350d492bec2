package queue

import (
	"context"
	"fmt"
	"time"
)

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
