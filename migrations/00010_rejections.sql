-- +goose Up

-- Deliveries the receiver refused with a 4xx, so support staff can tell
-- whether Stripe reaches hookd at all and why it is turned away: a wrong
-- secret, a clock that drifted, a body too large, or someone else's
-- requests. Never the body: only the event id it claimed, unverified.
--
-- Bounded three ways: the receiver writes at most a few rows a second per
-- replica (beyond that it adds up the rest into one row per reason, with a
-- count), the pruner deletes rows older than the marker retention, and it
-- keeps at most the newest 100,000.
CREATE TABLE webhook_rejections (
    id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The refusing replica's clock, not the database's: it is the clock
    -- that judged the signature's age, so signed_at is compared with it.
    at                timestamptz NOT NULL,
    reason            text        NOT NULL CHECK (reason IN (
                          'too_large', 'unreadable_body', 'method_not_allowed',
                          'no_signature', 'malformed_signature', 'stale_signature', 'wrong_signature',
                          'bad_json', 'bad_id', 'bad_type')),
    http_status       integer     NOT NULL,
    detail            text        NOT NULL,
    remote_addr       text        NOT NULL DEFAULT '',
    -- The "id" the body claimed, when it had one: never verified.
    claimed_event_id  text,
    -- The t= of the Stripe-Signature header.
    signed_at         timestamptz,
    -- For a stale signature: whether it matches a configured secret once
    -- its age is ignored (a drifted clock or a replay, not a wrong secret).
    signature_matches boolean,
    -- More than 1 for a row that adds up the refusals of one reason beyond
    -- the per-second budget; its other columns are the first one's.
    count             integer     NOT NULL DEFAULT 1 CHECK (count >= 1)
);
-- The log newest first, the overview's last 24 hours by reason (from the
-- index alone), and the pruner's cut-offs by age and by rank.
CREATE INDEX webhook_rejections_at_idx ON webhook_rejections (at, id) INCLUDE (reason, count);
-- "Did we ever get evt_...?" finds the refused deliveries that claimed it.
CREATE INDEX webhook_rejections_claimed_idx ON webhook_rejections (claimed_event_id)
    WHERE claimed_event_id IS NOT NULL;

-- +goose Down
DROP TABLE webhook_rejections;
