-- +goose Up

-- What arrives through each endpoint, beside what its settings declare: a
-- correctly signed event is accepted whatever its endpoint declares, an
-- endpoint that declares nothing learns its kind from what it receives,
-- and one whose declaration contradicts what arrives raises an alert. The
-- receiver stamps last_thin_at or last_snapshot_at with last_event_at;
-- rows written before stay NULL, which counts as nothing arrived.
ALTER TABLE endpoint_activity
    ADD COLUMN last_thin_at     timestamptz,
    ADD COLUMN last_snapshot_at timestamptz;

-- The alert of an endpoint whose declaration (HOOKD_ENDPOINTS) contradicts
-- what arrives through it, named declaration:label like the endpoint's
-- other conditions.
ALTER TABLE alert_conditions
    DROP CONSTRAINT alert_conditions_condition_check,
    ADD CONSTRAINT alert_conditions_condition_check
        CHECK (condition IN ('dead', 'pending_age', 'retrier_stalled', 'signature_failures', 'breaker_open',
                             'generation_failures')
               OR condition ~ '^(stripe_disabled|stripe_version|quiet|declaration):[a-z0-9_-]{1,32}$');

-- The overview counts the failed events no attempt was made for yet
-- (deferred while delivery was held or no inline slot was free) apart from
-- the failed ones: this index holds those rows alone, so the count reads
-- them, not the queue. last_attempt_at and status are in other indexes
-- already, so no update that was HOT stops being HOT.
CREATE INDEX webhook_events_deferred_idx ON webhook_events (next_retry_at)
    WHERE status = 'failed' AND last_attempt_at IS NULL;

-- +goose Down
DROP INDEX webhook_events_deferred_idx;
DELETE FROM alert_conditions WHERE condition LIKE 'declaration:%';
ALTER TABLE alert_conditions
    DROP CONSTRAINT alert_conditions_condition_check,
    ADD CONSTRAINT alert_conditions_condition_check
        CHECK (condition IN ('dead', 'pending_age', 'retrier_stalled', 'signature_failures', 'breaker_open',
                             'generation_failures')
               OR condition ~ '^(stripe_disabled|stripe_version|quiet):[a-z0-9_-]{1,32}$');
ALTER TABLE endpoint_activity
    DROP COLUMN last_snapshot_at,
    DROP COLUMN last_thin_at;
