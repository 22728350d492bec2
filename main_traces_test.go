package main

import (
	"context"
	"fmt"
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

// appErrorBody is what the app answers while it fails: an app's error
// often names the customer, and it must reach no span.
const appErrorBody = "customer jane.doe@example.com: invoice not found"

// TestTraces_JaegerHoldsTheDeliveryItsRetriesAndTheAppsSpans runs the
// built binary exporting to a real Jaeger, and an app that traces itself
// and fails an event twice, then reads back through Jaeger's query API: the
// delivery's trace with the app's span under hookd's call and the PRODUCER
// span that queued the event, and two retries, each a CONSUMER span at the
// root of a trace of its own linked to that PRODUCER span, with the app's
// span in each; the messaging conventions' attributes, the resource's
// service.version and service.instance.id, no span named by a bare SQL
// keyword, and the app's error body nowhere.
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
			http.Error(w, appErrorBody, http.StatusInternalServerError)
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
	var deliverSpan, sendSpan e2etest.JaegerSpan
	queuetest.WaitFor(t, 30*time.Second, "Jaeger to hold the delivery and both retries with the app's spans", func() bool {
		delivery, retries = e2etest.JaegerTrace{}, nil
		for _, tr := range j.Traces(t, hookdService) {
			if d := tr.Find(hookdService, tracing.SpanDeliver); len(d) == 1 && d[0].Tag("hookd.event_id") == id {
				delivery, deliverSpan = tr, d[0]
			}
			if r := tr.Find(hookdService, tracing.SpanProcess); len(r) == 1 && r[0].Tag("hookd.event_id") == id {
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
	if sends := delivery.Find(hookdService, tracing.SpanSend); len(sends) != 1 || !sends[0].ChildOf(delivery.TraceID, deliverSpan.SpanID) {
		t.Fatalf("the delivery's trace has %d spans %q, want one, under the delivery's span", len(sends), tracing.SpanSend)
	} else {
		sendSpan = sends[0]
	}
	wantMessagingTags(t, sendSpan, "producer", "send", id)
	for i, tr := range retries {
		r := tr.Find(hookdService, tracing.SpanProcess)[0]
		wantMessagingTags(t, r, "consumer", "process", id)
		if r.Tag("hookd.path") != "retry" || r.Tag("hookd.queue.wait_ms") == "" {
			t.Errorf("retry %d's hookd.path %q, hookd.queue.wait_ms %q; want retry and how long it waited",
				i+1, r.Tag("hookd.path"), r.Tag("hookd.queue.wait_ms"))
		}
		if !r.LinksTo(delivery.TraceID, sendSpan.SpanID) {
			t.Errorf("retry %d's references %+v do not name the span that queued the event, %s", i+1, r.References, sendSpan.SpanID)
		}
		if tr.TraceID == delivery.TraceID {
			t.Errorf("retry %d is in the delivery's trace, want one of its own", i+1)
		}
	}

	for _, tr := range append([]e2etest.JaegerTrace{delivery}, retries...) {
		for _, sp := range tr.Spans {
			if tr.Processes[sp.ProcessID].ServiceName != hookdService {
				continue
			}
			for _, key := range []string{"service.version", "service.instance.id"} {
				if tr.ProcessTag(sp, key) == "" {
					t.Errorf("span %s's resource has no %s", sp.OperationName, key)
				}
			}
			if first, _, _ := strings.Cut(sp.OperationName, " "); sqlKeyword[strings.ToUpper(first)] {
				t.Errorf("span %q is named by a SQL keyword, not by its statement", sp.OperationName)
			}
			for _, kv := range sp.Tags {
				if strings.Contains(fmt.Sprint(kv.Value), "jane.doe@example.com") {
					t.Errorf("span %s's %s holds the app's error body: %v", sp.OperationName, kv.Key, kv.Value)
				}
			}
		}
	}
	if call := delivery.Find(hookdService, "POST")[0]; call.Tag("otel.status_code") != "ERROR" {
		t.Errorf("the failed call to the app has status %q, want ERROR", call.Tag("otel.status_code"))
	}
	if got := deliverSpan.Tag("otel.status_description"); got != "app_status: the app answered 500" {
		t.Errorf("the failed delivery's status says %q, want the app's status and the failure's class", got)
	}
}

// sqlKeyword are the words a statement may start with, which the
// database instrumentation named its spans by (every short transaction of
// hookd's was WITH).
var sqlKeyword = map[string]bool{"WITH": true, "SELECT": true, "INSERT": true, "UPDATE": true, "DELETE": true,
	"BEGIN": true, "COMMIT": true, "BATCH": true}

// wantMessagingTags checks the span kind and the messaging conventions'
// attributes of s, event id's operation op (send or process) on the queue.
func wantMessagingTags(t *testing.T, s e2etest.JaegerSpan, kind, op, id string) {
	t.Helper()
	for key, want := range map[string]string{"span.kind": kind, "messaging.system": "hookd",
		"messaging.operation.type": op, "messaging.message.id": id, "messaging.destination.name": "default"} {
		if got := s.Tag(key); got != want {
			t.Errorf("span %s's %s = %q, want %q", s.OperationName, key, got, want)
		}
	}
}

// TestTraces_RefusalsAreSampled posts 60 unsigned deliveries to the built
// binary exporting to a real Jaeger: Jaeger gets the spans of one of them,
// not the 180 that tracing each would make, which would crowd the real
// deliveries' spans out of the export queue.
func TestTraces_RefusalsAreSampled(t *testing.T) {
	t.Parallel()
	j := e2etest.StartJaeger(t)
	service := "hookd-test-" + strings.ToLower(stripeevent.NewID("run"))
	bundle := setup(t)
	p := startHookdProcess(t, buildHookdBinary(t), []string{
		"DATABASE_URL=" + bundle.dbURL, "STRIPE_WEBHOOK_SECRET=" + testSecret, "HOOKD_PROCESSOR=discard",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + j.OTLP, "OTEL_SERVICE_NAME=" + service,
		"OTEL_TRACES_SAMPLER=always_on", "OTEL_BSP_SCHEDULE_DELAY=100",
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("hookd's log:\n%s", p.log)
		}
	})
	if !strings.Contains(p.log.String(), "traces exported") || !strings.Contains(p.log.String(), "endpoint="+j.OTLP+"/v1/traces") {
		t.Errorf("hookd's start says nothing of where its traces go:\n%s", p.log)
	}
	payload, _, err := stripeevent.Sample("invoice.paid", "refusals-test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	client := jaegerClient(t)
	for range 60 {
		resp, err := client.Post(p.base+stripeevent.ReceiverPath, "application/json", strings.NewReader(string(payload)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("an unsigned delivery answered %s, want 400", resp.Status)
		}
	}
	// A clean stop sends what the exporter still holds: what Jaeger has
	// then is all hookd exported.
	if err := p.terminate(); err != nil {
		t.Fatalf("hookd's stop: %v", err)
	}
	var spans int
	queuetest.WaitFor(t, 30*time.Second, "Jaeger to hold the refused delivery that is traced", func() bool {
		spans = 0
		for _, tr := range j.Traces(t, service) {
			spans += len(tr.Spans)
		}
		return spans > 0
	})
	if spans > 10 {
		t.Errorf("60 unsigned deliveries exported %d spans, want at most 10", spans)
	}
	for _, tr := range j.Traces(t, service) {
		if d := tr.Find(service, tracing.SpanDeliver); len(d) != 1 || d[0].Tag("hookd.refusal") != "no_signature" {
			t.Errorf("a refused delivery's trace has %d delivery spans; want one, saying the refusal (no_signature)", len(d))
		}
	}
}
