-- +goose Up

-- Several destinations: an event routed to several apps has a delivery to
-- each, and a delivery that fails waits on the retry queue on its own, with
-- its own attempts, backoff and dead letter. A queue row is now one
-- delivery: an event and the destination it is for. Every row before this
-- migration was a delivery to the one app HOOKD_FORWARD_URL named, which is
-- the destination "default". The payload stays in the row: only the
-- deliveries that failed have one, and the event log's marker keeps the
-- payload of an event once every delivery is done.
ALTER TABLE webhook_events ADD COLUMN destination text NOT NULL DEFAULT 'default';
ALTER TABLE webhook_events
    DROP CONSTRAINT webhook_events_source_event_id_key,
    ADD CONSTRAINT webhook_events_delivery_key UNIQUE (source, event_id, destination);

-- The key a delivery's lease, suspect row and fence count go by: the event
-- id for the destination "default", so that every row, lease and suspect
-- written before keeps its key; the event id, a slash and the destination
-- for any other (no Stripe event id has a slash). Deliveries of one event to
-- two destinations hold two leases and run at once: one app's slowness
-- never holds the other's retry of the same event.
-- +goose StatementBegin
CREATE FUNCTION hookd_delivery_key(event_id text, destination text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN destination = 'default' THEN event_id ELSE event_id || '/' || destination END;
-- +goose StatementEnd
ALTER TABLE webhook_events
    ADD COLUMN lease_key text COLLATE "C" GENERATED ALWAYS AS (hookd_delivery_key(event_id, destination)) STORED;
CREATE INDEX webhook_events_lease_key_idx ON webhook_events (lease_key);

-- Each attempt names the destination it was a call to.
ALTER TABLE webhook_attempts ADD COLUMN destination text NOT NULL DEFAULT 'default';

-- The event log shows an event once, whatever number of its deliveries wait
-- on the queue: the row of the first destination by name stands for it.
DROP VIEW event_log;
CREATE VIEW event_log AS
    SELECT m.event_id, m.event_type, m.endpoint, m.livemode, m.account, m.api_version, m.object_id, m.object_type,
           m.customer, m.stripe_created, m.received_at, m.processed_at, m.processed_how, m.processed_attempt,
           m.payload, m.payload_erased_at, m.payload_erased_by
    FROM processed_webhook_events m
    WHERE m.processed_how IS NOT NULL
    UNION ALL
    SELECT q.event_id, q.event_type, q.endpoint, q.livemode, q.account, q.api_version, q.object_id, q.object_type,
           q.customer, q.stripe_created, q.created_at, NULL,
           -- How it reached the queue: without an attempt, deferred, or
           -- held (a test-mode event its endpoint holds, put there dead);
           -- or after one failed.
           CASE WHEN q.last_attempt_at IS NOT NULL THEN 'queued'
                WHEN q.status = 'dead' THEN 'held'
                ELSE 'deferred' END,
           NULL, NULL, q.payload_erased_at, q.payload_erased_by
    FROM webhook_events q
    WHERE q.source = 'stripe'
      AND NOT EXISTS (SELECT 1 FROM processed_webhook_events m WHERE m.event_id = q.event_id)
      AND NOT EXISTS (SELECT 1 FROM webhook_events o
                      WHERE o.source = q.source AND o.event_id = q.event_id AND o.destination < q.destination);

-- +goose Down

DROP VIEW event_log;
CREATE VIEW event_log AS
    SELECT m.event_id, m.event_type, m.endpoint, m.livemode, m.account, m.api_version, m.object_id, m.object_type,
           m.customer, m.stripe_created, m.received_at, m.processed_at, m.processed_how, m.processed_attempt,
           m.payload, m.payload_erased_at, m.payload_erased_by
    FROM processed_webhook_events m
    WHERE m.processed_how IS NOT NULL
    UNION ALL
    SELECT q.event_id, q.event_type, q.endpoint, q.livemode, q.account, q.api_version, q.object_id, q.object_type,
           q.customer, q.stripe_created, q.created_at, NULL,
           CASE WHEN q.last_attempt_at IS NOT NULL THEN 'queued'
                WHEN q.status = 'dead' THEN 'held'
                ELSE 'deferred' END,
           NULL, NULL, q.payload_erased_at, q.payload_erased_by
    FROM webhook_events q
    WHERE q.source = 'stripe'
      AND NOT EXISTS (SELECT 1 FROM processed_webhook_events m WHERE m.event_id = q.event_id);
ALTER TABLE webhook_attempts DROP COLUMN destination;
DROP INDEX webhook_events_lease_key_idx;
ALTER TABLE webhook_events DROP COLUMN lease_key;
DROP FUNCTION hookd_delivery_key(text, text);
-- Deliveries to destinations other than "default" have no place in the
-- one-app queue.
DELETE FROM webhook_events WHERE destination <> 'default';
ALTER TABLE webhook_events
    DROP CONSTRAINT webhook_events_delivery_key,
    ADD CONSTRAINT webhook_events_source_event_id_key UNIQUE (source, event_id);
ALTER TABLE webhook_events DROP COLUMN destination;
