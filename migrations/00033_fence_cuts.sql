-- +goose Up

-- Fence cuts: runs of an event that its own replica's fence stopped. A
-- replica that cannot beat in time stops its processors before another
-- replica may take its leases over, and gives those runs back uncounted:
-- the database, not the event, was at fault, most of the time. But an
-- event whose run starves its process (the beats stop because the event
-- eats the CPU or the memory) would then run again and again, each time
-- stopped by the fence it causes. So each such stop is counted here, per
-- event, and the second makes the event a suspect (webhook_suspects): it
-- runs alone next, where a stop charges it.
--
-- Logged: a count forgotten by a crash of the database would let the loop
-- go on.
CREATE TABLE webhook_fence_cuts (
    event_id text        PRIMARY KEY,
    -- Runs of the event the fence stopped.
    cuts     integer     NOT NULL CHECK (cuts > 0),
    -- When the last of them was stopped, for the pruner.
    last_at  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE webhook_fence_cuts;
