-- +goose Up

-- Stripe's ids compare byte by byte. The event log's object and customer
-- columns, and their history indexes, took the database's collation, and
-- with one that is not "C" (C.UTF-8 included, before PostgreSQL 17) every
-- comparison of the receiver's index inserts went through strcoll: in a
-- profile of the receiver's backends, the three new indexes' inserts were
-- the largest part of what the event log added, and text comparisons a
-- third of those. Changing a column's collation rewrites no table; it
-- rebuilds the indexes on the column, which hold only rows written since
-- 00019. The queue's columns change with them, so that the event_log view,
-- which unions the two, keeps one collation for each column.
DROP VIEW event_log;
ALTER TABLE processed_webhook_events
    ALTER COLUMN object_id TYPE text COLLATE "C",
    ALTER COLUMN customer TYPE text COLLATE "C";
ALTER TABLE webhook_events
    ALTER COLUMN object_id TYPE text COLLATE "C",
    ALTER COLUMN customer TYPE text COLLATE "C";
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

-- +goose Down

DROP VIEW event_log;
ALTER TABLE webhook_events
    ALTER COLUMN object_id TYPE text COLLATE "default",
    ALTER COLUMN customer TYPE text COLLATE "default";
ALTER TABLE processed_webhook_events
    ALTER COLUMN object_id TYPE text COLLATE "default",
    ALTER COLUMN customer TYPE text COLLATE "default";
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
