-- +goose Up

-- Every processing attempt of an event, inline or from the retry loop, so
-- support staff see an event's whole story and not only its last error. Keyed
-- by the Stripe event id because a queue row is deleted once it succeeds.
CREATE TABLE webhook_attempts (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source       text        NOT NULL,
    event_id     text        NOT NULL,
    attempted_at timestamptz NOT NULL DEFAULT now(),
    duration_ms  double precision NOT NULL CHECK (duration_ms >= 0),
    outcome      text        NOT NULL CHECK (outcome IN ('succeeded', 'failed')),
    http_status  integer,
    error        text,
    -- inline: the receiver; retry: the retry loop; manual: the retry loop
    -- acting on a person's "retry" from the dashboard.
    path         text        NOT NULL CHECK (path IN ('inline', 'retry', 'manual')),
    attempt      integer     NOT NULL CHECK (attempt >= 0)
);
CREATE INDEX webhook_attempts_event_idx ON webhook_attempts (source, event_id, attempted_at);
CREATE INDEX webhook_attempts_attempted_at_brin ON webhook_attempts USING brin (attempted_at);

-- Set when a person sends an event back to the queue, so its next attempt is
-- recorded as manual; cleared by that attempt.
ALTER TABLE webhook_events ADD COLUMN manual_retry boolean NOT NULL DEFAULT false;

-- The background loops report here, so the dashboard of any replica can say
-- whether some retry loop is alive and when a prune last ran.
CREATE TABLE worker_status (
    component    text        PRIMARY KEY CHECK (component IN ('retrier', 'pruner')),
    last_run_at  timestamptz NOT NULL,
    last_removed bigint
);

-- +goose Down
DROP TABLE worker_status;
ALTER TABLE webhook_events DROP COLUMN manual_retry;
DROP TABLE webhook_attempts;
