-- The receiver's database work for one new event, naively: five round trips (BEGIN, lock, dedup
-- read, marker insert, COMMIT). make bench-load compares hookd's events/s with this script's tx/s.
-- Event id = 'evt_<client_id>_<random>' so ids are (practically) always new, as in production.
\set n random(1, 2000000000)
BEGIN;
SELECT pg_try_advisory_xact_lock(hashtextextended('stripe_webhook:' || ('evt_' || :client_id::text || '_' || :n::text), 0));
SELECT EXISTS(SELECT 1 FROM processed_webhook_events WHERE event_id = 'evt_' || :client_id::text || '_' || :n::text);
INSERT INTO processed_webhook_events (event_id) VALUES ('evt_' || :client_id::text || '_' || :n::text) ON CONFLICT DO NOTHING;
COMMIT;
