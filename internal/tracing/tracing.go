// Package tracing is hookd's OpenTelemetry tracing: the span names and
// attributes every path shares, the tracer the receiver, the retry loop,
// replays and the forwarder start their spans with, the OTLP export that
// OTEL_EXPORTER_OTLP_ENDPOINT turns on (Setup), the HTTP instrumentation
// (otelhttp) and the PostgreSQL tracer (QueryTracer) bound to that same
// provider, and the slog handler that stamps a traced delivery's records
// with its trace. Spans follow OpenTelemetry's conventions: the receiver's
// SERVER span, a PRODUCER span where an event is queued for later, a
// CONSUMER span for each attempt taken from the queue, CLIENT spans for
// the app and the database.
//
// Its guarantee: with tracing off (a nil *Tracer) nothing is exported,
// nothing wraps the HTTP handler, the forwarder's transport or the
// database's connections, and the code that starts spans gets the
// context's own non-recording span back without allocating; and with it on,
// no attribute or status holds an event's payload, a secret or the app's
// answer: only ids, types, labels, numbers, outcomes, status codes, the
// failures' classes and the refusals' short texts, which hookd already
// writes to its logs and pages.
package tracing

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of hookd's own spans.
const ScopeName = "github.com/hookd/hookd"

// The names of hookd's own spans. A delivery's span is the parent of its
// lease, call to the app and outcome, which is a PRODUCER
// span, SpanSend, when it puts the event on the queue for later. Each
// retry, replay and recovery is a CONSUMER span, "process <destination>"
// (ProcessSpan; SpanProcess for the one app), the root of a trace of its
// own, linked to the span that queued the event.
const (
	SpanDeliver = "hookd.deliver"
	SpanLease   = "hookd.lease"
	SpanOutcome = "hookd.outcome"
	// SpanSend and SpanProcess are named as OpenTelemetry's messaging
	// conventions name them, "{operation} {destination}": SpanProcess is
	// a call to the one app, the destination Destination (ProcessSpan
	// names any other's).
	SpanSend    = "send " + Destination
	SpanProcess = "process " + Destination
	// SpanDoctor is the one span hookd doctor sends (Probe).
	SpanDoctor = "hookd.doctor"
)

// The messaging conventions' values for hookd's queue: it is a system of
// its own (a table in PostgreSQL), and the one app of HOOKD_FORWARD_URL
// is the destination Destination.
const (
	MessagingSystem = "hookd"
	Destination     = "default"
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
	// AttrQueueWait is how long, in milliseconds, the event had been on
	// the queue when a retry or replay took it: from the delivery that
	// queued it to the start of this attempt.
	AttrQueueWait = attribute.Key("hookd.queue.wait_ms")
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

// StartSend starts the PRODUCER span of putting event eventID on the
// queue for later, a child of ctx's span (the delivery's); the queue row
// keeps its traceparent (Parent), which each later attempt links to.
func (t *Tracer) StartSend(ctx context.Context, eventID string) (context.Context, trace.Span) {
	if t == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	return t.tracer.Start(ctx, SpanSend, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
		semconv.MessagingSystemKey.String(MessagingSystem), semconv.MessagingOperationTypeSend,
		semconv.MessagingOperationName("send"), semconv.MessagingDestinationName(Destination),
		semconv.MessagingMessageID(eventID)))
}

// ProcessSpan is the name of the CONSUMER span of an attempt to
// destination: "process billing"; "process" alone for a run that calls
// every destination that takes the event (a replay or a recovery with
// several), as the messaging conventions name an operation whose
// destination is not one.
func ProcessSpan(destination string) string {
	if destination == "" {
		return "process"
	}
	return "process " + destination
}

// StartProcess starts the CONSUMER span of an attempt to destination ("":
// every destination that takes the event) taken from the queue (a retry
// or a replay) or recovered from Stripe's Events API, as the root of a
// trace of its own: linked to the span traceparent names (the one that
// queued the event) when it names one, and to ctx's span when that is
// valid (the reconciliation run that found the event). A retry can run
// days after its delivery, so it is its own trace rather than a child of
// one long since ended, as OpenTelemetry's messaging conventions advise
// for work taken from a queue. queued, when not zero, is when the event
// was queued, and the span says how long it waited (AttrQueueWait). attrs
// are the event's (Event).
func (t *Tracer) StartProcess(ctx context.Context, destination, eventID, traceparent string, queued time.Time,
	attrs ...attribute.KeyValue) (context.Context, trace.Span) {
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
	attrs = append(attrs, semconv.MessagingSystemKey.String(MessagingSystem), semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("process"), semconv.MessagingMessageID(eventID))
	if destination != "" {
		attrs = append(attrs, semconv.MessagingDestinationName(destination))
	}
	if !queued.IsZero() {
		attrs = append(attrs, AttrQueueWait.Int64(max(time.Since(queued).Milliseconds(), 0)))
	}
	return t.tracer.Start(ctx, ProcessSpan(destination), trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(links...), trace.WithAttributes(attrs...))
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

// Fail marks span failed with reason, a short text of hookd's own such as
// a refusal's or a database error (never the app's answer, see FailApp),
// and the semantic conventions' error.type.
func Fail(span trace.Span, errorType, reason string) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(semconv.ErrorTypeKey.String(errorType))
	span.SetStatus(codes.Error, reason)
}

// FailApp marks span failed by the app: its status says the HTTP status
// the app answered (0: no answer) and class, the kind of failure
// (app_status, timeout, connection, ...), which is also its error.type.
// The app's own answer never goes into a span: its body may name a
// customer (an email in a validation error), and spans go to a vendor.
func FailApp(span trace.Span, status int, class string) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(semconv.ErrorTypeKey.String(class))
	if status != 0 {
		span.SetStatus(codes.Error, fmt.Sprintf("%s: the app answered %d", class, status))
		return
	}
	span.SetStatus(codes.Error, class+": the app gave no answer")
}

// Refuse marks span the span of a refused delivery: reason is the
// rejection log's (AttrRefusal and error.type), detail the refusal's
// text, which names what was wrong and never holds a secret. The spans of
// a refused delivery are exported only for one every RefusalEvery.
func Refuse(span trace.Span, reason, detail string) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(AttrRefusal.String(reason))
	Fail(span, reason, detail)
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
