package tracing

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// QueryTracer is the pgx tracer that makes each statement, and each batch
// of statements sent as one (a short transaction), run under a traced span
// a CLIENT child span of it, with the database semantic conventions
// (db.system.name, db.namespace, db.query.summary, server.address); nil
// with tracing off. A statement with no recording span in its context
// (the heartbeat, the pruner) makes none.
//
// A span is named by its statement: the name in the comment the statement
// starts with (`-- hookd.take_deliveries`), which PostgreSQL ignores and
// pg_stat_statements shows; a batch by the first named statement in it.
// A statement without one is named postgresql, the conventions' name when
// nothing better is known: never by its first keyword, which names every
// one of hookd's short transactions WITH. A batch is one span, not one
// per statement: its statements go in one round trip, and pgx reports
// each only once all have run, so their spans would say nothing of their
// time.
//
// Query parameters and the statements' text are never recorded:
// parameters hold payloads and secrets, and a statement's name says which
// it was in a few bytes rather than a kilobyte a span.
func (t *Tracer) QueryTracer() pgx.QueryTracer {
	if t == nil {
		return nil
	}
	return queryTracer{t.tracer}
}

type queryTracer struct{ tracer trace.Tracer }

var _ pgx.BatchTracer = queryTracer{}

func (q queryTracer) start(ctx context.Context, conn *pgx.Conn, name string, attrs ...attribute.KeyValue) context.Context {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx
	}
	attrs = append(attrs, semconv.DBSystemNamePostgreSQL, semconv.DBQuerySummary(name))
	if conn != nil {
		cfg := conn.Config()
		attrs = append(attrs, semconv.DBNamespace(cfg.Database), semconv.ServerAddress(cfg.Host),
			semconv.ServerPort(int(cfg.Port)))
	}
	ctx, _ = q.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx
}

func end(ctx context.Context, err error) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func (q queryTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return q.start(ctx, conn, StatementName(data.SQL))
}

func (q queryTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	end(ctx, data.Err)
}

func (q queryTracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	if !trace.SpanFromContext(ctx).IsRecording() || data.Batch == nil {
		return ctx
	}
	name := unnamed
	for _, qq := range data.Batch.QueuedQueries {
		if n := StatementName(qq.SQL); n != unnamed {
			name = n
			break
		}
	}
	return q.start(ctx, conn, name, semconv.DBOperationBatchSize(data.Batch.Len()))
}

func (q queryTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (q queryTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	end(ctx, data.Err)
}

// unnamed is the name of a statement that names itself nothing.
const unnamed = "postgresql"

// StatementName is the name of statement sql: the word after the "-- "
// it starts with, when that word starts with "hookd."; otherwise
// postgresql.
func StatementName(sql string) string {
	sql = strings.TrimLeft(sql, " \t\r\n")
	rest, ok := strings.CutPrefix(sql, "-- hookd.")
	if !ok {
		return unnamed
	}
	n := strings.IndexAny(rest, " \t\r\n")
	if n <= 0 {
		return unnamed
	}
	return "hookd." + rest[:n]
}
