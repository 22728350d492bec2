-- +goose Up

-- The retry queue: one row per Stripe event whose processing failed and has not
-- succeeded since. The names and meanings of the seed's columns are kept.
CREATE TABLE webhook_events (
    id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    source          text        NOT NULL,
    event_id        text        NOT NULL,
    event_type      text        NOT NULL,
    -- The exact bytes Stripe sent; text rather than jsonb so nothing is re-encoded.
    payload         text        NOT NULL,
    signature       text,
    status          text        NOT NULL DEFAULT 'failed'
                                CHECK (status IN ('failed', 'retrying', 'dead')),
    attempts        integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error      text,
    -- First retry one minute after the inline attempt failed (the seed's default).
    next_retry_at   timestamptz NOT NULL DEFAULT now() + interval '60 seconds',
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_attempt_at timestamptz,
    -- A redelivered event never gets a second queue row.
    CONSTRAINT webhook_events_source_event_id_key UNIQUE (source, event_id)
);

-- ClaimDue, and the list of pending events: only the rows a claim can take,
-- in the order it takes them. (A pending row always has attempts < 5: the
-- failure that brings it to 5 makes it dead.)
CREATE INDEX webhook_events_due_idx ON webhook_events (next_retry_at, id)
    WHERE status IN ('failed', 'retrying');

-- The dead list and its filters: newest first.
CREATE INDEX webhook_events_dead_idx ON webhook_events (created_at DESC)
    WHERE status = 'dead';

-- Dedup markers: one row per event that was processed successfully.
CREATE TABLE processed_webhook_events (
    event_id     text        PRIMARY KEY,
    processed_at timestamptz NOT NULL DEFAULT now()
);

-- Markers arrive in time order, so a BRIN index finds the prunable range at a
-- tiny fraction of a b-tree's size and write cost.
CREATE INDEX processed_webhook_events_processed_at_brin
    ON processed_webhook_events USING brin (processed_at);

-- +goose Down
DROP TABLE processed_webhook_events;
DROP TABLE webhook_events;
