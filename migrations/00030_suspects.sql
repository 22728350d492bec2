-- +goose Up

-- Suspects: events whose runs a dead process cut short. When hookd is
-- killed, every run it had in flight is cut short, and nothing tells the
-- event that killed it from the ones beside it. So none of them is charged
-- for the interruption: each becomes a suspect, and a suspect runs again
-- alone (nothing else in flight in its process, one suspect at a time
-- across the replicas). One that completes is cleared; one that dies while
-- running alone is charged one attempt and stays a suspect, so only the
-- event that crashes hookd ends dead.
--
-- Logged, unlike the leases: a crash of the database must not forget
-- which events are suspects, or the next batch would run them side by side
-- again.
CREATE TABLE webhook_suspects (
    event_id      text        PRIMARY KEY,
    -- When the event first became a suspect.
    since         timestamptz NOT NULL DEFAULT now(),
    -- The path of the last run a dead process cut short (inline, retry,
    -- manual, reconcile, replay).
    path          text        NOT NULL,
    -- Runs cut short while the event ran beside others: not charged.
    interruptions integer     NOT NULL DEFAULT 0 CHECK (interruptions >= 0),
    -- Runs alone that died: each was charged one attempt.
    crashes       integer     NOT NULL DEFAULT 0 CHECK (crashes >= 0),
    -- When it last started a run alone.
    ran_alone_at  timestamptz,
    -- When a run alone completed: the event is a suspect no longer, and
    -- the row stays so that its page says it ran alone after a crash. A
    -- later crash makes it a suspect again.
    cleared_at    timestamptz
);
-- The suspects still to run, oldest first.
CREATE INDEX webhook_suspects_open_idx ON webhook_suspects (since) WHERE cleared_at IS NULL;

-- A lease knows whether its run is a suspect's run alone (alone), and a
-- takeover records what it found: a started run that never reported
-- (cut_short) and whether that run was alone (crashed), which is charged.
ALTER TABLE webhook_leases
    ADD COLUMN alone     boolean NOT NULL DEFAULT false,
    ADD COLUMN cut_short boolean NOT NULL DEFAULT false,
    ADD COLUMN crashed   boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE webhook_leases DROP COLUMN crashed, DROP COLUMN cut_short, DROP COLUMN alone;
DROP TABLE webhook_suspects;
