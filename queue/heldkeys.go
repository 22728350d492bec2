package queue

import (
	"context"
	"fmt"
)

// HeldKey reads key of the ordered destination as HeldKeys lists it: the
// first dead event holding it, since when, and how many deliveries of the
// key wait behind it. ErrNotFound when no dead event holds it.
func (s *Store) HeldKey(ctx context.Context, destination, key string) (HeldKey, error) {
	k, err := oneRow[HeldKey](ctx, s.db, fmt.Sprintf("read %s's held key %q", destination, key), `-- hookd.held_key
		SELECT h.destination, h.order_key, h.event_id, coalesce(h.last_attempt_at, h.created_at) AS dead_since,
		       (SELECT count(*) FROM webhook_events w
		        WHERE w.destination = h.destination AND w.order_key = h.order_key AND w.order_seq > h.order_seq) AS waiting
		FROM webhook_events h
		WHERE h.destination = $1 AND h.order_key = $2 AND h.status = 'dead'
		ORDER BY h.order_seq
		LIMIT 1`, destination, key)
	return k, err
}
