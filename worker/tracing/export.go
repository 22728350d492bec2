package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel"
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
	var opts []otlptracehttp.Option
	if e.TracesEndpoint == "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimRight(e.Endpoint, "/")+"/v1/traces"))
	}
	exporter, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: %v", err)
	}
	// Later detectors win: service.name is hookd unless the standard
	// variables name it.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(ServiceName)), resource.WithFromEnv())
	if err != nil {
		return nil, nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %v", err)
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
