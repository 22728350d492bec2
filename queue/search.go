package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/store/rejections"
)

// Whereabouts is everything hookd still knows about one Stripe event id:
// its queue row, its dedup marker, its attempts, the refused deliveries
// that claimed it. Markers and the attempts of
// resolved events are pruned after the marker retention, so an event older
// than that is as unknown as one never delivered.
type Whereabouts struct {
	Location
	// Attempts are its processing attempts, oldest first.
	Attempts []Attempt
	// Refused are the newest refused deliveries whose body claimed this
	// id, at most maxRefusedShown; RefusedTotal counts them all.
	Refused      []rejections.Rejection
	RefusedTotal int64
	// Log is its event log row; nil when it has none (never accepted, or
	// pruned with its marker).
	Log *LogEntry
}

// maxRefusedShown bounds the refusals FindEvent returns: the rejection log
// filtered by the id has them all.
const maxRefusedShown = 20

// Location is where the Stripe event eventID is: on the queue, processed,
// both (a marker outlives a row a person retried), or neither.
type Location struct {
	EventID string
	// Queued is the event's queue row, in any status; nil when it is not
	// on the queue.
	Queued *Event
	// ProcessedAt is when its dedup marker was written; nil without one.
	ProcessedAt *time.Time
}

// Locate says where the Stripe event eventID is: the one way the dashboard
// finds an event by its id.
func (s *Store) Locate(ctx context.Context, eventID string) (Location, error) {
	l := Location{EventID: eventID}
	e, err := s.EventByEventID(ctx, eventID)
	switch {
	case err == nil:
		l.Queued = &e
	case !errors.Is(err, ErrNotFound):
		return Location{}, err
	}
	err = s.db.QueryRow(ctx, `SELECT processed_at FROM processed_webhook_events WHERE event_id = $1`,
		eventID).Scan(&l.ProcessedAt)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Location{}, fmt.Errorf("find marker of %s: %w", eventID, err)
	}
	return l, nil
}

// FindEvent says where the Stripe event eventID is, with its attempts and
// the refused deliveries that claimed its id.
func (s *Store) FindEvent(ctx context.Context, eventID string) (Whereabouts, error) {
	loc, err := s.Locate(ctx, eventID)
	if err != nil {
		return Whereabouts{}, err
	}
	w := Whereabouts{Location: loc}
	if w.Attempts, err = s.Attempts(ctx, SourceStripe, eventID); err != nil {
		return Whereabouts{}, err
	}
	refused, err := rejections.New(s.db).List(ctx, rejections.Filter{ClaimedEventID: eventID, Limit: maxRefusedShown})
	if err != nil {
		return Whereabouts{}, err
	}
	w.Refused, w.RefusedTotal = refused.Rejections, refused.Total
	switch e, err := s.LogEntry(ctx, eventID); {
	case err == nil:
		w.Log = &e
	case !errors.Is(err, ErrNotFound):
		return Whereabouts{}, err
	}
	return w, nil
}
