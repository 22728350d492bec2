package tracing

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// refusedDelivery makes the spans of one refused delivery as the receiver
// and the web server do: the server span and the delivery's under it,
// which ends first, with the refusal; then the server span, marked too.
func refusedDelivery(tr *Tracer) {
	ctx, server := tr.Start(context.Background(), "POST /webhooks/stripe")
	_, deliver := tr.Start(ctx, SpanDeliver)
	Refuse(deliver, "no_signature", "no Stripe-Signature header")
	deliver.End()
	Refuse(server, "no_signature", "no Stripe-Signature header")
	server.End()
}

func TestRefusalFilter_ExportsOneRefusedDeliveryAnInterval(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	filter := newRefusalFilter(sdktrace.NewSimpleSpanProcessor(spans), time.Hour)
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(filter))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	tr := New(provider)

	for range 60 {
		refusedDelivery(tr)
	}
	// A delivery that is not refused passes whole, failed or not, between
	// refusals as after them.
	ctx, server := tr.Start(context.Background(), "POST /webhooks/stripe")
	_, deliver := tr.Start(ctx, SpanDeliver)
	FailApp(deliver, 500, "app_status")
	deliver.End()
	server.End()
	refusedDelivery(tr)

	got := spans.GetSpans()
	if len(got) != 4 {
		t.Fatalf("exported %d spans, want 4: the first refused delivery's 2 and the failed delivery's 2", len(got))
	}
	first := got[0].SpanContext.TraceID()
	for _, s := range got[:2] {
		if s.SpanContext.TraceID() != first {
			t.Errorf("span %s of trace %s exported, want only the first refused delivery's", s.Name, s.SpanContext.TraceID())
		}
	}
	if n := filter.open.Load(); n != 0 || len(filter.kept) != 0 {
		t.Errorf("the filter still holds %d refused traces (%d counted open) after their roots ended", len(filter.kept), n)
	}
}

func TestLogHandler_StampsSampledSpansOnly(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(LogHandler(slog.NewTextHandler(&buf, nil)))
	sampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2},
		TraceFlags: trace.FlagsSampled})
	unsampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{3}, SpanID: trace.SpanID{4}})
	logger.InfoContext(trace.ContextWithSpanContext(context.Background(), sampled), "sampled")
	logger.InfoContext(trace.ContextWithSpanContext(context.Background(), unsampled), "unsampled")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines logged, want 2:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], "trace_id="+sampled.TraceID().String()) {
		t.Errorf("a line logged under a sampled span has no trace id: %s", lines[0])
	}
	if strings.Contains(lines[1], "trace_id=") {
		t.Errorf("a line logged under a span never exported names its trace: %s", lines[1])
	}
}

func TestStatementName(t *testing.T) {
	for sql, want := range map[string]string{
		"-- hookd.take\n\tWITH x AS (SELECT 1) SELECT * FROM x": "hookd.take",
		"\n\t-- hookd.settle_attempts\nUPDATE t SET a = 1":      "hookd.settle_attempts",
		"WITH x AS (SELECT 1) SELECT * FROM x":                  "postgresql",
		"-- hookd.":                                             "postgresql",
		"-- someone else's comment\nSELECT 1":                   "postgresql",
	} {
		if got := StatementName(sql); got != want {
			t.Errorf("StatementName(%q) = %q, want %q", sql, got, want)
		}
	}
}

// A process span is named for its destination and says it in
// messaging.destination.name; one of several destinations at once is
// "process" alone, with no destination.
func TestStartProcess_NamedForItsDestination(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	tr := New(provider)
	for _, dest := range []string{"billing", Destination, ""} {
		_, span := tr.StartProcess(context.Background(), dest, "evt_1", "", time.Time{})
		span.End()
	}
	got := map[string]string{}
	for _, s := range spans.GetSpans() {
		got[s.Name] = "none"
		for _, a := range s.Attributes {
			if a.Key == "messaging.destination.name" {
				got[s.Name] = a.Value.AsString()
			}
		}
	}
	want := map[string]string{"process billing": "billing", SpanProcess: Destination, "process": "none"}
	if !maps.Equal(got, want) {
		t.Errorf("process spans %v, want %v", got, want)
	}
}
