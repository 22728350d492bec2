-- +goose Up

-- Accounts that sign in through the company's identity provider (OpenID
-- Connect) are keyed by the provider's issuer and subject, never by email:
-- an email can be renamed or reused at the provider, the subject cannot.
-- They have no password (an empty hash, which no password matches), and
-- their email is only what the pages show, so it is unique among password
-- accounts alone: a person may have both kinds.
ALTER TABLE users
    ADD COLUMN oidc_issuer        text,
    ADD COLUMN oidc_subject       text,
    -- Shown on the accounts page, for both kinds of account.
    ADD COLUMN last_sign_in_at    timestamptz,
    -- Part of every session's stamp: an admin ending an account's
    -- sessions moves it on, and every session signed in before stops at
    -- its next request, on every replica, without finding them.
    ADD COLUMN session_generation bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT users_oidc_check CHECK ((oidc_issuer IS NULL) = (oidc_subject IS NULL));
CREATE UNIQUE INDEX users_oidc_key ON users (oidc_issuer, oidc_subject) WHERE oidc_issuer IS NOT NULL;
DROP INDEX users_email_key;
CREATE UNIQUE INDEX users_email_key ON users (lower(email)) WHERE oidc_issuer IS NULL;

-- The OpenID Connect sign-ins' state values that a callback has used, each
-- kept until the state would have expired anyway, so a callback replayed
-- from any browser, to any replica, is refused. Only a hash is kept.
CREATE TABLE oidc_used_states (
    state_hash bytea       PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE INDEX oidc_used_states_expires_idx ON oidc_used_states (expires_at);

ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove', 'retry_group',
                          'reconcile', 'pull', 'key_rotate', 'delivery_pause', 'delivery_resume',
                          'erase', 'replay_start', 'replay_cancel',
                          'oidc_login', 'oidc_refused', 'sessions_end'));

-- +goose Down

-- NOT VALID: the entries already written stay in the log.
ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove', 'retry_group',
                          'reconcile', 'pull', 'key_rotate', 'delivery_pause', 'delivery_resume',
                          'erase', 'replay_start', 'replay_cancel')) NOT VALID;
DROP TABLE oidc_used_states;
-- The provider's accounts go with their columns: without them they would
-- be password accounts nobody can sign in to, whose emails may clash.
DELETE FROM users WHERE oidc_issuer IS NOT NULL;
DROP INDEX users_email_key;
CREATE UNIQUE INDEX users_email_key ON users (lower(email));
DROP INDEX users_oidc_key;
ALTER TABLE users
    DROP CONSTRAINT users_oidc_check,
    DROP COLUMN session_generation,
    DROP COLUMN last_sign_in_at,
    DROP COLUMN oidc_subject,
    DROP COLUMN oidc_issuer;
