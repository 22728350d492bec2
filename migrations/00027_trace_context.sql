-- +goose Up

-- With tracing on (OTEL_EXPORTER_OTLP_ENDPOINT), a queued event keeps the
-- W3C traceparent of the delivery that queued it, so that every retry,
-- each a trace of its own, links back to that delivery's span; and each
-- attempt keeps its trace's id, which the event's page shows. Both stay
-- NULL with tracing off, and cost nothing then.
ALTER TABLE webhook_events ADD COLUMN trace_parent text;
ALTER TABLE webhook_attempts ADD COLUMN trace_id text;

-- +goose Down
ALTER TABLE webhook_attempts DROP COLUMN trace_id;
ALTER TABLE webhook_events DROP COLUMN trace_parent;
