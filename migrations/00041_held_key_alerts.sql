-- +goose Up

-- A key of an ordered destination held by a dead event raises an alert,
-- once for each time it is held: hold_alerted_at is when the dead event
-- holding its key was announced. An event that dies again after a person
-- sent it back has a last attempt newer than its announcement, so its key
-- is announced again.
ALTER TABLE webhook_events ADD COLUMN hold_alerted_at timestamptz;

-- The condition of the held keys: active while any key is held, its
-- row locked by the one replica that announces the keys newly held.
ALTER TABLE alert_conditions
    DROP CONSTRAINT alert_conditions_condition_check,
    ADD CONSTRAINT alert_conditions_condition_check
        CHECK (condition IN ('dead', 'pending_age', 'retrier_stalled', 'signature_failures', 'breaker_open',
                             'generation_failures', 'held_keys')
               OR condition ~ '^(stripe_disabled|stripe_version|quiet|declaration):[a-z0-9_-]{1,32}$');
INSERT INTO alert_conditions (condition) VALUES ('held_keys');

-- +goose Down
DELETE FROM alert_conditions WHERE condition = 'held_keys';
ALTER TABLE alert_conditions
    DROP CONSTRAINT alert_conditions_condition_check,
    ADD CONSTRAINT alert_conditions_condition_check
        CHECK (condition IN ('dead', 'pending_age', 'retrier_stalled', 'signature_failures', 'breaker_open',
                             'generation_failures')
               OR condition ~ '^(stripe_disabled|stripe_version|quiet|declaration):[a-z0-9_-]{1,32}$');
ALTER TABLE webhook_events DROP COLUMN hold_alerted_at;
