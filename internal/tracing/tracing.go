// Package tracing is hookd's OpenTelemetry tracing: the span names and
// attributes every path shares, the tracer the receiver, the retry loop,
// replays and the forwarder start their spans with, the OTLP export that
// OTEL_EXPORTER_OTLP_ENDPOINT turns on (Setup), the HTTP and PostgreSQL
// instrumentation (otelhttp, otelpgx) bound to that same provider, and the
// slog handler that stamps a traced delivery's records with its trace.
//
// Its guarantee: with tracing off (a nil *Tracer) nothing is exported,
// nothing wraps the HTTP handler, the forwarder's transport or the
// database's connections, and the code that starts spans gets the
// context's own non-recording span back without allocating; and with it on,
// no attribute holds an event's payload or a secret: only ids, types,
// labels, numbers, outcomes and the refusals' and failures' short texts,
// which hookd already writes to its logs and pages.
package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of hookd's own spans.
const ScopeName = "github.com/hookd/hookd"

// The names of hookd's own spans. A delivery's span is the parent of its
// verification, lease, call to the app and outcome; a retry's, replay's
// or recovery's is the root of a trace of its own, linked to the span of
// the delivery that queued the event.
const (
	SpanDeliver = "hookd.deliver"
	SpanVerify  = "hookd.verify"
	SpanLease   = "hookd.lease"
	SpanOutcome = "hookd.outcome"
	SpanRetry   = "hookd.retry"
	SpanReplay  = "hookd.replay"
	SpanRecover = "hookd.recover"
	// SpanDoctor is the one span hookd doctor sends (Probe).
	SpanDoctor = "hookd.doctor"
)

// The attributes of hookd's spans, beside OpenTelemetry's semantic
// conventions on the HTTP and database spans.
const (
	// AttrEventID is the Stripe event id, evt_...
	AttrEventID = attribute.Key("hookd.event_id")
	// AttrEventType is the event's type, e.g. invoice.paid.
	AttrEventType = attribute.Key("hookd.event_type")
	// AttrEndpoint is the label of the endpoint the event came through.
	AttrEndpoint = attribute.Key("hookd.endpoint")
	// AttrAttempt is the attempt's number, Hookd-Attempt: 0 inline.
	AttrAttempt = attribute.Key("hookd.attempt")
	// AttrPath is how the attempt came about: inline, retry, manual,
	// replay or reconcile (queue.AttemptPath).
	AttrPath = attribute.Key("hookd.path")
	// AttrOutcome is what became of the delivery or attempt: the
	// receiver's outcome label (processed, queued, duplicate, ...), or for
	// a retry or replay done, failed, dead or released.
	AttrOutcome = attribute.Key("hookd.outcome")
	// AttrRefusal is why a delivery was refused, the rejection log's
	// reason (bad_signature, stale_timestamp, ...).
	AttrRefusal = attribute.Key("hookd.refusal")
	// AttrReplay is the name of the replay delivering the event.
	AttrReplay = attribute.Key("hookd.replay")
	// AttrGroup is how many deliveries shared a short transaction (group
	// commit); its statements' spans are the children of its first
	// delivery's.
	AttrGroup = attribute.Key("hookd.group_size")
)

// Tracer starts hookd's spans from one TracerProvider. A nil *Tracer is
// tracing off: every method is then a no-op that costs a nil check.
type Tracer struct {
	provider trace.TracerProvider
	tracer   trace.Tracer
	// propagator writes and reads W3C trace context only: the app's
	// traceparent, and the one kept with a queue row.
	propagator propagation.TraceContext
}

// New returns a Tracer over provider, e.g. the SDK's with an in-memory
// exporter in tests; nil for a nil provider (tracing off).
func New(provider trace.TracerProvider) *Tracer {
	if provider == nil {
		return nil
	}
	return &Tracer{provider: provider, tracer: provider.Tracer(ScopeName)}
}

// Provider is the Tracer's provider; nil when tracing is off.
func (t *Tracer) Provider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.provider
}

// Start starts a span named name as a child of ctx's. With tracing off it
// returns ctx and ctx's span, which records nothing.
func (t *Tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if t == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	return t.tracer.Start(ctx, name, opts...)
}

// StartLinked starts a span named name as the root of a trace of its own,
// linked to the span traceparent names (the delivery that queued the
// event) when it names one, and to ctx's span when that is valid (the
// reconciliation run that found the event). A retry can run days after its
// delivery, so it is its own trace rather than a child of one long since
// ended, as OpenTelemetry's messaging conventions advise for work taken
// from a queue.
func (t *Tracer) StartLinked(ctx context.Context, name, traceparent string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if t == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	var links []trace.Link
	if sc := t.parse(traceparent); sc.IsValid() {
		links = append(links, trace.Link{SpanContext: sc})
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		links = append(links, trace.Link{SpanContext: sc})
	}
	return t.tracer.Start(ctx, name, trace.WithNewRoot(), trace.WithLinks(links...), trace.WithAttributes(attrs...))
}

// parse reads a W3C traceparent header value.
func (t *Tracer) parse(traceparent string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	carrier := propagation.MapCarrier{"traceparent": traceparent}
	return trace.SpanContextFromContext(t.propagator.Extract(context.Background(), carrier))
}

// Parent is the W3C traceparent of ctx's span, for the queue row, when it
// is sampled: an unsampled span was never exported, and a link to it
// would lead nowhere. "" otherwise.
func (t *Tracer) Parent(ctx context.Context) string {
	if t == nil || !trace.SpanContextFromContext(ctx).IsSampled() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	t.propagator.Inject(ctx, carrier)
	return carrier.Get("traceparent")
}

// TraceID is the trace id of ctx's span, for the attempt history, when it
// is sampled; "" otherwise.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}

// Event returns the attributes that name an event, for a span's start.
func Event(id, typ, endpoint string, attempt int, path string) []attribute.KeyValue {
	return []attribute.KeyValue{
		AttrEventID.String(id), AttrEventType.String(typ), AttrEndpoint.String(endpoint),
		AttrAttempt.Int(attempt), AttrPath.String(path),
	}
}

// Fail marks span failed with reason, a short text such as a refusal's or
// the app's answer (never a payload), and the semantic conventions'
// error.type.
func Fail(span trace.Span, errorType, reason string) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("error.type", errorType))
	span.SetStatus(codes.Error, reason)
}

// Outcome sets span's outcome.
func Outcome(span trace.Span, outcome string) {
	if span.IsRecording() {
		span.SetAttributes(AttrOutcome.String(outcome))
	}
}

// Group is ctx under the first recording span of a group of deliveries
// that share one short transaction (group commit), so that the
// transaction's statements are child spans of that delivery's; every
// recording span of the group says how many shared it (AttrGroup). span
// gives each delivery's span, nil for one not traced.
func Group[T any](ctx context.Context, group []T, span func(T) trace.Span) context.Context {
	var first trace.Span
	for _, d := range group {
		if s := span(d); s != nil && s.IsRecording() {
			s.SetAttributes(AttrGroup.Int(len(group)))
			if first == nil {
				first = s
			}
		}
	}
	if first == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, first)
}
