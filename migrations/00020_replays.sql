-- +goose Up

-- A replay: events of the event log, chosen by a filter, delivered again to
-- the app as a named background job, each delivery with the header
-- Hookd-Replay. Its members are fixed when it starts, each with its own
-- state, so its progress survives a restart and no member is delivered
-- twice by it: a member is delivered under the event's lease, and its state
-- changes with that lease's release.
CREATE TABLE replays (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text        NOT NULL CHECK (name <> ''),
    -- The filter as the operator gave it, and its one-line summary.
    filter       jsonb       NOT NULL,
    summary      text        NOT NULL,
    created_by   text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    state        text        NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'done', 'cancelled')),
    finished_at  timestamptz,
    cancelled_by text,
    -- Members, and how many of them ended each way: kept here, changed with
    -- the members' states in one statement, so the page reads one row.
    total        integer     NOT NULL CHECK (total >= 0),
    delivered    integer     NOT NULL DEFAULT 0 CHECK (delivered >= 0),
    failed       integer     NOT NULL DEFAULT 0 CHECK (failed >= 0),
    -- Members whose payload was pruned or erased after the replay started.
    skipped      integer     NOT NULL DEFAULT 0 CHECK (skipped >= 0),
    -- Matches left out at the start, their payloads already gone.
    unreplayable integer     NOT NULL DEFAULT 0 CHECK (unreplayable >= 0),
    CHECK ((state = 'running') = (finished_at IS NULL)),
    CHECK (delivered + failed + skipped <= total)
);
CREATE INDEX replays_running ON replays (id) WHERE state = 'running';

CREATE TABLE replay_events (
    replay_id   bigint      NOT NULL REFERENCES replays ON DELETE CASCADE,
    event_id    text        NOT NULL,
    -- The event's received_at: a replay delivers oldest first.
    received_at timestamptz NOT NULL,
    state       text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed', 'skipped')),
    finished_at timestamptz,
    http_status integer,
    error       text,
    PRIMARY KEY (replay_id, event_id)
);
-- The runner's next members, oldest first.
CREATE INDEX replay_events_pending ON replay_events (replay_id, received_at, event_id) WHERE state = 'pending';
-- An event's page lists the replays it was part of.
CREATE INDEX replay_events_event ON replay_events (event_id);

-- A replay's delivery is recorded in the attempt history with its own path.
ALTER TABLE webhook_attempts
    DROP CONSTRAINT webhook_attempts_path_check,
    ADD CONSTRAINT webhook_attempts_path_check
        CHECK (path IN ('inline', 'retry', 'manual', 'reconcile', 'replay'));

-- Starting and cancelling a replay are audited. The new list is a superset
-- of the old one.
ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove', 'retry_group',
                          'reconcile', 'pull', 'key_rotate', 'delivery_pause', 'delivery_resume',
                          'erase', 'replay_start', 'replay_cancel'));

-- +goose Down

-- NOT VALID: the rows already written stay as the record of what happened.
ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove', 'retry_group',
                          'reconcile', 'pull', 'key_rotate', 'delivery_pause', 'delivery_resume',
                          'erase')) NOT VALID;
ALTER TABLE webhook_attempts
    DROP CONSTRAINT webhook_attempts_path_check,
    ADD CONSTRAINT webhook_attempts_path_check
        CHECK (path IN ('inline', 'retry', 'manual', 'reconcile')) NOT VALID;
DROP TABLE replay_events;
DROP TABLE replays;
