package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Slots are calls reserved for a destination under its shared rate: the
// first may go at First, each next one interval later, on the database's
// clock. DBNow is that clock when they were reserved, read between Sent
// and Received on this machine's clock, so that a replica can place them
// on its own.
type Slots struct {
	First, DBNow   time.Time
	Sent, Received time.Time
}

// ReserveSlots reserves the next n calls to destination under a rate of
// one call per interval, shared by every replica (destination_rates): the
// first slot is the later of now and the end of what was reserved before.
//
// Sent and Received bracket the statement alone: the connection is taken
// from the pool first (a new one's dial and start-up would widen them),
// and it goes in one round trip (the simple protocol, no prepare), so
// that the database's clock is read well inside them.
func (s *Store) ReserveSlots(ctx context.Context, destination string, n int, interval time.Duration) (Slots, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return Slots{}, fmt.Errorf("reserve calls to %s: %w", destination, err)
	}
	defer conn.Release()
	sl := Slots{Sent: time.Now()}
	err = conn.QueryRow(ctx, `-- hookd.reserve_slots
		INSERT INTO destination_rates AS r (destination, tat) VALUES ($1, now() + make_interval(secs => $2::int * $3::float8))
		ON CONFLICT (destination) DO UPDATE SET tat = greatest(r.tat, now()) + make_interval(secs => $2::int * $3::float8)
		RETURNING r.tat - make_interval(secs => $2::int * $3::float8), now()`,
		pgx.QueryExecModeSimpleProtocol, destination, n, interval.Seconds()).Scan(&sl.First, &sl.DBNow)
	sl.Received = time.Now()
	if err != nil {
		return Slots{}, fmt.Errorf("reserve calls to %s: %w", destination, err)
	}
	return sl, nil
}
