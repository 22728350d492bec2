-- +goose Up

-- Admins manage accounts from the dashboard, and each change is audited
-- like any other action. The new list is a superset of the old one, so the
-- rows already there pass the check.
ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove'));

-- +goose Down

-- NOT VALID: the account entries already written stay in the log, where
-- they remain the record of who changed which account; only new rows are
-- held to the old list.
ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune')) NOT VALID;
