-- +goose Up

-- When a destination's retry loop last found every retry of a turn failed
-- and narrowed its claims (worker's retry window): its due deliveries then
-- wait to be retried one at a time, an interval apart, until one succeeds.
-- The dashboard says so on the destination, and the stuck rule counts them
-- as waiting their turn, not stuck, while it is recent. Null once a retry
-- succeeds and the loop claims whole batches again.
ALTER TABLE destinations ADD COLUMN retries_narrowed_at timestamptz;

-- +goose Down
ALTER TABLE destinations DROP COLUMN retries_narrowed_at;
