-- +goose Up

-- A replay to one destination: its events are delivered to that
-- destination alone, whatever the others took. A replay to a destination
-- added after the events arrived is its backfill. Null: every destination
-- that takes each event, as before.
ALTER TABLE replays ADD COLUMN destination text;

-- +goose Down

ALTER TABLE replays DROP COLUMN destination;
