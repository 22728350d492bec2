package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/store"
)

// RouteMiss is a destination whose filter failed on an event: a
// non-match, with why.
type RouteMiss struct {
	Destination string    `db:"destination"`
	Error       string    `db:"error"`
	At          time.Time `db:"at"`
}

// routeMissColumns holds route misses column by column, written by a
// statement of their own in an outcome's transaction, only when some
// outcome has one.
type routeMissColumns struct {
	eventID, destination, errors []string
}

func (c *routeMissColumns) add(eventID string, misses []RouteMiss) {
	for _, m := range misses {
		c.eventID = append(c.eventID, eventID)
		c.destination = append(c.destination, m.Destination)
		c.errors = append(c.errors, m.Error)
	}
}

// recordRouteMissesSQL records that the filters of destinations $2 failed
// on events $1, with errors $3; a miss recorded already stays as it was.
const recordRouteMissesSQL = `-- hookd.route_misses
	INSERT INTO webhook_route_misses (event_id, destination, error)
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
	ON CONFLICT DO NOTHING`

func (c *routeMissColumns) queue(b *pgx.Batch) {
	if len(c.eventID) > 0 {
		b.Queue(recordRouteMissesSQL, c.eventID, c.destination, c.errors)
	}
}

func (c *routeMissColumns) read(br pgx.BatchResults) error {
	if len(c.eventID) == 0 {
		return nil
	}
	_, err := br.Exec()
	return err
}

// RouteMisses returns the destinations whose filters failed on eventID,
// by destination.
func (s *Store) RouteMisses(ctx context.Context, eventID string) ([]RouteMiss, error) {
	misses, err := store.QueryAll[RouteMiss](ctx, s.db, `
		SELECT destination, error, at FROM webhook_route_misses WHERE event_id = $1 ORDER BY destination`, eventID)
	if err != nil {
		return nil, fmt.Errorf("read the route misses of %s: %w", eventID, err)
	}
	return misses, nil
}

// PruneRouteMisses deletes, in batches, the route misses recorded longer
// than olderThan ago (the markers' retention), and returns how many.
func (s *Store) PruneRouteMisses(ctx context.Context, olderThan time.Duration) (int64, error) {
	return store.DeleteInBatches(ctx, s.db, "route misses", `
		DELETE FROM webhook_route_misses
		WHERE (event_id, destination) IN (
			SELECT event_id, destination FROM webhook_route_misses
			WHERE at < now() - make_interval(secs => $1)
			LIMIT $2)`,
		olderThan.Seconds())
}
