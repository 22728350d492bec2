-- The receiver's database work for one new event in two round trips, the design's ceiling: BEGIN,
-- the lock and the dedup read pipelined in one round trip; the marker insert and COMMIT in a second.
-- Needs pgbench -M extended or prepared (pipeline mode); two pipelines = two round trips (a Sync
-- inside an explicit transaction block does not end it).
\set n random(1, 2000000000)
\startpipeline
BEGIN;
SELECT pg_try_advisory_xact_lock(hashtextextended('stripe_webhook:' || ('evt_' || :client_id::text || '_' || :n::text), 0));
SELECT EXISTS(SELECT 1 FROM processed_webhook_events WHERE event_id = 'evt_' || :client_id::text || '_' || :n::text),
       EXISTS(SELECT 1 FROM webhook_events WHERE source = 'stripe' AND event_id = 'evt_' || :client_id::text || '_' || :n::text);
\endpipeline
\startpipeline
INSERT INTO processed_webhook_events (event_id) VALUES ('evt_' || :client_id::text || '_' || :n::text) ON CONFLICT DO NOTHING;
COMMIT;
\endpipeline
