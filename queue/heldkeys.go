package queue

import (
	"context"
	"fmt"

	"github.com/hookd/hookd/internal/store"
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

// TakeNewlyHeld marks, in tx, the keys held by a dead event not announced
// yet as announced and returns them, the oldest death first: a key is
// returned once each time it is held, by exactly one call whichever
// replica makes it, as TakeNewlyDead returns a death. The mark is on the
// dead event that holds the key; one that dies again after a person sent
// it back is announced again. A row another transaction holds is skipped,
// and taken at the next check if its key is still held.
func (tx *Tx) TakeNewlyHeld(ctx context.Context) ([]HeldKey, error) {
	keys, err := store.QueryAll[HeldKey](ctx, tx.db, `-- hookd.take_newly_held
		WITH heads AS (
			SELECT DISTINCT ON (destination, order_key) id, hold_alerted_at, last_attempt_at
			FROM webhook_events
			WHERE status = '`+string(StatusDead)+`' AND order_key IS NOT NULL
			ORDER BY destination, order_key, order_seq
		), taken AS (
			UPDATE webhook_events SET hold_alerted_at = clock_timestamp()
			WHERE id = ANY (ARRAY(
				SELECT e.id FROM webhook_events e
				WHERE e.id IN (SELECT id FROM heads WHERE hold_alerted_at IS NULL OR hold_alerted_at < last_attempt_at)
				FOR UPDATE SKIP LOCKED))
			RETURNING destination, order_key, event_id, order_seq, coalesce(last_attempt_at, created_at) AS dead_since
		)
		SELECT t.destination, t.order_key, t.event_id, t.dead_since,
		       (SELECT count(*) FROM webhook_events w
		        WHERE w.destination = t.destination AND w.order_key = t.order_key AND w.order_seq > t.order_seq) AS waiting
		FROM taken t ORDER BY t.dead_since, t.destination, t.order_key`)
	if err != nil {
		return nil, fmt.Errorf("take newly held keys: %w", err)
	}
	return keys, nil
}

// CountHeldKeys counts the keys of every ordered destination that a dead
// event holds.
func (s *Store) CountHeldKeys(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, `-- hookd.count_held_keys
		SELECT count(*) FROM (SELECT DISTINCT destination, order_key FROM webhook_events
		                      WHERE status = '`+string(StatusDead)+`' AND order_key IS NOT NULL) k`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count held keys: %w", err)
	}
	return n, nil
}
