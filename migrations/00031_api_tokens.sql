-- +goose Up

-- API tokens: each belongs to a dashboard account and acts with a scope
-- no wider than that account's role (read = viewer, operate = operator,
-- admin = admin), checked against the account's current role at every
-- use. Only the SHA-256 of the secret is kept.
--
-- account_id has no foreign key on purpose: a removed account's tokens
-- stay, refused as "account removed" and listed under the email they were
-- made for (account_email), instead of vanishing with the account. Account
-- ids are identities, never reused, so no later account inherits them.
CREATE TABLE api_tokens (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id    bigint      NOT NULL,
    account_email text        NOT NULL,
    name          text        NOT NULL CHECK (name <> '' AND length(name) <= 100),
    scope         text        NOT NULL CHECK (scope IN ('read', 'operate', 'admin')),
    secret_hash   bytea       NOT NULL CHECK (length(secret_hash) = 32),
    created_at    timestamptz NOT NULL DEFAULT now(),
    -- NULL: the token never expires.
    expires_at    timestamptz CHECK (expires_at > created_at),
    -- Written at most once a minute, so most requests write nothing.
    last_used_at  timestamptz,
    revoked_at    timestamptz
);
-- Every request finds its token here, by the hash of its secret.
CREATE UNIQUE INDEX api_tokens_secret_hash_key ON api_tokens (secret_hash);
CREATE INDEX api_tokens_account_idx ON api_tokens (account_id, id);

ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove', 'retry_group',
                          'reconcile', 'pull', 'key_rotate', 'delivery_pause', 'delivery_resume',
                          'erase', 'replay_start', 'replay_cancel',
                          'oidc_login', 'oidc_refused', 'sessions_end',
                          'access_revoked', 'emergency_login', 'failover',
                          'token_create', 'token_revoke'));

-- +goose Down

-- NOT VALID: the entries already written stay.
ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove', 'retry_group',
                          'reconcile', 'pull', 'key_rotate', 'delivery_pause', 'delivery_resume',
                          'erase', 'replay_start', 'replay_cancel',
                          'oidc_login', 'oidc_refused', 'sessions_end',
                          'access_revoked', 'emergency_login', 'failover')) NOT VALID;
DROP TABLE api_tokens;
