-- +goose Up

-- `hookd keys rotate` replaces a signing key without a restart: each name
-- keeps its keys by generation, the newest signs, and the one before it is
-- still accepted for a while after it was replaced (its successor's
-- created_at says since when). The existing key of each name is
-- generation 1, so forms signed before the upgrade stay valid.
ALTER TABLE signing_keys ADD COLUMN generation integer NOT NULL DEFAULT 1 CHECK (generation >= 1);
ALTER TABLE signing_keys ALTER COLUMN generation DROP DEFAULT;
ALTER TABLE signing_keys
    DROP CONSTRAINT signing_keys_pkey,
    ADD PRIMARY KEY (name, generation);

-- A rotation is audited; it is done from the server's command line, so
-- the entry names the command rather than an account.
ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove', 'retry_group',
                          'reconcile', 'pull', 'key_rotate'));

-- +goose Down

-- NOT VALID: the rows already written stay as the record of what happened.
ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove', 'retry_group',
                          'reconcile', 'pull')) NOT VALID;
-- Only the newest key of each name is kept: it is what signs.
DELETE FROM signing_keys k
WHERE generation < (SELECT max(generation) FROM signing_keys n WHERE n.name = k.name);
ALTER TABLE signing_keys
    DROP CONSTRAINT signing_keys_pkey,
    ADD PRIMARY KEY (name);
ALTER TABLE signing_keys DROP COLUMN generation;
