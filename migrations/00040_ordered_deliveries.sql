-- +goose Up

-- A destination with order_by gets the events of one key (a customer, say)
-- one at a time, in the order hookd accepted them.
--
-- order_key is the delivery's key, NULL for a destination without order_by
-- or an event without the field; order_seq is when hookd accepted the
-- delivery, a number of webhook_order_seq taken under the key's lease, so
-- that a delivery that failed inline is put before one accepted while it
-- ran, although its row is written after. A delivery is the head of its
-- key while no row of the same destination and key has a smaller
-- order_seq: only the head is claimed, and a dead head holds its key until
-- it is retried or a person releases it (order_key set to NULL).
ALTER TABLE webhook_events
    ADD COLUMN order_key text,
    ADD COLUMN order_seq bigint;
CREATE SEQUENCE webhook_order_seq;
CREATE INDEX webhook_events_order_idx ON webhook_events (destination, order_key, order_seq)
    WHERE order_key IS NOT NULL;

-- The lease of a (destination, key): held by the one call of the key in
-- flight, inline or a retry, over every replica. A row is never deleted
-- while in use, only given back (owner NULL), so that whoever takes it
-- next waits on the row's lock for the release's commit and then reads
-- the queue as that commit left it. waiters counts the deliveries of the
-- key refused their turn whose queue rows are not written yet: none is
-- granted before they are, so that no later delivery overtakes one; a
-- waiter that never writes (its process died) stops counting at
-- waiting_until. Unlogged like webhook_leases, under the same
-- lease_epoch: a crash of the database that loses it grants nothing until
-- every holder from before has stopped.
CREATE UNLOGGED TABLE webhook_order_leases (
    destination   text        NOT NULL,
    order_key     text        NOT NULL,
    owner         uuid,
    replica       uuid,
    expires_at    timestamptz NOT NULL DEFAULT '-infinity',
    waiters       integer     NOT NULL DEFAULT 0,
    waiting_until timestamptz NOT NULL DEFAULT '-infinity',
    PRIMARY KEY (destination, order_key)
);

-- A person lets a key go on past its dead event.
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
                          'destination_add', 'destination_edit', 'destination_remove',
                          'order_release'));

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
                          'destination_pause', 'destination_resume', 'destination_move', 'destination_drop',
                          'destination_add', 'destination_edit', 'destination_remove')) NOT VALID;
DROP TABLE webhook_order_leases;
DROP INDEX webhook_events_order_idx;
DROP SEQUENCE webhook_order_seq;
ALTER TABLE webhook_events DROP COLUMN order_seq, DROP COLUMN order_key;
