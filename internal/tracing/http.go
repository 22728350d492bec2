package tracing

import (
	"context"
	"net/http"
	"net/url"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
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

// ClientAddress sets the client.address of ctx's server span to addr, the
// client's address as hookd believes it, in place of the one otelhttp
// reads from any X-Forwarded-For.
func ClientAddress(ctx context.Context, addr string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(semconv.ClientAddress(addr))
	}
}

// Handler wraps h, served at route, so that each request is a server
// span named "METHOD route". The receiver is a public endpoint: a
// traceparent a sender puts on its request becomes a link, never the
// parent, so no sender decides what hookd samples or joins hookd's spans
// to a trace of its choosing. With tracing off it is h itself.
func (t *Tracer) Handler(route string, h http.Handler) http.Handler {
	if t == nil {
		return h
	}
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		trace.SpanFromContext(r.Context()).SetAttributes(semconv.HTTPRoute(route))
		h.ServeHTTP(w, r)
	})
	return otelhttp.NewHandler(inner, route, otelhttp.WithTracerProvider(t.provider), otelhttp.WithPropagators(t.propagator),
		otelhttp.WithPublicEndpointFn(func(*http.Request) bool { return true }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + route }))
}
