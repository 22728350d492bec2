package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/hookd/hookd/e2e/e2etest"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/queue/queuetest"
)

// jaegerClient is a client whose connections close when t ends, so no
// goroutine outlives the test.
func jaegerClient(t *testing.T) *http.Client {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// TestTraces_JaegerHoldsTheDeliveryItsRetriesAndTheAppsSpans runs the
// built binary exporting to a real Jaeger, and an app that traces itself
// and fails an event twice, then reads back through Jaeger's query API: the
// delivery's trace with the app's span under hookd's call, and two retries,
// each a trace of its own linked to the delivery, with the app's span in
// each.
func TestTraces_JaegerHoldsTheDeliveryItsRetriesAndTheAppsSpans(t *testing.T) {
	t.Parallel()
	j := e2etest.StartJaeger(t)
	run := strings.ToLower(stripeevent.NewID("run"))
	hookdService, appService := "hookd-test-"+run, "app-test-"+run

	// The app exports its own spans to the same Jaeger, each the child of
	// the traceparent hookd sends it.
	exporter, err := otlptracehttp.New(t.Context(), otlptracehttp.WithEndpointURL(j.OTLP+"/v1/traces"),
		otlptracehttp.WithHTTPClient(jaegerClient(t)))
	if err != nil {
		t.Fatal(err)
	}
	appProvider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(appService))))
	t.Cleanup(func() { _ = appProvider.Shutdown(context.Background()) })
	var mu sync.Mutex
	arrived := 0
	app := httptest.NewServer(otelhttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived++
		n := arrived
		mu.Unlock()
		if n <= 2 {
			http.Error(w, "not yet", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}), "app", otelhttp.WithTracerProvider(appProvider), otelhttp.WithPropagators(propagation.TraceContext{}),
		otelhttp.WithSpanNameFormatter(func(string, *http.Request) string { return "app handles event" })))
	t.Cleanup(app.Close)

	bundle := setup(t)
	p := startHookdProcess(t, buildHookdBinary(t), []string{
		"DATABASE_URL=" + bundle.dbURL, "STRIPE_WEBHOOK_SECRET=" + testSecret, "HOOKD_FORWARD_URL=" + app.URL,
		// Retries within seconds, and each span exported at once.
		"HOOKD_DEMO_BACKOFF=true", "HOOKD_RETRY_INTERVAL=100ms",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + j.OTLP, "OTEL_SERVICE_NAME=" + hookdService,
		"OTEL_TRACES_SAMPLER=always_on", "OTEL_BSP_SCHEDULE_DELAY=100",
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("hookd's log:\n%s", p.log)
		}
	})
	payload, id, err := stripeevent.Sample("invoice.paid", "traces-test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, p.base+stripeevent.ReceiverPath, strings.NewReader(string(payload)))
	req.Header.Set("Stripe-Signature", stripeevent.Sign(payload, testSecret, time.Now()))
	resp, err := jaegerClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("delivery answered %s, want 200", resp.Status)
	}
	queuetest.WaitFor(t, 30*time.Second, "the event to be processed by its second retry", func() bool {
		return queuetest.Markers(t, bundle.pool) == 1
	})
	// A clean stop sends what the exporter still holds.
	if err := p.terminate(); err != nil {
		t.Fatalf("hookd's stop: %v", err)
	}

	var delivery e2etest.JaegerTrace
	var retries []e2etest.JaegerTrace
	var deliverSpan e2etest.JaegerSpan
	queuetest.WaitFor(t, 30*time.Second, "Jaeger to hold the delivery and both retries with the app's spans", func() bool {
		delivery, retries = e2etest.JaegerTrace{}, nil
		for _, tr := range j.Traces(t, hookdService) {
			if d := tr.Find(hookdService, tracing.SpanDeliver); len(d) == 1 && d[0].Tag("hookd.event_id") == id {
				delivery, deliverSpan = tr, d[0]
			}
			if r := tr.Find(hookdService, tracing.SpanRetry); len(r) == 1 && r[0].Tag("hookd.event_id") == id {
				retries = append(retries, tr)
			}
		}
		if delivery.TraceID == "" || len(retries) != 2 {
			return false
		}
		for _, tr := range append([]e2etest.JaegerTrace{delivery}, retries...) {
			if len(tr.Find(appService, "app handles event")) != 1 || len(tr.Find(hookdService, "POST")) != 1 {
				return false
			}
		}
		return true
	})

	if len(delivery.Find(hookdService, "POST /webhooks/stripe")) != 1 {
		t.Errorf("the delivery's trace has no server span POST /webhooks/stripe")
	}
	for i, tr := range append([]e2etest.JaegerTrace{delivery}, retries...) {
		call, appSpan := tr.Find(hookdService, "POST")[0], tr.Find(appService, "app handles event")[0]
		if !appSpan.ChildOf(tr.TraceID, call.SpanID) {
			t.Errorf("attempt %d: the app's span is not the child of hookd's call to it: %+v", i, appSpan.References)
		}
	}
	for i, tr := range retries {
		r := tr.Find(hookdService, tracing.SpanRetry)[0]
		if !r.LinksTo(delivery.TraceID, deliverSpan.SpanID) {
			t.Errorf("retry %d's references %+v do not name the delivery's span %s", i+1, r.References, deliverSpan.SpanID)
		}
		if tr.TraceID == delivery.TraceID {
			t.Errorf("retry %d is in the delivery's trace, want one of its own", i+1)
		}
	}
}
