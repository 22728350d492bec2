-- +goose Up

-- The failures page groups queued events by type and by their last error
-- with its variable parts masked, so "timeout for evt_A" and "timeout for
-- evt_B" are one failure hitting two events. The mask is computed once per
-- write of last_error, as a stored generated column, rather than by every
-- read of the page over every queued row: a regexp pass per row per read
-- costs seconds at 100,000 queued events, a GROUP BY on a stored text does
-- not. Every writer of last_error, present or future, gets it for free.
--
-- What is masked, in this order (each rule sees the previous one's output):
--   uuids                               -> <uuid>
--   Stripe-style ids: a lowercase prefix, "_", and a body with a digit or
--     a capital (evt_1Q.., ch_3N.., in_.., evt_test_..); words such as
--     read_timeout or payment_intent are left alone  -> <id>
--   ISO 8601 timestamps                 -> <time>
--   0x.. and runs of 8+ hex digits with at least one digit -> <hex>
--   numbers not inside a word           -> <n>
-- except the status in the forwarder's "downstream answered 503": a 404 and
-- a 503 are different failures, and the status is the most telling part.
-- An event without an error gets the group "no error recorded", so a group
-- is never empty and an empty filter never stands for one.
-- +goose StatementBegin
CREATE FUNCTION webhook_error_group(err text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(
    err,
    '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', '<uuid>', 'g'),
    '\m[a-z]{2,10}_(?:[a-z]+_)?[A-Za-z0-9]*[A-Z0-9][A-Za-z0-9]*', '<id>', 'g'),
    '\m[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?', '<time>', 'g'),
    '\m(?:0x[0-9a-fA-F]+|(?=[a-fA-F]*[0-9])[0-9a-fA-F]{8,})\M', '<hex>', 'g'),
    '(?<!answered )(?<![0-9A-Za-z_])[0-9]+', '<n>', 'g')
$$;
-- +goose StatementEnd

ALTER TABLE webhook_events
    ADD COLUMN error_group text GENERATED ALWAYS AS (webhook_error_group(coalesce(nullif(last_error, ''), 'no error recorded'))) STORED;

-- A person retries a whole failure group from the dashboard; it is audited
-- like every other retry.
ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove', 'retry_group'));

-- +goose Down
ALTER TABLE audit_log
    DROP CONSTRAINT audit_log_action_check,
    ADD CONSTRAINT audit_log_action_check
        CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune',
                          'account_add', 'account_role', 'account_remove')) NOT VALID;
ALTER TABLE webhook_events DROP COLUMN error_group;
DROP FUNCTION webhook_error_group(text);
