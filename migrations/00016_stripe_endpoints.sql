-- +goose Up

-- What the receiver reads from every event, kept with its queue row: the
-- endpoint whose secret its signature matched (its label), test or live
-- mode, the connected account (a Connect event's account, a thin event's
-- context), the API version it is rendered in, the object it is about
-- (data.object, or a thin event's related_object), that object's customer,
-- and for a thin v1.* event the snapshot event it mirrors. NULL where the
-- event has none. Rows queued before these columns existed came through
-- the one endpoint there was.
ALTER TABLE webhook_events
    ADD COLUMN endpoint       text    NOT NULL DEFAULT 'default',
    ADD COLUMN livemode       boolean,
    ADD COLUMN account        text,
    ADD COLUMN api_version    text,
    ADD COLUMN object_id      text,
    ADD COLUMN object_type    text,
    ADD COLUMN customer       text,
    ADD COLUMN snapshot_event text;

-- When each endpoint last brought an event, per connected account ('' for
-- the endpoint's own events), and when it was last pinged
-- (v2.core.event_destination.ping). The receiver writes it with the
-- outcomes of the deliveries it settles, at most about once a second per
-- row and replica, so the quiet-endpoint alert and reconciliation's
-- "accounts seen in the window" read a small table instead of the events.
CREATE TABLE endpoint_activity (
    endpoint      text        NOT NULL,
    account       text        NOT NULL DEFAULT '',
    last_event_at timestamptz,
    last_ping_at  timestamptz,
    PRIMARY KEY (endpoint, account)
);

-- A thin v1.* event and the snapshot event it mirrors (its
-- snapshot_event), so each one's page links to the other. forwarded says
-- which of the two reached the app: 'both' (HOOKD_SNAPSHOT_ALIAS
-- forward-both), or with dedup the first to arrive, 'thin' or 'snapshot',
-- the other answered as its duplicate. Pruned with the markers.
CREATE TABLE event_pairs (
    thin_event_id     text        PRIMARY KEY,
    snapshot_event_id text        NOT NULL,
    endpoint          text        NOT NULL,
    forwarded         text        NOT NULL CHECK (forwarded IN ('both', 'thin', 'snapshot')),
    linked_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX event_pairs_snapshot_idx ON event_pairs (snapshot_event_id);
CREATE INDEX event_pairs_linked_at_brin ON event_pairs USING brin (linked_at);

-- A body whose shape contradicts the endpoint its signature matched (a
-- thin event through a snapshot endpoint, a connected account's event
-- through an endpoint not declared Connect) is refused.
ALTER TABLE webhook_rejections
    DROP CONSTRAINT webhook_rejections_reason_check,
    ADD CONSTRAINT webhook_rejections_reason_check CHECK (reason IN (
        'too_large', 'unreadable_body', 'method_not_allowed',
        'no_signature', 'malformed_signature', 'stale_signature', 'wrong_signature',
        'bad_json', 'bad_id', 'bad_type', 'wrong_endpoint'));

-- +goose Down
ALTER TABLE webhook_rejections
    DROP CONSTRAINT webhook_rejections_reason_check,
    ADD CONSTRAINT webhook_rejections_reason_check CHECK (reason IN (
        'too_large', 'unreadable_body', 'method_not_allowed',
        'no_signature', 'malformed_signature', 'stale_signature', 'wrong_signature',
        'bad_json', 'bad_id', 'bad_type'));
DROP TABLE event_pairs;
DROP TABLE endpoint_activity;
ALTER TABLE webhook_events
    DROP COLUMN endpoint, DROP COLUMN livemode, DROP COLUMN account, DROP COLUMN api_version,
    DROP COLUMN object_id, DROP COLUMN object_type, DROP COLUMN customer, DROP COLUMN snapshot_event;
