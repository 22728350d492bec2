package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// ServiceName is service.name unless OTEL_SERVICE_NAME (or
// OTEL_RESOURCE_ATTRIBUTES) says otherwise.
const ServiceName = "hookd"

// Export is where traces go: OTLP over HTTP (http/protobuf), turned on by
// the standard OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT. The SDK reads the other standard
// variables itself: OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_TRACES_SAMPLER and its _ARG, OTEL_EXPORTER_OTLP_HEADERS,
// _TIMEOUT, _COMPRESSION, _CERTIFICATE and their _TRACES_ forms, and
// OTEL_BSP_*.
type Export struct {
	// Endpoint is the collector's base URL, e.g. http://collector:4318;
	// traces go to its /v1/traces, as the OTLP specification says.
	Endpoint string
	// TracesEndpoint, when set, is the full URL traces go to, and wins
	// over Endpoint.
	TracesEndpoint string
}

// On says whether traces are exported at all.
func (e Export) On() bool { return e.Endpoint != "" || e.TracesEndpoint != "" }

// newExporter is the OTLP/HTTP exporter e describes: the SDK reads the
// headers, timeout, compression and certificate from the environment.
func newExporter(ctx context.Context, e Export) (*otlptrace.Exporter, error) {
	target := e.TracesEndpoint
	if target == "" {
		target = strings.TrimRight(e.Endpoint, "/") + "/v1/traces"
	}
	exporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(target))
	if err != nil {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: %v", err)
	}
	return exporter, nil
}

// newResource is hookd's resource: service.name is hookd unless the
// standard variables name it (later detectors win).
func newResource(ctx context.Context) (*resource.Resource, error) {
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(ServiceName)), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %v", err)
	}
	return res, nil
}

// Probe sends one span named SpanDoctor to where e exports, as hookd
// serve would send its spans (the same endpoint, headers and resource),
// and returns its trace id, to look it up in the backend, or why the
// collector refused it. It is hookd doctor's check.
func Probe(ctx context.Context, e Export) (traceID string, err error) {
	exporter, err := newExporter(ctx, e)
	if err != nil {
		return "", err
	}
	defer func() { _ = exporter.Shutdown(context.WithoutCancel(ctx)) }()
	res, err := newResource(ctx)
	if err != nil {
		return "", err
	}
	kept := &keepSpans{}
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(kept), sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.AlwaysSample()))
	_, span := provider.Tracer(ScopeName).Start(ctx, SpanDoctor)
	span.End()
	if err := exporter.ExportSpans(ctx, kept.spans); err != nil {
		return "", err
	}
	return span.SpanContext().TraceID().String(), nil
}

// keepSpans keeps the spans that end, for Probe to export itself and see
// the exporter's error, which a batch or sync processor hands to the
// global error handler instead.
type keepSpans struct{ spans []sdktrace.ReadOnlySpan }

func (k *keepSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (k *keepSpans) OnEnd(s sdktrace.ReadOnlySpan)                   { k.spans = append(k.spans, s) }
func (k *keepSpans) Shutdown(context.Context) error                  { return nil }
func (k *keepSpans) ForceFlush(context.Context) error                { return nil }

// Setup starts exporting traces as e says and returns the Tracer every
// part of hookd starts its spans with, and the shutdown that sends what
// is still buffered (call it last, with a deadline). With e off it
// returns a nil Tracer and a no-op shutdown: nothing is set up at all.
// The exporter's own failures (a collector down) are logged to logger as
// warnings, at most one a batch, instead of the standard library's log.
func Setup(ctx context.Context, e Export, logger *slog.Logger) (*Tracer, func(context.Context) error, error) {
	if !e.On() {
		return nil, func(context.Context) error { return nil }, nil
	}
	exporter, err := newExporter(ctx, e)
	if err != nil {
		return nil, nil, err
	}
	res, err := newResource(ctx)
	if err != nil {
		return nil, nil, err
	}
	// The sampler is the SDK's default, parent-based always on, unless
	// OTEL_TRACES_SAMPLER says otherwise; the receiver ignores a parent a
	// sender claims (see Handler), so a delivery's sampling is hookd's.
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	logger = logger.With("component", "tracing")
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("traces not exported", "err", err)
	}))
	return New(provider), provider.Shutdown, nil
}
