package tracing

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Transport wraps base so that each request is a client span, a child of
// the request context's span, and carries that span's W3C traceparent: the
// app's own spans then join the delivery's trace. With tracing off it is
// base itself.
func (t *Tracer) Transport(base http.RoundTripper) http.RoundTripper {
	if t == nil {
		return base
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return otelhttp.NewTransport(redactURL{base}, otelhttp.WithTracerProvider(t.provider), otelhttp.WithPropagators(t.propagator),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }))
}

// redactURL sets the client span's url.full to the URL without its user,
// password, query or fragment, which otelhttp keeps (it redacts only a
// few cloud providers' signature parameters): a forward URL's query may
// carry the app's token. It runs under otelhttp, whose span is then in the
// request's context, and a later value of an attribute replaces the
// earlier.
type redactURL struct{ base http.RoundTripper }

func (rt redactURL) RoundTrip(r *http.Request) (*http.Response, error) {
	if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
		u := url.URL{Scheme: r.URL.Scheme, Host: r.URL.Host, Path: r.URL.Path}
		span.SetAttributes(semconv.URLFull(u.String()))
	}
	return rt.base.RoundTrip(r)
}

// StartServer starts the SERVER span of request r, served at route,
// named "METHOD route", with OpenTelemetry's HTTP conventions; client is
// the client's address as hookd believes it (echo's RealIP, which trusts
// only HOOKD_TRUSTED_PROXIES' X-Forwarded-For). The receiver is a public
// endpoint: a traceparent a sender puts on its request becomes a link,
// never the parent, so no sender decides what hookd samples or joins
// hookd's spans to a trace of its choosing. End the span with EndServer.
//
// It is hookd's own rather than otelhttp's middleware, which cost about a
// tenth of the receiver's CPU under load beside the span itself: it wraps
// the body and the response writer, records metrics nobody reads, and
// computes a score of attributes; the route's handler knows its status.
func (t *Tracer) StartServer(r *http.Request, route, client string) (context.Context, trace.Span) {
	if t == nil {
		return r.Context(), trace.SpanFromContext(r.Context())
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(semconv.HTTPRequestMethodKey.String(r.Method), semconv.HTTPRoute(route),
			semconv.URLPath(r.URL.Path), semconv.URLScheme(scheme(r)), semconv.ClientAddress(client),
			semconv.UserAgentOriginal(r.UserAgent()), semconv.NetworkProtocolVersion(protocolVersion(r)))}
	if r.Header.Get("traceparent") != "" {
		if sc := trace.SpanContextFromContext(t.propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	return t.tracer.Start(r.Context(), r.Method+" "+route, opts...)
}

// EndServer ends a SERVER span with the status hookd answered: an error
// status for a 5xx, as the conventions say (a 4xx is the client's fault,
// and a refusal says so itself, Refuse).
func EndServer(span trace.Span, status int) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	if status >= 500 {
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
		span.SetStatus(codes.Error, "")
	}
	span.End()
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

func protocolVersion(r *http.Request) string {
	switch r.ProtoMajor {
	case 2:
		return "2"
	case 3:
		return "3"
	}
	return "1." + strconv.Itoa(r.ProtoMinor)
}
