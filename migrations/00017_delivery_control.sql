-- +goose Up

-- Delivery can be held: paused by a person, or by the circuit breaker after
-- consecutive failures that say the app is down. One row that every
-- replica reads about once a second, so they agree on whether to deliver;
-- the receiver and the retry loop count the app-down failures on it in the
-- short transactions that write their outcomes.
CREATE TABLE delivery_control (
    id                 boolean     PRIMARY KEY DEFAULT true CHECK (id),
    -- A person's pause: who, when and why; all null while not paused.
    paused_at          timestamptz,
    paused_by          text,
    paused_reason      text,
    -- The breaker: app-down failures in a row (any other outcome sets it
    -- back to 0), when it opened (null: closed), the failure that opened
    -- it, when the next probe is due and the wait after that one.
    breaker_failures   integer     NOT NULL DEFAULT 0 CHECK (breaker_failures >= 0),
    breaker_opened_at  timestamptz,
    breaker_error      text,
    probe_due_at       timestamptz,
    probe_wait_seconds double precision NOT NULL DEFAULT 0,
    CHECK ((paused_at IS NULL) = (paused_by IS NULL) AND (paused_at IS NULL) = (paused_reason IS NULL))
);
INSERT INTO delivery_control DEFAULT VALUES;

ALTER TABLE alert_conditions
    DROP CONSTRAINT alert_conditions_condition_check,
    ADD CONSTRAINT alert_conditions_condition_check
        CHECK (condition IN ('dead', 'pending_age', 'retrier_stalled', 'signature_failures', 'breaker_open'));
INSERT INTO alert_conditions (condition) VALUES ('breaker_open');

-- Pausing and resuming delivery are audited. The new list is a superset of
-- the old one.
ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove', 'retry_group',
                          'reconcile', 'pull', 'key_rotate', 'delivery_pause', 'delivery_resume'));

-- +goose Down

-- NOT VALID: the rows already written stay as the record of what happened.
ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove', 'retry_group',
                          'reconcile', 'pull', 'key_rotate')) NOT VALID;
DELETE FROM alert_conditions WHERE condition = 'breaker_open';
ALTER TABLE alert_conditions
    DROP CONSTRAINT alert_conditions_condition_check,
    ADD CONSTRAINT alert_conditions_condition_check
        CHECK (condition IN ('dead', 'pending_age', 'retrier_stalled', 'signature_failures'));
DROP TABLE delivery_control;
