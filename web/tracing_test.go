package web_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web"
	"github.com/hookd/hookd/worker"
)

// tracedForwardSecret signs the forwarded events of the traced tests: no
// attribute may hold it.
const tracedForwardSecret = "whsec_dHJhY2VkLWZvcndhcmQtc2VjcmV0LWtleQ=="

// appToken is in the forward URL's query, as an app's token may be: no
// attribute may hold it.
const appToken = "app-token-5c1e"

// payloadMarker is in every traced test event's payload and nowhere else:
// no attribute may hold it.
const payloadMarker = "payload-marker-7f3a"

// tracedHookd is hookd's pipeline wired as hookd serve wires it with
// tracing on, over a store whose statements are traced, exporting to
// memory, and forwarding to app.
type tracedHookd struct {
	srv      *httptest.Server
	store    *queue.Store
	pool     *pgxpool.Pool
	spans    *tracetest.InMemoryExporter
	retrier  *worker.Retrier
	app      *tracedApp
	provider *sdktrace.TracerProvider
	// tracer and forwarder are the pipeline's, for the loops a test
	// starts itself.
	tracer    *tracing.Tracer
	forwarder *worker.Forwarder
	logs      *bytes.Buffer
	logsMu    *sync.Mutex
}

// tracedApp answers 500 to the first fail deliveries, then 200, and keeps
// the traceparent of each.
type tracedApp struct {
	mu           sync.Mutex
	fail         int
	traceparents []string
}

func (a *tracedApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.traceparents = append(a.traceparents, r.Header.Get("traceparent"))
	if len(a.traceparents) <= a.fail {
		http.Error(w, "not yet", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (a *tracedApp) received() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.traceparents...)
}

// syncWriter is a bytes.Buffer safe for the goroutines that log.
type syncWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func newTracedHookd(t *testing.T, failFirst int, opts ...sdktrace.TracerProviderOption) *tracedHookd {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	provider := sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{sdktrace.WithSyncer(spans)}, opts...)...)
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	tracer := tracing.New(provider)

	cfg, err := pgxpool.ParseConfig(queuetest.NewDatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = tracer.QueryTracer()
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := queue.New(pool)

	app := &tracedApp{fail: failFirst}
	appSrv := httptest.NewServer(app)
	t.Cleanup(appSrv.Close)
	fwd, err := worker.NewForwarder(appSrv.URL+"/hook?token="+appToken, tracedForwardSecret)
	if err != nil {
		t.Fatal(err)
	}
	fwd.Traced(tracer)

	logs, mu := &bytes.Buffer{}, &sync.Mutex{}
	logger := slog.New(tracing.LogHandler(slog.NewTextHandler(syncWriter{mu, logs}, nil)))
	rcv := receiver.New(store, logger, receiver.Config{Secrets: []string{testSecret}, Processor: fwd, Tracer: tracer})
	srv := httptest.NewServer(web.NewServer(web.Options{Logger: logger, Stores: web.Stores{Queue: store},
		Receiver: rcv, Tracer: tracer}))
	t.Cleanup(srv.Close)
	retrier := worker.NewRetrier(store, logger, worker.ProducerConfig{Processor: fwd, Tracer: tracer})
	return &tracedHookd{srv: srv, store: store, pool: pool, spans: spans, retrier: retrier, app: app,
		provider: provider, tracer: tracer, forwarder: fwd, logs: logs, logsMu: mu}
}

// deliver posts a signed sample event and returns its id and payload.
func (h *tracedHookd) deliver(t *testing.T, wantBody string) (string, []byte, string) {
	t.Helper()
	payload, id, err := stripeevent.Sample("invoice.paid", payloadMarker, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	sig := stripeevent.Sign(payload, testSecret, time.Now())
	if got := post(t, h.srv, payload, sig); got.status != http.StatusOK || got.body != wantBody+"\n" {
		t.Fatalf("delivery answered %d %q, want 200 %q", got.status, got.body, wantBody)
	}
	return id, payload, sig
}

// span waits for the ended span named name that match accepts, and
// returns it: a server span ends just after its answer has gone.
func (h *tracedHookd) span(t *testing.T, name string, match func(tracetest.SpanStub) bool) tracetest.SpanStub {
	t.Helper()
	var found tracetest.SpanStub
	queuetest.WaitFor(t, 5*time.Second, "span "+name, func() bool {
		for _, s := range h.spans.GetSpans() {
			if s.Name == name && (match == nil || match(s)) {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

// sqlKeywords are the words a statement may start with, which the
// database instrumentation named its spans by: every short transaction of
// hookd's was WITH.
var sqlKeywords = map[string]bool{"WITH": true, "SELECT": true, "INSERT": true, "UPDATE": true, "DELETE": true,
	"BEGIN": true, "COMMIT": true, "BATCH": true}

// children are the ended spans whose parent is s.
func (h *tracedHookd) children(s tracetest.SpanStub) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, c := range h.spans.GetSpans() {
		if childOf(s)(c) {
			out = append(out, c)
		}
	}
	return out
}

func childOf(parent tracetest.SpanStub) func(tracetest.SpanStub) bool {
	return func(s tracetest.SpanStub) bool { return s.Parent.SpanID() == parent.SpanContext.SpanID() }
}

func attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

func TestTracing_InlineDeliveryIsOneSpanTree(t *testing.T) {
	t.Parallel()
	h := newTracedHookd(t, 0)
	id, _, _ := h.deliver(t, "processed")

	server := h.span(t, "POST /webhooks/stripe", nil)
	if server.SpanKind != trace.SpanKindServer {
		t.Errorf("receiver's span kind = %v, want server", server.SpanKind)
	}
	if got := attr(server, "http.response.status_code"); got != "200" {
		t.Errorf("server span's http.response.status_code = %q, want 200", got)
	}
	deliver := h.span(t, tracing.SpanDeliver, childOf(server))
	for key, want := range map[string]string{
		"hookd.event_id": id, "hookd.event_type": "invoice.paid", "hookd.endpoint": "default",
		"hookd.attempt": "0", "hookd.path": "inline", "hookd.outcome": "processed",
	} {
		if got := attr(deliver, key); got != want {
			t.Errorf("delivery span's %s = %q, want %q", key, got, want)
		}
	}
	lease := h.span(t, tracing.SpanLease, childOf(deliver))
	outcome := h.span(t, tracing.SpanOutcome, childOf(deliver))
	client := h.span(t, "POST", childOf(deliver))
	if client.SpanKind != trace.SpanKindClient {
		t.Errorf("the call to the app's span kind = %v, want client", client.SpanKind)
	}
	// The lease's and the outcome's short transactions, each one batch of
	// statements, are their children, one CLIENT span each, named by what
	// the transaction does, with the database conventions.
	for step, name := range map[*tracetest.SpanStub]string{&lease: "hookd.take", &outcome: "hookd.settle_processed"} {
		batch := h.span(t, name, func(s tracetest.SpanStub) bool {
			return childOf(*step)(s) && attr(s, "db.system.name") == "postgresql" && attr(s, "db.query.summary") == name
		})
		if batch.SpanKind != trace.SpanKindClient {
			t.Errorf("the transaction span of %s's kind = %v, want client", step.Name, batch.SpanKind)
		}
		if n := len(h.children(batch)); n != 0 {
			t.Errorf("the transaction span %s has %d children, want none: one span a round trip", name, n)
		}
	}
	for _, s := range h.spans.GetSpans() {
		if first, _, _ := strings.Cut(s.Name, " "); sqlKeywords[strings.ToUpper(first)] {
			t.Errorf("span %q is named by a SQL keyword, not by its statement", s.Name)
		}
	}
	for _, s := range h.spans.GetSpans() {
		if s.SpanContext.TraceID() != server.SpanContext.TraceID() {
			t.Errorf("span %s is in trace %s, want the delivery's %s", s.Name, s.SpanContext.TraceID(), server.SpanContext.TraceID())
		}
	}

	// The app is handed the client span's context.
	got := h.app.received()
	if want := traceparentOf(client); len(got) != 1 || got[0] != want {
		t.Errorf("app received traceparent %q, want the client span's %q", got, want)
	}
}

func TestTracing_RetriesAreTracesLinkedToTheDelivery(t *testing.T) {
	t.Parallel()
	// The inline attempt and the first retry fail, the second retry
	// succeeds: three attempts.
	h := newTracedHookd(t, 2)
	id, _, _ := h.deliver(t, "queued")
	deliver := h.span(t, tracing.SpanDeliver, func(s tracetest.SpanStub) bool { return attr(s, "hookd.event_id") == id })
	if got := attr(deliver, "hookd.outcome"); got != "queued" {
		t.Errorf("delivery span's outcome = %q, want queued", got)
	}
	if deliver.Status.Description != "app_status: the app answered 500" || attr(deliver, "error.type") != "app_status" {
		t.Errorf("failed delivery's status = %+v, error.type %q; want the app's 500 and the class app_status",
			deliver.Status, attr(deliver, "error.type"))
	}
	// The event goes on the queue under a PRODUCER span, whose context the
	// queue row keeps.
	send := h.span(t, tracing.SpanSend, childOf(deliver))
	if send.SpanKind != trace.SpanKindProducer {
		t.Errorf("the span that queues the event is %v, want producer", send.SpanKind)
	}
	wantMessaging(t, send, id, "send")

	for range 2 {
		dueNow(t, h.pool)
		if n, err := h.retrier.RunBatch(t.Context()); err != nil || n != 1 {
			t.Fatalf("RunBatch = %d, %v; want 1 event claimed", n, err)
		}
	}
	var retries []tracetest.SpanStub
	queuetest.WaitFor(t, 5*time.Second, "two retry spans", func() bool {
		retries = retries[:0]
		for _, s := range h.spans.GetSpans() {
			if s.Name == tracing.SpanProcess {
				retries = append(retries, s)
			}
		}
		return len(retries) == 2
	})
	for i, r := range retries {
		n := fmt.Sprint(i + 1)
		if r.Parent.IsValid() {
			t.Errorf("retry %s has parent %s, want the root of a trace of its own", n, r.Parent.SpanID())
		}
		if r.SpanContext.TraceID() == deliver.SpanContext.TraceID() {
			t.Errorf("retry %s is in the delivery's trace, want one of its own", n)
		}
		if len(r.Links) != 1 || r.Links[0].SpanContext.SpanID() != send.SpanContext.SpanID() ||
			r.Links[0].SpanContext.TraceID() != deliver.SpanContext.TraceID() {
			t.Errorf("retry %s links %v, want the span that queued the event, %s", n, r.Links, send.SpanContext.SpanID())
		}
		if r.SpanKind != trace.SpanKindConsumer {
			t.Errorf("retry %s's span is %v, want consumer", n, r.SpanKind)
		}
		wantMessaging(t, r, id, "process")
		if attr(r, "hookd.queue.wait_ms") == "" {
			t.Errorf("retry %s's span does not say how long the event waited on the queue", n)
		}
		if got := attr(r, "hookd.attempt"); got != n {
			t.Errorf("retry %s's hookd.attempt = %q", n, got)
		}
		if got := attr(r, "hookd.path"); got != "retry" {
			t.Errorf("retry %s's hookd.path = %q, want retry", n, got)
		}
		h.span(t, tracing.SpanOutcome, childOf(r))
	}
	if got := attr(retries[0], "hookd.outcome"); got != string(queue.SettleFailed) {
		t.Errorf("first retry's outcome = %q, want failed", got)
	}
	if got := attr(retries[1], "hookd.outcome"); got != string(queue.SettleDone) {
		t.Errorf("second retry's outcome = %q, want done", got)
	}

	// Each attempt's traceparent names its own client span, in its own
	// trace, and the attempt history keeps each trace's id.
	got := h.app.received()
	if len(got) != 3 {
		t.Fatalf("app received %d deliveries, want 3", len(got))
	}
	attempts := []tracetest.SpanStub{deliver, retries[0], retries[1]}
	for i, a := range attempts {
		client := h.span(t, "POST", childOf(a))
		if want := traceparentOf(client); got[i] != want {
			t.Errorf("attempt %d's traceparent = %q, want its client span's %q", i, got[i], want)
		}
	}
	history, err := h.store.Attempts(t.Context(), queue.SourceStripe, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(history) != 3 {
		t.Fatalf("attempt history holds %d attempts, want 3", len(history))
	}
	for i, a := range history {
		want := attempts[i].SpanContext.TraceID().String()
		if a.TraceID == nil || *a.TraceID != want {
			t.Errorf("attempt %d's trace id = %v, want %s", i, a.TraceID, want)
		}
	}

	// What was logged during the attempts carries their traces.
	h.logsMu.Lock()
	logs := h.logs.String()
	h.logsMu.Unlock()
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "event queued for retry") || strings.Contains(line, "retry failed") {
			if !strings.Contains(line, "trace_id=") || !strings.Contains(line, "span_id=") {
				t.Errorf("log line during a traced delivery without its trace: %s", line)
			}
		}
	}
	if !strings.Contains(logs, "trace_id="+deliver.SpanContext.TraceID().String()) {
		t.Errorf("no log line carries the delivery's trace id; logs:\n%s", logs)
	}
}

func TestTracing_RefusalSaysWhy(t *testing.T) {
	t.Parallel()
	h := newTracedHookd(t, 0)
	payload, _, err := stripeevent.Sample("invoice.paid", payloadMarker, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := post(t, h.srv, payload, stripeevent.Sign(payload, "whsec_someone_elses", time.Now())); got.status != 400 {
		t.Fatalf("badly signed delivery answered %d, want 400", got.status)
	}
	server := h.span(t, "POST /webhooks/stripe", nil)
	deliver := h.span(t, tracing.SpanDeliver, childOf(server))
	for _, s := range []tracetest.SpanStub{server, deliver} {
		if s.Status.Description == "" || attr(s, "error.type") != "wrong_signature" {
			t.Errorf("span %s: status %+v, error.type %q; want the refusal's reason wrong_signature",
				s.Name, s.Status, attr(s, "error.type"))
		}
	}
	for _, s := range []tracetest.SpanStub{server, deliver} {
		if got := attr(s, "hookd.refusal"); got != "wrong_signature" {
			t.Errorf("span %s's hookd.refusal = %q, want wrong_signature", s.Name, got)
		}
	}
	if got := attr(server, "http.response.status_code"); got != "400" {
		t.Errorf("server span's http.response.status_code = %q, want 400", got)
	}
	if n := queuetest.Count(t, h.pool, `SELECT count(*) FROM webhook_events`); n != 0 {
		t.Errorf("a refused delivery left %d queue rows", n)
	}
}

// TestTracing_ClientAddressIsTheOneHookdBelieves sends a delivery that
// claims, in X-Forwarded-For, to come from elsewhere, from an address that
// is no trusted proxy: the server span's client.address is the
// connection's, as the rejection log's is, not the one the sender wrote.
func TestTracing_ClientAddressIsTheOneHookdBelieves(t *testing.T) {
	t.Parallel()
	h := newTracedHookd(t, 0)
	payload, _, err := stripeevent.Sample("invoice.paid", payloadMarker, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/webhooks/stripe", bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Stripe-Signature", stripeevent.Sign(payload, testSecret, time.Now()))
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	if got := do(t, req); got.status != http.StatusOK {
		t.Fatalf("delivery answered %d %q", got.status, got.body)
	}
	server := h.span(t, "POST /webhooks/stripe", nil)
	if got := attr(server, "client.address"); got != "127.0.0.1" {
		t.Errorf("server span's client.address = %q, want the connection's 127.0.0.1, not X-Forwarded-For's", got)
	}
}

// TestTracing_SendersTraceContextNeverForcesSampling runs hookd sampling
// nothing of its own and posts a delivery whose traceparent says sampled:
// the sender's decision is not hookd's, so the delivery is neither
// sampled nor joined to the sender's trace, and the app is told so.
func TestTracing_SendersTraceContextNeverForcesSampling(t *testing.T) {
	t.Parallel()
	h := newTracedHookd(t, 0, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	payload, _, err := stripeevent.Sample("invoice.paid", payloadMarker, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/webhooks/stripe", bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Stripe-Signature", stripeevent.Sign(payload, testSecret, time.Now()))
	const senderTrace = "0af7651916cd43dd8448eb211c80319c"
	req.Header.Set("traceparent", "00-"+senderTrace+"-b7ad6b7169203331-01")
	if got := do(t, req); got.status != http.StatusOK {
		t.Fatalf("delivery answered %d %q", got.status, got.body)
	}
	got := h.app.received()
	if len(got) != 1 {
		t.Fatalf("the app received %d deliveries, want 1", len(got))
	}
	if strings.Contains(got[0], senderTrace) || !strings.HasSuffix(got[0], "-00") {
		t.Errorf("the app received traceparent %q, want a trace of hookd's own, not sampled", got[0])
	}
	if n := len(h.spans.GetSpans()); n != 0 {
		t.Errorf("%d spans exported of a delivery hookd did not sample", n)
	}
}

func TestTracing_NoAttributeHoldsPayloadOrSecret(t *testing.T) {
	t.Parallel()
	h := newTracedHookd(t, 1)
	_, payload, sig := h.deliver(t, "queued")
	dueNow(t, h.pool)
	if _, err := h.retrier.RunBatch(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.span(t, tracing.SpanProcess, nil)
	_, v1, _ := strings.Cut(sig, "v1=")
	secrets := []string{payloadMarker, string(payload), testSecret, strings.TrimPrefix(testSecret, "whsec_"),
		tracedForwardSecret, strings.TrimPrefix(tracedForwardSecret, "whsec_"), v1, appToken}
	spans := h.spans.GetSpans()
	if len(spans) == 0 {
		t.Fatal("no spans exported")
	}
	for _, s := range spans {
		for _, kv := range s.Attributes {
			for _, secret := range secrets {
				if strings.Contains(kv.Value.String(), secret) {
					t.Errorf("span %s's attribute %s holds %q", s.Name, kv.Key, secret[:min(len(secret), 20)])
				}
			}
		}
		for _, secret := range secrets {
			if strings.Contains(s.Status.Description, secret) {
				t.Errorf("span %s's status holds %q", s.Name, secret[:min(len(secret), 20)])
			}
		}
	}
}

// wantMessaging checks the messaging conventions' attributes of s, a span
// of event id's operation op (send or process) on the queue.
func wantMessaging(t *testing.T, s tracetest.SpanStub, id, op string) {
	t.Helper()
	for key, want := range map[string]string{"messaging.system": "hookd", "messaging.operation.type": op,
		"messaging.operation.name": op, "messaging.message.id": id, "messaging.destination.name": "default"} {
		if got := attr(s, key); got != want {
			t.Errorf("span %s's %s = %q, want %q", s.Name, key, got, want)
		}
	}
	if want := op + " default"; s.Name != want {
		t.Errorf("span %s, want it named %q", s.Name, want)
	}
}

// dueNow makes every queued event due.
func dueNow(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), `UPDATE webhook_events SET next_retry_at = now()`); err != nil {
		t.Fatal(err)
	}
}

// traceparentOf is the W3C traceparent that names s.
func traceparentOf(s tracetest.SpanStub) string {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), s.SpanContext), carrier)
	return carrier.Get("traceparent")
}

func TestTracing_EventPageLinksEachAttemptsTrace(t *testing.T) {
	t.Parallel()
	const traced, untraced = "4bf92f3577b34da6a3ce929d0e0e4736", ""
	for _, c := range []struct {
		name, traceURL, wantHref string
	}{
		{"WithTraceURL", "https://tempo.example/trace/{trace_id}?orgId=1", "https://tempo.example/trace/" + traced + "?orgId=1"},
		{"WithoutTraceURL", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, withOptions(web.Options{TraceURL: c.traceURL}))
			e := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 1})
			queuetest.InsertAttempt(t, b.pool, queue.NewAttempt{Source: e.Source, EventID: e.EventID, Path: queue.PathInline,
				Error: "downstream answered 500", TraceID: traced})
			queuetest.InsertAttempt(t, b.pool, queue.NewAttempt{Source: e.Source, EventID: e.EventID, Path: queue.PathRetry,
				Number: 1, Error: "downstream answered 500", TraceID: untraced})
			cl := b.client(t)
			cl.signIn(accounts.RoleViewer)
			page := cl.get("/events/" + e.ID.String())
			if page.status != http.StatusOK {
				t.Fatalf("event page answered %d", page.status)
			}
			rows := page.doc.Find(`[data-testid="attempt-row"]`)
			if rows.Length() != 2 {
				t.Fatalf("%d attempt rows, want 2", rows.Length())
			}
			first := rows.Eq(0).Find(`[data-testid="attempt-trace"]`)
			if got := strings.Join(strings.Fields(first.Text()), " "); got != "Trace "+traced {
				t.Errorf("traced attempt's trace line = %q, want %q", got, "Trace "+traced)
			}
			href, linked := first.Find("a").Attr("href")
			if href != c.wantHref || linked != (c.wantHref != "") {
				t.Errorf("traced attempt's link = %q (linked %v), want %q", href, linked, c.wantHref)
			}
			if n := rows.Eq(1).Find(`[data-testid="attempt-trace"]`).Length(); n != 0 {
				t.Errorf("an attempt without a trace shows %d trace lines, want none", n)
			}
		})
	}
}

func TestTracing_ReplayIsATraceLinkedToTheDelivery(t *testing.T) {
	t.Parallel()
	h := newTracedHookd(t, 1)
	id, _, _ := h.deliver(t, "queued")
	deliver := h.span(t, tracing.SpanDeliver, func(s tracetest.SpanStub) bool { return attr(s, "hookd.event_id") == id })
	send := h.span(t, tracing.SpanSend, childOf(deliver))

	replayer := worker.NewReplayer(h.store, slog.New(slog.DiscardHandler), worker.ProducerConfig{
		Interval: 50 * time.Millisecond, Processor: h.forwarder, Tracer: h.tracer})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = replayer.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	const name = "traced replay"
	if _, err := h.store.StartReplay(t.Context(), name, queue.ReplayFilter{From: time.Now().Add(-time.Hour),
		To: time.Now().Add(time.Hour), Pending: true}, "ops@example.com"); err != nil {
		t.Fatal(err)
	}

	replay := h.span(t, tracing.SpanProcess, func(s tracetest.SpanStub) bool { return attr(s, "hookd.path") == "replay" })
	if replay.Parent.IsValid() || replay.SpanContext.TraceID() == deliver.SpanContext.TraceID() {
		t.Errorf("the replay's span is in trace %s under %s, want the root of a trace of its own",
			replay.SpanContext.TraceID(), replay.Parent.SpanID())
	}
	if len(replay.Links) != 1 || replay.Links[0].SpanContext.SpanID() != send.SpanContext.SpanID() {
		t.Errorf("the replay's span links %v, want the span that queued the event, %s", replay.Links, send.SpanContext.SpanID())
	}
	if replay.SpanKind != trace.SpanKindConsumer {
		t.Errorf("the replay's span is %v, want consumer", replay.SpanKind)
	}
	wantMessaging(t, replay, id, "process")
	for key, want := range map[string]string{"hookd.event_id": id, "hookd.path": "replay", "hookd.replay": name,
		"hookd.outcome": string(queue.ReplaySettleDelivered)} {
		if got := attr(replay, key); got != want {
			t.Errorf("the replay's span's %s = %q, want %q", key, got, want)
		}
	}
	h.span(t, tracing.SpanOutcome, childOf(replay))
	client := h.span(t, "POST", childOf(replay))
	if got := h.app.received(); len(got) != 2 || got[1] != traceparentOf(client) {
		t.Errorf("app received traceparents %q, want the replay's client span's %q last", got, traceparentOf(client))
	}
}
