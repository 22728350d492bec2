-- +goose Up

-- Reconciliation asks Stripe's Events API which events the endpoint should
-- have received and runs the ones hookd never saw through the pipeline.
-- Each run is kept, so any replica's dashboard can say when the last one
-- ran and what it found.
CREATE TABLE reconcile_runs (
    id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    started_at        timestamptz NOT NULL,
    finished_at       timestamptz NOT NULL DEFAULT now(),
    -- schedule: the loop in hookd serve; command: hookd reconcile;
    -- dashboard: an operator.
    trigger           text        NOT NULL CHECK (trigger IN ('schedule', 'command', 'dashboard')),
    -- The window: events created at or after this were listed.
    since             timestamptz NOT NULL,
    examined          integer     NOT NULL DEFAULT 0,
    already_processed integer     NOT NULL DEFAULT 0,
    already_queued    integer     NOT NULL DEFAULT 0,
    recovered         integer     NOT NULL DEFAULT 0,
    queued            integer     NOT NULL DEFAULT 0,
    in_flight         integer     NOT NULL DEFAULT 0,
    skipped_type      integer     NOT NULL DEFAULT 0,
    skipped_young     integer     NOT NULL DEFAULT 0,
    -- Why the run stopped early; null when it completed.
    error             text
);
CREATE INDEX reconcile_runs_finished_idx ON reconcile_runs (finished_at DESC);

-- A recovered event's attempt says it came from reconciliation: with no
-- signed delivery behind it, that attempt is what tells it apart.
ALTER TABLE webhook_attempts
    DROP CONSTRAINT webhook_attempts_path_check,
    ADD CONSTRAINT webhook_attempts_path_check
        CHECK (path IN ('inline', 'retry', 'manual', 'reconcile'));

-- An operator's reconcile run and "Pull from Stripe" are audited like any
-- other action. The new list is a superset of the old one.
ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove', 'retry_group',
                          'reconcile', 'pull'));

-- +goose Down

-- NOT VALID: the rows already written stay as the record of what happened.
ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove', 'retry_group')) NOT VALID;
ALTER TABLE webhook_attempts
    DROP CONSTRAINT webhook_attempts_path_check,
    ADD CONSTRAINT webhook_attempts_path_check
        CHECK (path IN ('inline', 'retry', 'manual')) NOT VALID;
DROP TABLE reconcile_runs;
