package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/queue/rejections"
)

// Whereabouts is everything hookd still knows about one Stripe event id:
// its queue row, its dedup marker, its attempts, the refused deliveries
// that claimed it. Markers and the attempts of
// resolved events are pruned after the marker retention, so an event older
// than that is as unknown as one never delivered.
type Whereabouts struct {
	EventID string
	// Queued is the event's queue row, in any status; nil when it is not
	// on the queue.
	Queued *Event
	// ProcessedAt is when its dedup marker was written; nil without one.
	ProcessedAt *time.Time
	// Attempts are its processing attempts, oldest first.
	Attempts []Attempt
	// Refused are the newest refused deliveries whose body claimed this
	// id, at most maxRefusedShown; RefusedTotal counts them all.
	Refused      []rejections.Rejection
	RefusedTotal int64
}

// maxRefusedShown bounds the refusals FindEvent returns: the rejection log
// filtered by the id has them all.
const maxRefusedShown = 20

// FindEvent says where the Stripe event eventID is.
func (s *Store) FindEvent(ctx context.Context, eventID string) (Whereabouts, error) {
	w := Whereabouts{EventID: eventID}
	e, err := s.EventByEventID(ctx, eventID)
	switch {
	case err == nil:
		w.Queued = &e
	case !errors.Is(err, ErrNotFound):
		return Whereabouts{}, err
	}
	err = s.db.QueryRow(ctx, `SELECT processed_at FROM processed_webhook_events WHERE event_id = $1`,
		eventID).Scan(&w.ProcessedAt)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Whereabouts{}, fmt.Errorf("find marker of %s: %w", eventID, err)
	}
	if w.Attempts, err = s.Attempts(ctx, SourceStripe, eventID); err != nil {
		return Whereabouts{}, err
	}
	refused, err := rejections.New(s.db).List(ctx, rejections.Filter{ClaimedEventID: eventID, Limit: maxRefusedShown})
	if err != nil {
		return Whereabouts{}, err
	}
	w.Refused, w.RefusedTotal = refused.Rejections, refused.Total
	return w, nil
}
