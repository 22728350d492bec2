-- +goose Up

-- An event's lease: who may run its processor now, and until when. It
-- replaces the advisory lock held in a transaction across the app call: a
-- lease is taken in one short transaction that commits before the app is
-- called, and given back with the outcome in another, fenced by its owner,
-- so no transaction, snapshot or pooled connection waits on the app.
--
-- One row per event id, whoever runs it: a delivery, the retry loop,
-- reconciliation. A live lease (expires_at in the future) keeps every other
-- path off the event; an expired one is taken over. Its holder's processor
-- always ends before expires_at, so a takeover never overlaps a run.
--
-- Unlogged: a lease lives seconds, and a crash of the database ends every
-- session that could hold one, as it ended the advisory locks before; so
-- its writes cost no WAL, and a transaction that takes leases and nothing
-- else commits without waiting for a flush. (A standby has no leases either,
-- which after a failover is again what the advisory locks gave.)
CREATE UNLOGGED TABLE webhook_leases (
    event_id   text        PRIMARY KEY,
    -- A token of the holder's, new for each take: an outcome is written
    -- only while its holder still owns the row.
    owner      uuid        NOT NULL,
    -- inline, retry, manual or reconcile: who holds it, for the dashboard.
    path       text        NOT NULL,
    taken_at   timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
) WITH (
    -- Every lease is inserted and deleted within seconds: vacuum it often,
    -- whatever its size, so the dead rows never outnumber the live ones.
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 1000,
    fillfactor = 80
);

-- +goose Down
DROP TABLE webhook_leases;
