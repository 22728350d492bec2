-- +goose Up

-- A destination's rate holds across every replica: each reserves the
-- slots of its next calls here, a few at a time, by the generic cell rate
-- algorithm with a burst of one: tat, the theoretical arrival time, is
-- when the next call may go, and a reservation of k slots moves it k
-- intervals on from itself or from now, whichever is later. Unlogged: a
-- row is written a few times a second per destination, and a crash of the
-- database that loses it only lets the next call go at once.
CREATE UNLOGGED TABLE destination_rates (
    destination text        PRIMARY KEY,
    tat         timestamptz NOT NULL
);

-- +goose Down
DROP TABLE destination_rates;
