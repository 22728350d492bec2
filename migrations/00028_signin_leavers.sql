-- +goose Up

-- A person the identity provider stops letting in loses hookd's access at
-- once. With HOOKD_OIDC_RECHECK, the account of a signed-in person keeps
-- the refresh token of its last sign-in, encrypted under a key derived
-- from the client secret (without which the token is useless anyway), and
-- is asked about again when oidc_recheck_at comes; oidc_recheck_until is
-- the lease of the replica asking, as some providers revoke a refresh
-- token used twice at once.
ALTER TABLE users
    ADD COLUMN oidc_refresh_token bytea,
    ADD COLUMN oidc_recheck_at    timestamptz,
    ADD COLUMN oidc_recheck_until timestamptz;
CREATE INDEX users_oidc_recheck_idx ON users (oidc_recheck_at) WHERE oidc_refresh_token IS NOT NULL;

-- Audit entries name the account beside its email, which the person may
-- change at the provider and which is not unique among its accounts: its
-- id, and for the provider's accounts its issuer and subject. Entries
-- written before have none.
ALTER TABLE audit_log
    ADD COLUMN account_id      bigint,
    ADD COLUMN account_issuer  text,
    ADD COLUMN account_subject text,
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove', 'retry_group',
                          'reconcile', 'pull', 'key_rotate', 'delivery_pause', 'delivery_resume',
                          'erase', 'replay_start', 'replay_cancel',
                          'oidc_login', 'oidc_refused', 'sessions_end',
                          'access_revoked', 'emergency_login'));

-- +goose Down

ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove', 'retry_group',
                          'reconcile', 'pull', 'key_rotate', 'delivery_pause', 'delivery_resume',
                          'erase', 'replay_start', 'replay_cancel',
                          'oidc_login', 'oidc_refused', 'sessions_end')) NOT VALID,
    DROP COLUMN account_subject,
    DROP COLUMN account_issuer,
    DROP COLUMN account_id;
DROP INDEX users_oidc_recheck_idx;
ALTER TABLE users
    DROP COLUMN oidc_recheck_until,
    DROP COLUMN oidc_recheck_at,
    DROP COLUMN oidc_refresh_token;
