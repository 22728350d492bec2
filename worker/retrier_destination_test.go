package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hookd/hookd/internal/telemetry"
	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

// A destination's retry loop makes each retry a CONSUMER span named for
// the destination, with messaging.destination.name, and counts the call
// in the destination's metrics; the one app's is "process default".
func TestRetrier_SpansAndMetricsNameTheDestination(t *testing.T) {
	t.Parallel()
	bundle := setup(t)
	spans := tracetest.NewInMemoryExporter()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	reg := prometheus.NewRegistry()
	metrics := telemetry.NewMetrics(reg, nil)
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_billing", Destination: "billing"})
	queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_default"})

	for _, dest := range []string{"billing", ""} {
		r := worker.NewRetrier(bundle.store, discardLogger, worker.ProducerConfig{Processor: &countingProcessor{},
			Metrics: metrics, Tracer: tracing.New(provider), Destination: dest})
		if n, err := r.RunBatch(t.Context()); err != nil || n != 1 {
			t.Fatalf("%q's batch: %d, %v; want 1 claimed", dest, n, err)
		}
	}

	got := map[string]string{}
	for _, s := range spans.GetSpans() {
		if !strings.HasPrefix(s.Name, "process") {
			continue
		}
		var dest, id string
		for _, a := range s.Attributes {
			switch a.Key {
			case attribute.Key("messaging.destination.name"):
				dest = a.Value.AsString()
			case attribute.Key("messaging.message.id"):
				id = a.Value.AsString()
			}
		}
		got[s.Name] = id + " to " + dest
	}
	want := map[string]string{"process billing": "evt_billing to billing", tracing.SpanProcess: "evt_default to default"}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("span %q: %q, want %q (spans: %v)", name, got[name], w, got)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counted := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != "hookd_destination_processing_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "destination" {
					counted[l.GetValue()] += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	if counted["billing"] != 1 || counted["default"] != 1 || len(counted) != 2 {
		t.Errorf("calls by destination %v, want one of billing and one of default", counted)
	}
}
