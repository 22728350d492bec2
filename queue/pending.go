package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/hookd/hookd/internal/store"
)

// PendingEvent is the oldest pending event, as an alert names it.
type PendingEvent struct {
	EventID     string    `db:"event_id"`
	EventType   string    `db:"event_type"`
	Destination string    `db:"destination"`
	ReceivedAt  time.Time `db:"created_at"`
}

// OldestPending returns the failed or retrying event received first, and
// how many are pending; nil when none is.
func (s *Store) OldestPending(ctx context.Context) (*PendingEvent, int64, error) {
	oldest, err := store.QueryAll[PendingEvent](ctx, s.db, `
		SELECT event_id, event_type, destination, created_at FROM webhook_events
		WHERE `+pending+`
		ORDER BY created_at LIMIT 1`)
	if err != nil {
		return nil, 0, fmt.Errorf("find the oldest pending event: %w", err)
	}
	if len(oldest) == 0 {
		return nil, 0, nil
	}
	n, err := s.CountEvents(ctx, EventFilter{Status: StatusPending})
	if err != nil {
		return nil, 0, err
	}
	return &oldest[0], n, nil
}
