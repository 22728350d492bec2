-- +goose Up

-- Destinations an admin manages on the dashboard, while no
-- HOOKD_DESTINATIONS_FILE is set: their route is in route as a file's is;
-- their signing secrets (a JSON list) and extra headers (a JSON object of
-- names to values) are kept sealed, AES-256-GCM under
-- HOOKD_DESTINATIONS_KEY, nonce before ciphertext, never in the clear.
ALTER TABLE destinations
    DROP CONSTRAINT destinations_source_check,
    ADD CONSTRAINT destinations_source_check CHECK (source IN ('file', 'forward_url', 'dashboard')),
    ADD COLUMN signing_secrets_sealed bytea,
    ADD COLUMN headers_sealed bytea,
    -- The last add or edit on the dashboard, and who made it.
    ADD COLUMN updated_at timestamptz,
    ADD COLUMN updated_by text,
    ADD CONSTRAINT destinations_sealed_check CHECK (source = 'dashboard' OR (signing_secrets_sealed IS NULL AND headers_sealed IS NULL));

-- Adding, editing and removing a destination on the dashboard are
-- audited. The new list is a superset of the old one.
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
                          'destination_pause', 'destination_resume', 'destination_move', 'destination_drop',
                          'destination_add', 'destination_edit', 'destination_remove'));

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
                          'token_create', 'token_revoke',
                          'destination_pause', 'destination_resume', 'destination_move', 'destination_drop')) NOT VALID;
-- The dashboard's destinations have no place in a release that does not
-- manage them: their deliveries stay, to a destination it does not know.
DELETE FROM destinations WHERE source = 'dashboard';
ALTER TABLE destinations
    DROP CONSTRAINT destinations_sealed_check,
    DROP COLUMN updated_by,
    DROP COLUMN updated_at,
    DROP COLUMN headers_sealed,
    DROP COLUMN signing_secrets_sealed,
    DROP CONSTRAINT destinations_source_check,
    ADD CONSTRAINT destinations_source_check CHECK (source IN ('file', 'forward_url'));
