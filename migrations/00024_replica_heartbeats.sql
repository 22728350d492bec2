-- +goose Up

-- Leases that cost no WAL and a dead replica that lets go within seconds.
--
-- Each replica that holds leases beats: a row of hookd_replicas whose
-- beat_at it moves every second. A lease names its holder's replica, and is
-- live while it has not expired and its replica has beaten within the
-- silence limit (queue.ReplicaSilence); a replica that stops beating (killed,
-- cut off) loses its leases seconds later, whatever their expiry. A holder
-- that cannot beat cancels its processors on its own clock before its
-- leases could be taken (worker.Heartbeat), so a takeover never overlaps a
-- run. A lease of no replica (the seed's API, tests) is judged by its
-- expiry alone, as before.
--
-- webhook_leases is unlogged again: its writes cost no WAL, and a
-- transaction that writes nothing else commits without waiting for a
-- flush. What crash recovery or a promoted standby loses of it is made safe
-- by lease_epoch, unlogged too, which loses its row at the same moment: no
-- lease is granted until the row, written again by the first beat after,
-- is older than queue.LeaseGrace, by when every holder from before has
-- cancelled its processors (its beats failed, or found its replica's row
-- gone).
ALTER TABLE webhook_leases SET UNLOGGED;

ALTER TABLE webhook_leases
    -- The holder's replica, whose beats keep the lease live.
    ADD COLUMN replica uuid,
    -- When the holder's processor started: a lease taken over with a run
    -- started and no outcome is an interrupted attempt, counted by whoever
    -- takes it over. A retry's lease is taken at its batch's claim and
    -- started when its own turn comes, so a crash counts no attempt of the
    -- batch's other events.
    ADD COLUMN started_at timestamptz,
    -- Set by a takeover: the path of the run that started under the lease
    -- before and never reported.
    ADD COLUMN interrupted text;

CREATE UNLOGGED TABLE hookd_replicas (
    id         uuid        PRIMARY KEY,
    started_at timestamptz NOT NULL DEFAULT now(),
    beat_at    timestamptz NOT NULL DEFAULT now()
) WITH (
    -- Every beat is an update of a row no index covers but the key: HOT.
    fillfactor = 50
);

CREATE UNLOGGED TABLE lease_epoch (
    one       boolean     PRIMARY KEY DEFAULT true CHECK (one),
    began_at  timestamptz NOT NULL
);
-- A new schema has no lease to protect: leases may be granted at once.
INSERT INTO lease_epoch (began_at) VALUES ('-infinity');

-- +goose Down
DROP TABLE lease_epoch;
DROP TABLE hookd_replicas;
ALTER TABLE webhook_leases DROP COLUMN interrupted, DROP COLUMN started_at, DROP COLUMN replica;
ALTER TABLE webhook_leases SET LOGGED;
