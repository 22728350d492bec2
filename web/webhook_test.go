package web_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/internal/telemetry"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web"
	"github.com/hookd/hookd/worker"
)

const testSecret = "whsec_test_secret"

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// newServer starts hookd's handler over store with processor p.
func newServer(t testing.TB, store *queue.Store, p worker.Processor, maxBody int64) *httptest.Server {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(telemetry.NewQueueCollector(discardLogger, store, 0))
	metrics := telemetry.NewMetrics(reg, nil)
	receiver := receiver.New(store, discardLogger, receiver.Config{
		Secrets: []string{testSecret}, Processor: p, Metrics: metrics,
	})
	srv := httptest.NewServer(web.NewServer(web.Options{Logger: discardLogger, Stores: web.Stores{Queue: store},
		Receiver: receiver, Metrics: metrics, Gatherer: reg, MaxBody: maxBody}))
	t.Cleanup(srv.Close)
	return srv
}

type answer struct {
	status int
	body   string
	header http.Header
}

func post(t *testing.T, srv *httptest.Server, body []byte, sig string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/stripe", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if sig != "" {
		req.Header.Set("Stripe-Signature", sig)
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) answer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", req.Method, req.URL, err)
		return answer{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b), resp.Header}
}

func stored(t *testing.T, pool *pgxpool.Pool) int64 {
	return queuetest.Count(t, pool, `SELECT (SELECT count(*) FROM processed_webhook_events) + (SELECT count(*) FROM webhook_events)
		+ (SELECT count(*) FROM webhook_attempts)`)
}

func TestStripeWebhook(t *testing.T) {
	t.Parallel()

	t.Run("ProcessedThenDuplicateBothAnswer200", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, withoutServer())
		srv := newServer(t, bundle.store, worker.Discard, 1<<20)
		body := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
		for _, want := range []string{"processed\n", "duplicate\n"} {
			if got := post(t, srv, body, stripeevent.Sign(body, testSecret, time.Now())); got.status != 200 || got.body != want {
				t.Errorf("got %d %q, want 200 %q", got.status, got.body, want)
			}
		}
		if got := queuetest.Markers(t, bundle.pool); got != 1 {
			t.Errorf("markers: got %d, want 1", got)
		}
	})

	t.Run("FailedProcessingIsQueuedWith200", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, withoutServer())
		srv := newServer(t, bundle.store, worker.ProcessorFunc(func(context.Context, worker.Delivery) worker.Result {
			return worker.Result{Err: fmt.Errorf("downstream answered 502: bad gateway"), HTTPStatus: 502}
		}), 1<<20)
		body := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
		if got := post(t, srv, body, stripeevent.Sign(body, testSecret, time.Now())); got.status != 200 || got.body != "queued\n" {
			t.Errorf("got %d %q, want 200 queued", got.status, got.body)
		}
		if got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE status = 'failed'`); got != 1 {
			t.Errorf("queue rows: got %d, want 1", got)
		}
	})

	t.Run("FutureTimestampIsAccepted", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, withoutServer())
		srv := newServer(t, bundle.store, worker.Discard, 1<<20)
		body := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
		if got := post(t, srv, body, stripeevent.Sign(body, testSecret, time.Now().Add(time.Hour))); got.status != 200 {
			t.Errorf("got %d %q, want 200", got.status, got.body)
		}
	})

	t.Run("ConcurrentDeliveriesProcessOnce", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, withoutServer())
		const deliveries = 24
		var runs, answered atomic.Int64
		othersAnswered := make(chan struct{})
		// The one delivery that gets the lock holds it until all the others
		// have been answered, so every one of them really overlaps it.
		p := worker.ProcessorFunc(func(ctx context.Context, _ worker.Delivery) worker.Result {
			runs.Add(1)
			select {
			case <-othersAnswered:
			case <-ctx.Done():
			}
			return worker.Result{}
		})
		srv := newServer(t, bundle.store, p, 1<<20)
		body := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
		sig := stripeevent.Sign(body, testSecret, time.Now())

		start := make(chan struct{})
		statuses := make(chan answer, deliveries)
		var wg sync.WaitGroup
		for range deliveries {
			wg.Go(func() {
				<-start
				a := post(t, srv, body, sig)
				statuses <- a
				if answered.Add(1) == deliveries-1 {
					close(othersAnswered)
				}
			})
		}
		close(start)
		wg.Wait()
		close(statuses)
		byStatus := map[int]int{}
		for a := range statuses {
			byStatus[a.status]++
			if a.status == http.StatusServiceUnavailable && a.header.Get("Retry-After") == "" {
				t.Errorf("503 without Retry-After")
			}
		}
		if byStatus[200] != 1 || byStatus[503] != deliveries-1 {
			t.Errorf("answers: got %v, want one 200 and %d 503", byStatus, deliveries-1)
		}
		if got := runs.Load(); got != 1 {
			t.Errorf("processor runs: got %d, want 1", got)
		}
		if got := queuetest.Markers(t, bundle.pool); got != 1 {
			t.Errorf("markers: got %d, want 1", got)
		}
	})

	t.Run("BadInputIsRefusedAndNothingStored", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, withoutServer())
		srv := newServer(t, bundle.store, worker.Discard, 1024)
		good := stripeevent.Minimal("evt_bad_input", "invoice.paid")
		signed := func(b []byte) (string, []byte) { return stripeevent.Sign(b, testSecret, time.Now()), b }
		tests := []struct {
			name       string
			body       []byte
			sig        string
			wantStatus int
			wantBody   string
		}{
			{name: "NoHeader", body: good, sig: "", wantStatus: 400, wantBody: "no Stripe-Signature header"},
			{name: "MalformedHeader", body: good, sig: "t=1,v1", wantStatus: 400, wantBody: "malformed Stripe-Signature header"},
			// A header with no v1 signature to compare is malformed, not a
			// signature made with another secret: the signature alert
			// counts only the latter.
			{name: "NoV1Signature", body: good, sig: fmt.Sprintf("t=%d,v0=abc", time.Now().Unix()), wantStatus: 400, wantBody: "malformed Stripe-Signature header: it holds no v1 signature"},
			{name: "OldAndNoV1Signature", body: good, sig: "t=1", wantStatus: 400, wantBody: "malformed Stripe-Signature header: it holds no v1 signature"},
			{name: "V1NotHex", body: good, sig: "t=1,v1=zz", wantStatus: 400, wantBody: "malformed Stripe-Signature header: it holds no v1 signature"},
			{name: "NoKnownPair", body: good, sig: "x=y", wantStatus: 400, wantBody: "malformed Stripe-Signature header: it holds no v1 signature"},
			{name: "WrongSecret", body: good, sig: stripeevent.Sign(good, "whsec_other", time.Now()), wantStatus: 400, wantBody: "no v1 signature matches"},
			{name: "StaleTimestamp", body: good, sig: stripeevent.Sign(good, testSecret, time.Now().Add(-301*time.Second)), wantStatus: 400, wantBody: "older than the 300 s tolerance"},
			{name: "BodyNotMatchingSignature", body: append([]byte(" "), good...), sig: stripeevent.Sign(good, testSecret, time.Now()), wantStatus: 400, wantBody: "no v1 signature matches"},
			{name: "NotJSON", body: []byte("id=evt_1&type=x"), wantStatus: 400, wantBody: "not a JSON object"},
			{name: "JSONArray", body: []byte(`[{"id":"evt_1","type":"x"}]`), wantStatus: 400, wantBody: "not a JSON object"},
			{name: "NoID", body: []byte(`{"type":"invoice.paid"}`), wantStatus: 400, wantBody: `no "id" field`},
			{name: "NumericID", body: []byte(`{"id":12,"type":"invoice.paid"}`), wantStatus: 400, wantBody: `"id" is not a string`},
			{name: "EmptyID", body: []byte(`{"id":"","type":"invoice.paid"}`), wantStatus: 400, wantBody: `"id" must have 1 to 255 characters`},
			{name: "NoType", body: []byte(`{"id":"evt_1"}`), wantStatus: 400, wantBody: `no "type" field`},
			{name: "NullType", body: []byte(`{"id":"evt_1","type":null}`), wantStatus: 400, wantBody: `"type" must have 1 to 255`},
			{name: "NULInID", body: []byte(`{"id":"evt_\u0000","type":"x"}`), wantStatus: 400, wantBody: `"id" has unprintable characters`},
			{name: "Oversized", body: []byte(`{"id":"evt_1","type":"x","pad":"` + strings.Repeat("a", 1024) + `"}`), wantStatus: 413, wantBody: "larger than the limit"},
		}
		// Registered before the parallel subtests, so it runs after all of them.
		t.Cleanup(func() {
			if n := stored(t, bundle.pool); n != 0 {
				t.Errorf("rows stored: got %d, want 0", n)
			}
		})
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				sig := tt.sig
				if sig == "" && tt.name != "NoHeader" {
					sig, _ = signed(tt.body)
				}
				got := post(t, srv, tt.body, sig)
				if got.status != tt.wantStatus || !strings.Contains(got.body, tt.wantBody) {
					t.Errorf("got %d %q, want %d containing %q", got.status, got.body, tt.wantStatus, tt.wantBody)
				}
			})
		}
	})

	t.Run("OtherMethodsAre405WithAllow", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, withoutServer())
		srv := newServer(t, bundle.store, worker.Discard, 1<<20)
		for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			req, _ := http.NewRequest(method, srv.URL+"/webhooks/stripe", nil)
			got := do(t, req)
			if got.status != http.StatusMethodNotAllowed || !strings.Contains(got.header.Get("Allow"), "POST") {
				t.Errorf("%s: got %d, Allow %q; want 405 allowing POST", method, got.status, got.header.Get("Allow"))
			}
		}
	})

	t.Run("NoSecretConfiguredIs503", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, withoutServer())
		receiver := receiver.New(bundle.store, discardLogger, receiver.Config{})
		srv := httptest.NewServer(web.NewServer(web.Options{Logger: discardLogger, Stores: web.Stores{Queue: bundle.store},
			Receiver: receiver, Gatherer: prometheus.NewRegistry()}))
		t.Cleanup(srv.Close)
		body := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
		if got := post(t, srv, body, stripeevent.Sign(body, testSecret, time.Now())); got.status != 503 {
			t.Errorf("got %d %q, want 503", got.status, got.body)
		}
		if n := stored(t, bundle.pool); n != 0 {
			t.Errorf("rows stored: got %d, want 0", n)
		}
	})

	t.Run("DatabaseGoingAwayMidRequestIs503ThenRedeliverySucceeds", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, withoutServer())
		u, _ := url.Parse(bundle.dbURL)
		dbName := strings.TrimPrefix(u.Path, "/")
		admin, err := pgx.Connect(t.Context(), queuetest.ServerURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.Close(context.Background()) })
		setAllowed := func(allowed bool) {
			t.Helper()
			if _, err := admin.Exec(context.Background(),
				fmt.Sprintf(`ALTER DATABASE %s ALLOW_CONNECTIONS %t`, dbName, allowed)); err != nil {
				t.Fatalf("allow connections %t: %v", allowed, err)
			}
		}

		var runs atomic.Int64
		// The first run takes the database away while the event is being
		// processed, before its marker can be written.
		p := worker.ProcessorFunc(func(ctx context.Context, _ worker.Delivery) worker.Result {
			if runs.Add(1) == 1 {
				setAllowed(false)
				if _, err := admin.Exec(ctx,
					`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, dbName); err != nil {
					t.Errorf("terminate backends: %v", err)
				}
			}
			return worker.Result{}
		})
		srv := newServer(t, bundle.store, p, 1<<20)
		body := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")

		if got := post(t, srv, body, stripeevent.Sign(body, testSecret, time.Now())); got.status != 503 {
			t.Fatalf("delivery while the database goes away: got %d %q, want 503", got.status, got.body)
		}
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/readyz", nil)
		if got := do(t, req); got.status != 503 {
			t.Errorf("readyz without database: got %d, want 503", got.status)
		}
		if got := post(t, srv, body, stripeevent.Sign(body, testSecret, time.Now())); got.status != 503 {
			t.Errorf("redelivery without database: got %d %q, want 503", got.status, got.body)
		}

		setAllowed(true)
		var last answer
		queuetest.WaitFor(t, 10*time.Second, "a redelivery to succeed", func() bool {
			last = post(t, srv, body, stripeevent.Sign(body, testSecret, time.Now()))
			if last.status != 200 && last.status != 503 {
				t.Fatalf("redelivery: got %d %q, want 200 or 503", last.status, last.body)
			}
			return last.status == 200
		})
		// The first run's outcome is written once the database is back,
		// so the redelivery finds the marker instead of running it again.
		if last.body != "duplicate\n" || runs.Load() != 1 {
			t.Errorf("redelivery: got %q after %d runs, want duplicate after 1", last.body, runs.Load())
		}
		if got := queuetest.Markers(t, bundle.pool); got != 1 {
			t.Errorf("markers: got %d, want 1", got)
		}
		req, _ = http.NewRequest(http.MethodGet, srv.URL+"/readyz", nil)
		if got := do(t, req); got.status != 200 {
			t.Errorf("readyz with database back: got %d, want 200", got.status)
		}
	})

	t.Run("MetricsExposeOutcomesAndQueueDepth", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, withoutServer())
		queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: queue.MaxAttempts})
		srv := newServer(t, bundle.store, worker.Discard, 1<<20)
		body := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
		post(t, srv, body, stripeevent.Sign(body, testSecret, time.Now()))
		post(t, srv, body, "")
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		got := do(t, req)
		for _, want := range []string{
			`hookd_webhooks_received_total{outcome="processed"} 1`,
			`hookd_webhooks_received_total{outcome="bad_signature"} 1`,
			`hookd_queue_events{status="dead"} 1`,
			`hookd_processing_duration_seconds_count{path="inline",result="succeeded"} 1`,
			`hookd_destination_queue_events{destination="default",status="dead"} 1`,
		} {
			if !strings.Contains(got.body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	})

	// The one app's calls are the destination default's too.
	t.Run("MetricsCountTheOneAppAsDestinationDefault", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, withoutServer())
		app := worker.ProcessorFunc(func(context.Context, worker.Delivery) worker.Result { return worker.Result{} })
		srv := newServer(t, bundle.store, app, 1<<20)
		body := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
		post(t, srv, body, stripeevent.Sign(body, testSecret, time.Now()))
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		got := do(t, req)
		for _, want := range []string{
			`hookd_processing_duration_seconds_count{path="inline",result="succeeded"} 1`,
			`hookd_destination_processing_duration_seconds_count{destination="default",path="inline",result="succeeded"} 1`,
		} {
			if !strings.Contains(got.body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	})
}
