-- +goose Up

-- A processed event's marker keeps the api_version its queue row kept, so
-- that the event log shows it whatever became of the event. No CHECK
-- constraint, as for the marker's other log columns (00019).
ALTER TABLE processed_webhook_events ADD COLUMN api_version text;

-- The event_log view as 00021 left it, with api_version from both halves.
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
      AND NOT EXISTS (SELECT 1 FROM processed_webhook_events m WHERE m.event_id = q.event_id);

-- +goose Down

DROP VIEW event_log;
CREATE VIEW event_log AS
    SELECT m.event_id, m.event_type, m.endpoint, m.livemode, m.account, m.object_id, m.object_type, m.customer,
           m.stripe_created, m.received_at, m.processed_at, m.processed_how, m.processed_attempt,
           m.payload, m.payload_erased_at, m.payload_erased_by
    FROM processed_webhook_events m
    WHERE m.processed_how IS NOT NULL
    UNION ALL
    SELECT q.event_id, q.event_type, q.endpoint, q.livemode, q.account, q.object_id, q.object_type, q.customer,
           q.stripe_created, q.created_at, NULL,
           -- How it reached the queue: without an attempt, deferred, or
           -- held (a test-mode event its endpoint holds, put there dead);
           -- or after one failed.
           CASE WHEN q.last_attempt_at IS NOT NULL THEN 'queued'
                WHEN q.status = 'dead' THEN 'held'
                ELSE 'deferred' END,
           NULL, NULL, q.payload_erased_at, q.payload_erased_by
    FROM webhook_events q
    WHERE q.source = 'stripe'
      AND NOT EXISTS (SELECT 1 FROM processed_webhook_events m WHERE m.event_id = q.event_id);
ALTER TABLE processed_webhook_events DROP COLUMN api_version;
