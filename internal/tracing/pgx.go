package tracing

import (
	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
)

// QueryTracer is the pgx tracer that makes each statement run under a
// traced span a child span of it, with the database semantic conventions
// (db.system.name, db.query.text, db.operation.name, server.address);
// nil with tracing off. A statement with no recording span in its context
// (the heartbeat, the pruner) makes none. Query parameters are never
// recorded: they hold payloads and secrets; the statements' text holds
// neither, since every value is a parameter.
func (t *Tracer) QueryTracer() pgx.QueryTracer {
	if t == nil {
		return nil
	}
	return otelpgx.NewTracer(otelpgx.WithTracerProvider(t.provider), otelpgx.WithDisableAcquireTracer())
}
