-- +goose Up

-- Each destination's own state, shared by the replicas: what it is (as the
-- replica that last applied its configuration read it), whether it is
-- retired, and its pause and circuit breaker, which every replica reads
-- about once a second, as delivery_control's row for all of delivery.
-- A destination taken out of the configuration while deliveries to it are
-- queued or dead is kept here, retired: it gets no new events, and support
-- moves its deliveries to another destination or drops them.
CREATE TABLE destinations (
    name               text        PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9-]{0,39}$'),
    url                text        NOT NULL,
    -- The route as configured (types, livemode, accounts, endpoints,
    -- filter), for the destinations page.
    route              jsonb       NOT NULL DEFAULT '{}',
    -- file: HOOKD_DESTINATIONS_FILE; forward_url: HOOKD_FORWARD_URL alone.
    source             text        NOT NULL CHECK (source IN ('file', 'forward_url')),
    concurrency        integer     CHECK (concurrency >= 0),
    timeout_seconds    double precision CHECK (timeout_seconds > 0),
    added_at           timestamptz NOT NULL DEFAULT now(),
    applied_at         timestamptz NOT NULL DEFAULT now(),
    retired_at         timestamptz,
    -- A person's pause of this destination: who, when and why.
    paused_at          timestamptz,
    paused_by          text,
    paused_reason      text,
    -- Its circuit breaker, as delivery_control's: app-down failures in a
    -- row, when it opened, the failure that opened it, the next probe.
    breaker_failures   integer     NOT NULL DEFAULT 0 CHECK (breaker_failures >= 0),
    breaker_opened_at  timestamptz,
    breaker_error      text,
    probe_due_at       timestamptz,
    probe_wait_seconds double precision NOT NULL DEFAULT 0,
    CHECK ((paused_at IS NULL) = (paused_by IS NULL) AND (paused_at IS NULL) = (paused_reason IS NULL))
);

-- The hash of the destinations each replica applied: doctor and the
-- dashboard's banner say when replicas differ.
ALTER TABLE hookd_replicas ADD COLUMN destinations_hash text;

-- Each destination's retry loop claims its own deliveries: from a backlog
-- of another's, without reading it.
CREATE INDEX webhook_events_destination_due_idx ON webhook_events (destination, next_retry_at, id)
    WHERE status IN ('failed', 'retrying');

-- A destination's pause and resume, and the moves and drops of a retired
-- destination's deliveries, are audited. The new list is a superset of the
-- old one.
ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove', 'retry_group',
                          'reconcile', 'pull', 'key_rotate', 'delivery_pause', 'delivery_resume',
                          'erase', 'replay_start', 'replay_cancel',
                          'oidc_login', 'oidc_refused', 'sessions_end',
                          'access_revoked', 'emergency_login', 'failover',
                          'token_create', 'token_revoke',
                          'destination_pause', 'destination_resume', 'destination_move', 'destination_drop'));

-- +goose Down

-- NOT VALID: the rows already written stay as the record of what happened.
ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove', 'retry_group',
                          'reconcile', 'pull', 'key_rotate', 'delivery_pause', 'delivery_resume',
                          'erase', 'replay_start', 'replay_cancel',
                          'oidc_login', 'oidc_refused', 'sessions_end',
                          'access_revoked', 'emergency_login', 'failover',
                          'token_create', 'token_revoke')) NOT VALID;
DROP INDEX webhook_events_destination_due_idx;
ALTER TABLE hookd_replicas DROP COLUMN destinations_hash;
DROP TABLE destinations;
