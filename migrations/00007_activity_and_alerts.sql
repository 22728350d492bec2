-- +goose Up

-- What the pipeline did, per minute and per replica, for the overview's
-- charts and the signature-failure alert. Each replica counts in memory and
-- adds its counts to its own row of the current minute every few seconds:
-- no delivery ever waits on a counter row another replica writes, and a
-- chart never scans the queue. A crash loses the last few seconds of counts,
-- never an event. The pruner deletes rows older than the 7 days the charts
-- show, plus a margin.
CREATE TABLE activity_minutes (
    minute        timestamptz NOT NULL,
    replica       text        NOT NULL,
    -- Deliveries to the receiver, whatever the answer.
    received      bigint      NOT NULL DEFAULT 0 CHECK (received >= 0),
    -- Events processed successfully, inline or by a retry.
    processed     bigint      NOT NULL DEFAULT 0 CHECK (processed >= 0),
    -- Deliveries whose inline processing failed, put on the retry queue.
    queued        bigint      NOT NULL DEFAULT 0 CHECK (queued >= 0),
    -- Retries the retry loop ran, whatever their result.
    retried       bigint      NOT NULL DEFAULT 0 CHECK (retried >= 0),
    -- Events that used up their retries.
    dead          bigint      NOT NULL DEFAULT 0 CHECK (dead >= 0),
    -- Deliveries the receiver refused with a 4xx, and of those, the ones
    -- refused for their signature.
    rejected      bigint      NOT NULL DEFAULT 0 CHECK (rejected >= 0),
    bad_signature bigint      NOT NULL DEFAULT 0 CHECK (bad_signature >= 0),
    PRIMARY KEY (minute, replica)
);

-- One row per alert condition, so that every replica agrees on whether it
-- has been announced: a replica changes a row only while it holds its row
-- lock, and sends only the changes it committed, so two replicas never
-- announce one change twice.
CREATE TABLE alert_conditions (
    condition    text        PRIMARY KEY
                             CHECK (condition IN ('dead', 'pending_age', 'retrier_stalled', 'signature_failures')),
    active       boolean     NOT NULL DEFAULT false,
    -- While active: when the condition started, and when it was last seen.
    since        timestamptz,
    last_seen_at timestamptz,
    -- dead: how many events went dead since it started.
    count        bigint      NOT NULL DEFAULT 0
);
INSERT INTO alert_conditions (condition)
VALUES ('dead'), ('pending_age'), ('retrier_stalled'), ('signature_failures');

-- When a dead event was announced. An event that dies again after a person
-- sent it back has a last attempt newer than its announcement, so it is
-- announced again; the events already dead when this column arrived count
-- as announced.
ALTER TABLE webhook_events ADD COLUMN dead_alerted_at timestamptz;
UPDATE webhook_events SET dead_alerted_at = now() WHERE status = 'dead';
CREATE INDEX webhook_events_dead_unannounced_idx ON webhook_events (last_attempt_at)
    WHERE status = 'dead' AND (dead_alerted_at IS NULL OR dead_alerted_at < last_attempt_at);

-- +goose Down
DROP INDEX webhook_events_dead_unannounced_idx;
ALTER TABLE webhook_events DROP COLUMN dead_alerted_at;
DROP TABLE alert_conditions;
DROP TABLE activity_minutes;
