package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
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

	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/queue/queuetest"
)

// The Jaeger that .ci/jaeger.sh (make jaeger) runs: OTLP over HTTP in,
// its query API out.
const (
	jaegerOTLP  = "http://127.0.0.1:4318"
	jaegerQuery = "http://127.0.0.1:16686"
)

// needJaeger skips the test when no Jaeger answers, saying how to start
// one, and fails it under CI=true, where .ci/run has started one.
func needJaeger(t *testing.T) {
	t.Helper()
	resp, err := jaegerClient(t).Get(jaegerQuery + "/api/services")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
		err = fmt.Errorf("answered %s", resp.Status)
	}
	msg := fmt.Sprintf("no Jaeger at %s (%v): make jaeger starts one", jaegerQuery, err)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// jaegerClient is a client whose connections close when t ends, so no
// goroutine outlives the test.
func jaegerClient(t *testing.T) *http.Client {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// jaegerTrace is a trace as Jaeger's query API (/api/traces) answers it.
type jaegerTrace struct {
	TraceID   string       `json:"traceID"`
	Spans     []jaegerSpan `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

// jaegerSpan is a span of a jaegerTrace: its parent is a CHILD_OF
// reference, and each of its links another reference.
type jaegerSpan struct {
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	ProcessID     string `json:"processID"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

func (tr jaegerTrace) find(service, operation string) []jaegerSpan {
	var out []jaegerSpan
	for _, s := range tr.Spans {
		if s.OperationName == operation && tr.Processes[s.ProcessID].ServiceName == service {
			out = append(out, s)
		}
	}
	return out
}

func tag(s jaegerSpan, key string) string {
	for _, kv := range s.Tags {
		if kv.Key == key {
			return fmt.Sprint(kv.Value)
		}
	}
	return ""
}

// childOf says whether s's parent is the span parent of trace traceID.
func childOf(s jaegerSpan, traceID, parent string) bool {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" && r.TraceID == traceID && r.SpanID == parent {
			return true
		}
	}
	return false
}

// tracesOf reads every trace Jaeger holds with a span of service.
func tracesOf(t *testing.T, service string) []jaegerTrace {
	t.Helper()
	q := url.Values{"service": {service}, "limit": {"100"}, "lookback": {"1h"}}
	resp, err := jaegerClient(t).Get(jaegerQuery + "/api/traces?" + q.Encode())
	if err != nil {
		t.Fatalf("query Jaeger: %v", err)
	}
	defer resp.Body.Close()
	var body struct {
		Data []jaegerTrace `json:"data"`
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("query Jaeger: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("query Jaeger: %v", err)
	}
	return body.Data
}

// TestTraces_JaegerHoldsTheDeliveryItsRetriesAndTheAppsSpans runs the
// built binary exporting to a real Jaeger, and an app that traces itself
// and fails an event twice, then reads back through Jaeger's query API: the
// delivery's trace with the app's span under hookd's call, and two retries,
// each a trace of its own linked to the delivery, with the app's span in
// each.
func TestTraces_JaegerHoldsTheDeliveryItsRetriesAndTheAppsSpans(t *testing.T) {
	t.Parallel()
	needJaeger(t)
	run := strings.ToLower(stripeevent.NewID("run"))
	hookdService, appService := "hookd-test-"+run, "app-test-"+run

	// The app exports its own spans to the same Jaeger, each the child of
	// the traceparent hookd sends it.
	exporter, err := otlptracehttp.New(t.Context(), otlptracehttp.WithEndpointURL(jaegerOTLP+"/v1/traces"),
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
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + jaegerOTLP, "OTEL_SERVICE_NAME=" + hookdService,
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

	var delivery jaegerTrace
	var retries []jaegerTrace
	var deliverSpan jaegerSpan
	queuetest.WaitFor(t, 30*time.Second, "Jaeger to hold the delivery and both retries with the app's spans", func() bool {
		delivery, retries = jaegerTrace{}, nil
		for _, tr := range tracesOf(t, hookdService) {
			if d := tr.find(hookdService, tracing.SpanDeliver); len(d) == 1 && tag(d[0], "hookd.event_id") == id {
				delivery, deliverSpan = tr, d[0]
			}
			if r := tr.find(hookdService, tracing.SpanRetry); len(r) == 1 && tag(r[0], "hookd.event_id") == id {
				retries = append(retries, tr)
			}
		}
		if delivery.TraceID == "" || len(retries) != 2 {
			return false
		}
		for _, tr := range append([]jaegerTrace{delivery}, retries...) {
			if len(tr.find(appService, "app handles event")) != 1 || len(tr.find(hookdService, "POST")) != 1 {
				return false
			}
		}
		return true
	})

	if len(delivery.find(hookdService, "POST /webhooks/stripe")) != 1 {
		t.Errorf("the delivery's trace has no server span POST /webhooks/stripe")
	}
	for i, tr := range append([]jaegerTrace{delivery}, retries...) {
		call, appSpan := tr.find(hookdService, "POST")[0], tr.find(appService, "app handles event")[0]
		if !childOf(appSpan, tr.TraceID, call.SpanID) {
			t.Errorf("attempt %d: the app's span is not the child of hookd's call to it: %+v", i, appSpan.References)
		}
	}
	for i, tr := range retries {
		r := tr.find(hookdService, tracing.SpanRetry)[0]
		linked := false
		for _, ref := range r.References {
			// Jaeger shows a span's links as FOLLOWS_FROM references.
			if ref.RefType == "FOLLOWS_FROM" && ref.TraceID == delivery.TraceID && ref.SpanID == deliverSpan.SpanID {
				linked = true
			}
		}
		if !linked {
			t.Errorf("retry %d's references %+v do not name the delivery's span %s", i+1, r.References, deliverSpan.SpanID)
		}
		if tr.TraceID == delivery.TraceID {
			t.Errorf("retry %d is in the delivery's trace, want one of its own", i+1)
		}
	}
}
