-- +goose Up

-- How many times the retry loop has claimed a queued event since its last
-- outcome: every claim adds one, every recorded attempt sets it back to 0,
-- and a claim handed back unused at shutdown takes its one back. An event
-- claimed twice or more without an outcome is stuck: its claimer died or
-- hung mid-attempt, perhaps on this very event, and the dashboard says so.
ALTER TABLE webhook_events ADD COLUMN claims integer NOT NULL DEFAULT 0 CHECK (claims >= 0);

-- The stuck events of the overview and the pending list: a handful of rows,
-- found without reading the queue.
CREATE INDEX webhook_events_reclaimed_idx ON webhook_events (next_retry_at, id)
    WHERE claims >= 2 AND status IN ('failed', 'retrying');

-- +goose Down
DROP INDEX webhook_events_reclaimed_idx;
ALTER TABLE webhook_events DROP COLUMN claims;
