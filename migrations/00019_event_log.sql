-- +goose Up

-- The event log: what hookd keeps of every event it accepted, whatever
-- became of it. A processed event's entry is its marker, which gains the
-- log's columns here and is written with them in the short transaction
-- that writes it; an event still on the queue (or dead) is its queue row,
-- which already holds all of it. One row, not a marker and a log row: on
-- the receiver's benchmark a second row for every event, with its own key,
-- cost the receiver about a quarter of its throughput, the wider marker
-- almost nothing. The marker keeps the seed's meaning: a row is a processed
-- event, and only its existence answers dedup. A marker written without
-- the log's columns (before this migration, or by the seed's functions)
-- has a null processed_how and is no entry of the log.
--
-- Metadata lives as long as the marker (HOOKD_MARKER_RETENTION); the
-- payload until HOOKD_PAYLOAD_RETENTION or an erasure sets it to null.
--
-- The new columns have no CHECK constraints, unlike the queue's: the
-- receiver inserts markers a few to a statement, and PostgreSQL reads and
-- compiles a table's CHECK constraints again for every INSERT statement,
-- which on the receiver's benchmark cost more than the columns themselves.
-- queue/eventlog.go is the one writer of these columns; it keeps
-- processed_how to queue.LogHow's values, sets event_type, endpoint and
-- received_at whenever it sets processed_how, and sets payload_erased_at
-- and payload_erased_by together, with payload null.
ALTER TABLE processed_webhook_events
    ADD COLUMN event_type        text,
    ADD COLUMN endpoint          text,
    ADD COLUMN livemode          boolean,
    ADD COLUMN account           text,
    ADD COLUMN object_id         text,
    ADD COLUMN object_type       text,
    ADD COLUMN customer          text,
    -- Stripe's created: what "out of order" compares.
    ADD COLUMN stripe_created    timestamptz,
    -- When hookd first accepted it, on the database's clock like
    -- processed_at: for an event processed while Stripe waited, the moment
    -- the app answered; for a queued one, when its queue row was written.
    ADD COLUMN received_at       timestamptz,
    -- How it was processed (queue.LogHow); null for a marker that is no
    -- entry of the log.
    ADD COLUMN processed_how     text,
    -- The attempt that processed it, for retry and manual.
    ADD COLUMN processed_attempt integer,
    -- The exact request body, compressed in S2's block format
    -- (github.com/klauspost/compress/s2; queue.LoggedPayload reads it):
    -- the payload is most of the bytes a delivery writes, and compressing
    -- it in hookd, as bytes, costs less than PostgreSQL taking it as text.
    ADD COLUMN payload           bytea,
    ADD COLUMN payload_erased_at timestamptz,
    ADD COLUMN payload_erased_by text;

-- What a queued event's marker takes when it is processed: its Stripe
-- created, and an erasure asked for while it waited, which its queue row
-- cannot carry out (its delivery needs the payload).
ALTER TABLE webhook_events
    ADD COLUMN stripe_created    timestamptz,
    ADD COLUMN payload_erased_at timestamptz,
    ADD COLUMN payload_erased_by text,
    ADD CONSTRAINT webhook_events_erased_check CHECK ((payload_erased_at IS NULL) = (payload_erased_by IS NULL));

-- Per-object and per-customer history, read newest first by scanning
-- backwards: in ascending order a busy customer's new entries go to the
-- right edge of its range, where a descending index would put every one
-- of them on its range's first page. And the payload prune, which walks
-- only rows that still hold one, oldest first. No marker written before
-- this migration is in any of them, so each build is one scan of the
-- table, during which the receiver's writes wait (about 70 ms for a
-- million cached markers); built concurrently instead, a failure would
-- leave the migration half done, as CREATE INDEX CONCURRENTLY cannot run
-- in its transaction.
CREATE INDEX processed_webhook_events_object
    ON processed_webhook_events (object_id, received_at) WHERE object_id IS NOT NULL;
CREATE INDEX processed_webhook_events_customer
    ON processed_webhook_events (customer, received_at) WHERE customer IS NOT NULL;
CREATE INDEX processed_webhook_events_payload_age
    ON processed_webhook_events (received_at) WHERE payload IS NOT NULL;

-- The event log as one relation, for reading: the logged markers, and the
-- queue rows of events not processed yet. A queue row's payload stays on
-- the queue row (text, as the retry loop sends it): payload here is the
-- marker's only.
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

-- Erasing a customer's payloads is audited. The new list is a superset of
-- the old one.
ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove', 'retry_group',
                          'reconcile', 'pull', 'key_rotate', 'delivery_pause', 'delivery_resume',
                          'erase'));

-- +goose Down

-- NOT VALID: the rows already written stay as the record of what happened.
ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove', 'retry_group',
                          'reconcile', 'pull', 'key_rotate', 'delivery_pause', 'delivery_resume')) NOT VALID;
DROP VIEW event_log;
ALTER TABLE webhook_events
    DROP CONSTRAINT webhook_events_erased_check,
    DROP COLUMN payload_erased_by,
    DROP COLUMN payload_erased_at,
    DROP COLUMN stripe_created;
DROP INDEX processed_webhook_events_payload_age;
DROP INDEX processed_webhook_events_customer;
DROP INDEX processed_webhook_events_object;
ALTER TABLE processed_webhook_events
    DROP COLUMN payload_erased_by,
    DROP COLUMN payload_erased_at,
    DROP COLUMN payload,
    DROP COLUMN processed_attempt,
    DROP COLUMN processed_how,
    DROP COLUMN received_at,
    DROP COLUMN stripe_created,
    DROP COLUMN customer,
    DROP COLUMN object_type,
    DROP COLUMN object_id,
    DROP COLUMN account,
    DROP COLUMN livemode,
    DROP COLUMN endpoint,
    DROP COLUMN event_type;
