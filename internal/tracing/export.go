package tracing

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/google/uuid"
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
	// Sampler is OTEL_TRACES_SAMPLER, which the SDK reads itself; hookd
	// says it at start ("" is the SDK's default, parentbased_always_on).
	Sampler string
}

// On says whether traces are exported at all.
func (e Export) On() bool { return e.Endpoint != "" || e.TracesEndpoint != "" }

// newExporter is the OTLP/HTTP exporter e describes: the SDK reads the
// headers, timeout, compression and certificate from the environment.
func newExporter(ctx context.Context, e Export) (*otlptrace.Exporter, error) {
	exporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(e.target()))
	if err != nil {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: %v", err)
	}
	return exporter, nil
}

// newResource is hookd's resource: service.name hookd, service.version
// the build's version, and service.instance.id a UUID of this process's
// own, unless the standard variables say otherwise (later detectors win).
func newResource(ctx context.Context, version string) (*resource.Resource, error) {
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(ServiceName), semconv.ServiceVersion(version),
			semconv.ServiceInstanceID(uuid.NewString())),
		resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %v", err)
	}
	return res, nil
}

// Probe sends one span named SpanDoctor to where e exports, as hookd
// serve would send its spans (the same endpoint, headers and resource),
// and returns its trace id, to look it up in the backend, or why the
// collector refused it. It is hookd doctor's check; version is the
// build's, as hookd serve says it.
func Probe(ctx context.Context, e Export, version string) (traceID string, err error) {
	exporter, err := newExporter(ctx, e)
	if err != nil {
		return "", err
	}
	defer func() { _ = exporter.Shutdown(context.WithoutCancel(ctx)) }()
	res, err := newResource(ctx, version)
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
// is still buffered (call it last, with a deadline). version is the
// build's, for service.version. With e off it returns a nil Tracer and a
// no-op shutdown: nothing is set up at all. With e on it logs one line
// that says where traces go. The exporter's own failures (a collector
// down) are logged to logger as warnings, at most one a batch, instead
// of the standard library's log.
func Setup(ctx context.Context, e Export, logger *slog.Logger, version string) (*Tracer, func(context.Context) error, error) {
	if !e.On() {
		return nil, func(context.Context) error { return nil }, nil
	}
	exporter, err := newExporter(ctx, e)
	if err != nil {
		return nil, nil, err
	}
	res, err := newResource(ctx, version)
	if err != nil {
		return nil, nil, err
	}
	// The sampler is the SDK's default, parent-based always on, unless
	// OTEL_TRACES_SAMPLER says otherwise; the receiver ignores a parent a
	// sender claims (see Tracer.StartServer), so a delivery's sampling is hookd's.
	// Refused deliveries are kept from the exporter but for one every
	// RefusalEvery (refusalFilter).
	batcher := sdktrace.NewBatchSpanProcessor(exporter)
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(newRefusalFilter(batcher, RefusalEvery)),
		sdktrace.WithResource(res))
	logger = logger.With("component", "tracing")
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("traces not exported", "err", err)
	}))
	service, _ := res.Set().Value(semconv.ServiceNameKey)
	instance, _ := res.Set().Value(semconv.ServiceInstanceIDKey)
	logger.Info("traces exported", "exporter", "otlp/http", "endpoint", displayURL(e.target()),
		"service.name", service.AsString(), "service.instance.id", instance.AsString(),
		"sampler", cmp.Or(e.Sampler, "parentbased_always_on"),
		"refused_deliveries", "one every "+RefusalEvery.String())
	return New(provider), provider.Shutdown, nil
}

// target is the URL traces are sent to.
func (e Export) target() string {
	if e.TracesEndpoint != "" {
		return e.TracesEndpoint
	}
	return strings.TrimRight(e.Endpoint, "/") + "/v1/traces"
}

// displayURL is u without its user, password, query or fragment, which
// may hold a token, for the log.
func displayURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(an unreadable URL)"
	}
	return (&url.URL{Scheme: p.Scheme, Host: p.Host, Path: p.Path}).String()
}
