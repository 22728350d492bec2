-- +goose Up

-- A destination's filter that failed on an event (a missing field, a
-- wrong type) is a non-match: the destination does not take the event.
-- That is recorded, once per event and destination, so that the event's
-- page says why the destination never got it. Pruned with the markers.
CREATE TABLE webhook_route_misses (
    event_id    text        NOT NULL COLLATE "C",
    destination text        NOT NULL,
    error       text        NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (event_id, destination)
);
CREATE INDEX webhook_route_misses_at_brin ON webhook_route_misses USING brin (at);

-- +goose Down
DROP TABLE webhook_route_misses;
