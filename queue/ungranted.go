package queue

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// QueueUngranted puts a delivered event the database has never seen (no
// marker, no queue row, no lease) on the retry queue, unprocessed and due
// at once, without a lease: for when no lease can be granted (the grace
// after the database lost its leases, a fenced replica). Queuing needs no
// lease, since nothing runs: the retry loop runs the event once it can
// take its lease. It reports DeliveryQueuedUngranted when it queued e,
// DeliveryProcessed or DeliveryQueued when the event had a marker or a
// queue row, and DeliveryBusy when a lease is on the event (whoever holds
// it finds out what it is).
//
// For the length of its transaction it holds a placeholder lease, already
// expired and deleted before the commit, so that a path taking the event's
// lease at the same moment waits for it and then finds the queue row: the
// event is never both queued here and run under a lease taken meanwhile.
// An event routed to several destinations gets a queue row for each of
// more, all of one event, besides e's.
func (s *Store) QueueUngranted(ctx context.Context, e FailedEvent, more ...FailedEvent) (DeliveryState, error) {
	owner := uuid.New()
	var q queuedColumns
	q.add(e, owner, 0, false)
	for _, m := range more {
		q.add(m, owner, 0, false)
	}
	var st struct{ Processed, Queued, Locked, Inserted bool }
	err := s.shortTx(ctx, func(b *pgx.Batch) {
		b.Queue(`
			INSERT INTO webhook_leases (event_id, owner, path, expires_at)
			VALUES ($1, $2, $3, now()) ON CONFLICT (event_id) DO NOTHING`, e.EventID, [16]byte(owner), PathInline)
		b.Queue(queueUngrantedSQL, append([]any{e.EventID, [16]byte(owner)}, q.args()...)...)
		b.Queue(`DELETE FROM webhook_leases WHERE event_id = $1 AND owner = $2`, e.EventID, [16]byte(owner))
	}, func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return err
		}
		if err := br.QueryRow().Scan(&st.Processed, &st.Queued, &st.Locked, &st.Inserted); err != nil {
			return err
		}
		_, err := br.Exec()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("queue %s without a lease: %w", e.EventID, err)
	}
	switch {
	case st.Inserted:
		return DeliveryQueuedUngranted, nil
	case st.Processed:
		return DeliveryProcessed, nil
	case st.Queued:
		return DeliveryQueued, nil
	}
	return DeliveryBusy, nil
}

// queueUngrantedSQL inserts the queue rows ($3-$25, as queuedColumns orders
// them) of event $1 when the placeholder lease of owner $2 is its lease
// and it has neither a marker nor a queue row, and returns what it read
// and whether it inserted the row.
var queueUngrantedSQL = `
	WITH s AS MATERIALIZED (
		SELECT ` + markedSQL("$1::text") + ` AS processed, ` + queuedSQL("($3::text[])[1]", "$1::text") + ` AS queued,
		       (SELECT true FROM webhook_leases l WHERE l.event_id = $1 AND l.owner = $2) IS NOT NULL AS locked
	), enqueued AS (
		INSERT INTO webhook_events (source, event_id, event_type, payload, signature, last_error, next_retry_at,
		                            status, dead_alerted_at, ` + metaColumns + `, stripe_created, trace_parent, destination,
		                            order_key, order_seq)
		SELECT e.source, e.event_id, e.event_type, e.payload, NULLIF(e.signature, ''), e.error,
		       now() + make_interval(secs => e.wait),
		       CASE WHEN e.held THEN 'dead' ELSE 'failed' END, CASE WHEN e.held THEN now() END,
		       e.endpoint, e.livemode, NULLIF(e.account, ''), NULLIF(e.api_version, ''), NULLIF(e.object_id, ''),
		       NULLIF(e.object_type, ''), NULLIF(e.customer, ''), NULLIF(e.snapshot_event, ''), e.created,
		       NULLIF(e.trace_parent, ''), e.destination, NULLIF(e.order_key, ''),
		       CASE WHEN e.order_key <> '' THEN coalesce(NULLIF(e.order_seq, 0), nextval('webhook_order_seq')) END
		FROM s, unnest($3::text[], $4::text[], $5::uuid[], $6::text[], $7::text[], $8::text[], $9::text[], $10::float8[],
		            $11::bool[], $12::bool[], $13::text[], $14::bool[], $15::text[], $16::text[], $17::text[], $18::text[],
		            $19::text[], $20::text[], $21::timestamptz[], $22::text[], $23::text[], $24::text[], $25::int8[])
		     AS e(source, event_id, owner, event_type, payload, signature, error, wait, attempted,
		          held, endpoint, livemode, account, api_version, object_id, object_type, customer, snapshot_event, created,
		          trace_parent, destination, order_key, order_seq)
		WHERE s.locked AND NOT s.processed AND NOT s.queued
		ON CONFLICT (source, event_id, destination) DO NOTHING
		RETURNING 1
	)
	SELECT processed, queued, locked, (SELECT count(*) FROM enqueued) > 0 FROM s`
