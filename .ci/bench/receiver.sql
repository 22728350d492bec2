-- The database work of one receiver delivery of a new event, for pgbench:
-- the ceiling BenchmarkReceiverHTTP is compared against. hookd also writes
-- the attempt row in the same transaction and does the HTTP and signature
-- work around it.
\set n random(1, 2000000000)
BEGIN;
SELECT pg_try_advisory_xact_lock(hashtextextended('stripe_webhook:evt_pgbench_' || :n, 0));
SELECT EXISTS (SELECT 1 FROM processed_webhook_events WHERE event_id = 'evt_pgbench_' || :n);
INSERT INTO processed_webhook_events (event_id) VALUES ('evt_pgbench_' || :n) ON CONFLICT DO NOTHING;
COMMIT;
