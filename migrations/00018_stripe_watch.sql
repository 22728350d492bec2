-- +goose Up

-- Watching Stripe's side. Each labelled endpoint has conditions of its own
-- (disabled, API version, quiet), named kind:label, beside the
-- deployment's; generation_failures is the account's, since an event
-- Stripe failed to generate reached no endpoint at all. The rows of an
-- endpoint's conditions are added by the alerter when it first watches
-- it; created_at is when, which a quiet endpoint that never sent anything
-- is measured from.
ALTER TABLE alert_conditions
    DROP CONSTRAINT alert_conditions_condition_check,
    ADD CONSTRAINT alert_conditions_condition_check
        CHECK (condition IN ('dead', 'pending_age', 'retrier_stalled', 'signature_failures', 'breaker_open',
                             'generation_failures')
               OR condition ~ '^(stripe_disabled|stripe_version|quiet):[a-z0-9_-]{1,32}$');
ALTER TABLE alert_conditions ADD COLUMN created_at timestamptz NOT NULL DEFAULT now();
INSERT INTO alert_conditions (condition) VALUES ('generation_failures');

-- What Stripe's API last said of each endpoint with a stripe_id: one row
-- per label, read by one replica at a time (claimed_at) at most once per
-- watch interval, so however many replicas run, the reads stay within the
-- API budget. api_version_since is when its api_version was first read;
-- expected_api_version is the version the app is known to get through the
-- endpoint: the endpoint's own at the first read, then the version of the
-- events received through it since.
CREATE TABLE stripe_endpoint_watch (
    endpoint             text        PRIMARY KEY,
    stripe_id            text        NOT NULL,
    claimed_at           timestamptz NOT NULL DEFAULT '-infinity',
    read_at              timestamptz,
    -- enabled, disabled, or missing (Stripe answered 404).
    status               text        CHECK (status IN ('enabled', 'disabled', 'missing')),
    api_version          text        NOT NULL DEFAULT '',
    api_version_since    timestamptz,
    expected_api_version text        NOT NULL DEFAULT '',
    -- The last read that failed, and why (a rejected key, no answer);
    -- cleared by the next read that works.
    read_error           text        NOT NULL DEFAULT ''
);

-- v2.core.health.event_generation_failure.resolved notices: Stripe telling
-- hookd that it failed to create events, which are therefore in no list
-- and can be recovered by nothing. The notice itself is a thin event; what
-- it says of the lost event (its type, its object, Stripe's summary) is
-- kept when the notice carries it. alerted_at is set once an alert named
-- it.
CREATE TABLE stripe_generation_failures (
    event_id    text        PRIMARY KEY,
    received_at timestamptz NOT NULL DEFAULT now(),
    livemode    boolean     NOT NULL,
    lost_type   text        NOT NULL DEFAULT '',
    object_id   text        NOT NULL DEFAULT '',
    summary     text        NOT NULL DEFAULT '',
    alerted_at  timestamptz
);
CREATE INDEX stripe_generation_failures_unannounced_idx ON stripe_generation_failures (received_at)
    WHERE alerted_at IS NULL;

-- +goose Down
DROP TABLE stripe_generation_failures;
DROP TABLE stripe_endpoint_watch;
DELETE FROM alert_conditions WHERE condition NOT IN ('dead', 'pending_age', 'retrier_stalled', 'signature_failures', 'breaker_open');
ALTER TABLE alert_conditions
    DROP COLUMN created_at,
    DROP CONSTRAINT alert_conditions_condition_check,
    ADD CONSTRAINT alert_conditions_condition_check
        CHECK (condition IN ('dead', 'pending_age', 'retrier_stalled', 'signature_failures', 'breaker_open'));
