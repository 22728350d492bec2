-- +goose Up

-- The WAL timeline of the primary hookd writes to, as a replica last saw
-- it. A promoted standby starts a new timeline, and this table is logged,
-- so the row it holds is the old primary's: the first replica to read the
-- new timeline and write it here is the one that notices the failover,
-- logs it, audits it, alerts once, and reconciles with Stripe the window
-- an asynchronous standby may have lost.
CREATE TABLE database_timeline (
    one      boolean     PRIMARY KEY DEFAULT true CHECK (one),
    timeline bigint      NOT NULL,
    seen_at  timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove', 'retry_group',
                          'reconcile', 'pull', 'key_rotate', 'delivery_pause', 'delivery_resume',
                          'erase', 'replay_start', 'replay_cancel',
                          'oidc_login', 'oidc_refused', 'sessions_end',
                          'access_revoked', 'emergency_login', 'failover'));

ALTER TABLE reconcile_runs
    DROP CONSTRAINT reconcile_runs_trigger_check,
    ADD CONSTRAINT reconcile_runs_trigger_check
        CHECK (trigger IN ('schedule', 'command', 'dashboard', 'failover'));

-- +goose Down

-- NOT VALID: the entries already written stay.
ALTER TABLE reconcile_runs
    DROP CONSTRAINT reconcile_runs_trigger_check,
    ADD CONSTRAINT reconcile_runs_trigger_check
        CHECK (trigger IN ('schedule', 'command', 'dashboard')) NOT VALID;
ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove', 'retry_group',
                          'reconcile', 'pull', 'key_rotate', 'delivery_pause', 'delivery_resume',
                          'erase', 'replay_start', 'replay_cancel',
                          'oidc_login', 'oidc_refused', 'sessions_end',
                          'access_revoked', 'emergency_login')) NOT VALID;
DROP TABLE database_timeline;
