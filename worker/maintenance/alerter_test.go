package maintenance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/e2e/e2etest"
	"github.com/hookd/hookd/internal/store/activity"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker/maintenance"
)

// incomingWebhook is a fake Slack incoming webhook: it takes
// {"text": "..."} posted as application/json and answers "ok", or fails
// the first failFirst posts with 503.
type incomingWebhook struct {
	t   *testing.T
	srv *httptest.Server

	mu        sync.Mutex
	failFirst int
	arrived   int // requests, counted before any hang
	posts     int
	texts     []string
	// hang, when set, is waited on before any answer.
	hang chan struct{}
}

func newIncomingWebhook(t *testing.T) *incomingWebhook {
	w := &incomingWebhook{t: t}
	w.srv = httptest.NewServer(http.HandlerFunc(w.serveHTTP))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *incomingWebhook) serveHTTP(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	hang := w.hang
	w.arrived++
	w.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-r.Context().Done():
			return
		}
	}
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
		w.t.Errorf("got %s with Content-Type %q, want a POST of application/json", r.Method, r.Header.Get("Content-Type"))
		http.Error(rw, "invalid_payload", http.StatusBadRequest)
		return
	}
	var msg struct {
		Text string `json:"text"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &msg); err != nil || msg.Text == "" {
		w.t.Errorf("body %q: want {\"text\": \"...\"}", body)
		http.Error(rw, "invalid_payload", http.StatusBadRequest)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.posts++
	if w.posts <= w.failFirst {
		http.Error(rw, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	w.texts = append(w.texts, msg.Text)
	io.WriteString(rw, "ok")
}

func (w *incomingWebhook) received() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.texts...)
}

// waitTexts waits until the webhook has received n alerts and returns them.
func (w *incomingWebhook) waitTexts(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(w.received()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %d alerts; got %q", n, w.received())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return w.received()
}

// runAlerter runs an Alerter until the test ends or the returned stop is
// called, which waits for Run to return.
func runAlerter(t *testing.T, a *maintenance.Alerter) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("alerter: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func alerterConfig(url string) maintenance.AlerterConfig {
	return maintenance.AlerterConfig{
		URL: url, PublicURL: "https://hooks.example.com/", PendingAge: time.Hour,
		// Checks are made by the tests, not by the clock.
		Interval: time.Hour, DeadQuiet: time.Hour, RetryBackoff: time.Millisecond,
	}
}

func check(t *testing.T, a *maintenance.Alerter) {
	t.Helper()
	if err := a.Check(t.Context()); err != nil {
		t.Fatalf("check: %v", err)
	}
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func wantContains(t *testing.T, text string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(text, p) {
			t.Errorf("alert %q does not contain %q", text, p)
		}
	}
}

// startEveryCondition makes all four conditions hold.
func startEveryCondition(t *testing.T, store *queue.Store, pool *pgxpool.Pool) {
	t.Helper()
	queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_old_pending", Status: queue.StatusRetrying,
		Attempts: 2, Age: 2 * time.Hour, DueIn: time.Hour})
	queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_dead_1", EventType: "invoice.paid", Status: queue.StatusDead, Attempts: 5})
	queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_dead_2", EventType: "invoice.paid", Status: queue.StatusDead, Attempts: 5})
	queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_dead_3", EventType: "charge.refunded", Status: queue.StatusDead, Attempts: 5})
	if err := store.RecordRetrierTick(t.Context()); err != nil {
		t.Fatal(err)
	}
	exec(t, pool, `UPDATE worker_status SET last_run_at = now() - interval '10 minutes' WHERE component = 'retrier'`)
	if err := activity.New(pool).Add(t.Context(), "replica-a", activity.Counts{Received: 25, Rejected: 25, BadSignature: 25}); err != nil {
		t.Fatal(err)
	}
}

// clearEveryCondition makes all four conditions stop holding.
func clearEveryCondition(t *testing.T, store *queue.Store, pool *pgxpool.Pool) {
	t.Helper()
	exec(t, pool, `DELETE FROM webhook_events WHERE event_id = 'evt_old_pending'`)
	exec(t, pool, `DELETE FROM activity_minutes`)
	// The last death an hour and more ago: past DeadQuiet.
	exec(t, pool, `UPDATE alert_conditions SET last_seen_at = now() - interval '61 minutes' WHERE condition = 'dead' AND active`)
	if err := store.RecordRetrierTick(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestAlerter(t *testing.T) {
	t.Parallel()

	t.Run("EachConditionAlertsOnceWhenItStartsAndOnceWhenItClears", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		hook := newIncomingWebhook(t)
		a := maintenance.NewAlerter(bundle.store, discardLogger, alerterConfig(hook.srv.URL))
		startEveryCondition(t, bundle.store, bundle.pool)
		// Run checks at once. Once its alerts are out, its check is over and
		// only the test's own checks follow.
		runAlerter(t, a)
		texts := hook.waitTexts(t, 4)
		if len(texts) != 4 {
			t.Fatalf("got %d alerts, want 4: %q", len(texts), texts)
		}
		// Conditions are checked in the order of their names.
		wantContains(t, texts[0], "3 events went dead", "invoice.paid ×2, charge.refunded ×1",
			"evt_dead_1, evt_dead_2, evt_dead_3", "https://hooks.example.com/events?status=dead")
		wantContains(t, texts[1], "evt_old_pending", "2 h", "HOOKD_ALERT_PENDING_AGE", "1 event is pending",
			"https://hooks.example.com/events?status=pending")
		wantContains(t, texts[2], "retry loop is stalled", "10 min ago")
		wantContains(t, texts[3], "25 deliveries failed the Stripe signature check", "is STRIPE_WEBHOOK_SECRET right?",
			"https://hooks.example.com/rejections")

		// Still holding: nothing new. A further death is counted, not sent.
		queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_dead_4", Status: queue.StatusDead, Attempts: 5})
		check(t, a)
		check(t, a)

		clearEveryCondition(t, bundle.store, bundle.pool)
		check(t, a)
		texts = hook.waitTexts(t, 8)
		if len(texts) != 8 {
			t.Fatalf("got %d alerts, want 8: %q", len(texts), texts[4:])
		}
		wantContains(t, texts[4], "cleared", "no event has gone dead for 1 h", "4 events went dead since", "4 events are dead now")
		wantContains(t, texts[5], "cleared", "no pending event is older than 1 h")
		wantContains(t, texts[6], "cleared", "retry loop is running again")
		wantContains(t, texts[7], "cleared", "signature failures are down to 0")

		check(t, a)
		if got := len(hook.received()); got != 8 {
			t.Errorf("a check with nothing changed sent alerts: %d in all, want 8", got)
		}
	})

	t.Run("TwoReplicasRacingAnnounceEachChangeOnce", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		// A second replica: its own pool on the same database.
		pool2, err := pgxpool.NewWithConfig(t.Context(), bundle.pool.Config())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool2.Close)
		hook := newIncomingWebhook(t)
		replicas := []*maintenance.Alerter{
			maintenance.NewAlerter(bundle.store, discardLogger, alerterConfig(hook.srv.URL)),
			maintenance.NewAlerter(queue.New(pool2), discardLogger, alerterConfig(hook.srv.URL)),
		}
		startEveryCondition(t, bundle.store, bundle.pool)
		// Each replica checks as it starts, racing the other and the
		// checks below.
		stops := []func(){runAlerter(t, replicas[0]), runAlerter(t, replicas[1])}

		race := func() {
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range 16 {
				wg.Go(func() {
					<-start
					if err := replicas[i%2].Check(context.Background()); err != nil {
						t.Errorf("check: %v", err)
					}
				})
			}
			close(start)
			wg.Wait()
		}
		race()
		hook.waitTexts(t, 4)
		clearEveryCondition(t, bundle.store, bundle.pool)
		race()
		hook.waitTexts(t, 8)
		// Stopping sends whatever is still queued, so nothing more can come.
		for _, stop := range stops {
			stop()
		}
		texts := hook.received()
		if len(texts) != 8 {
			t.Fatalf("got %d alerts, want 8 (each condition started and cleared once): %q", len(texts), texts)
		}
		cleared := 0
		for _, text := range texts {
			if strings.Contains(text, "cleared") {
				cleared++
			}
		}
		if cleared != 4 {
			t.Errorf("got %d clears, want 4: %q", cleared, texts)
		}
	})

	t.Run("AFailingEndpointIsRetriedWithBackoffAndLogged", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		hook := newIncomingWebhook(t)
		hook.failFirst = 3
		var log e2etest.SyncBuffer
		cfg := alerterConfig(hook.srv.URL)
		cfg.PublicURL = "" // links are then paths
		a := maintenance.NewAlerter(bundle.store, slog.New(slog.NewTextHandler(&log, nil)), cfg)
		queuetest.InsertEvent(t, bundle.pool, queuetest.EventOpts{EventID: "evt_dead_down", Status: queue.StatusDead, Attempts: 5})
		runAlerter(t, a)
		texts := hook.waitTexts(t, 1)
		wantContains(t, texts[0], "1 event went dead", "evt_dead_down", " /events?status=dead")
		hook.mu.Lock()
		posts := hook.posts
		hook.mu.Unlock()
		if posts != 4 {
			t.Errorf("the endpoint saw %d posts, want 3 failures and the one that worked", posts)
		}
		if n := strings.Count(log.String(), "cannot send alert; retrying"); n != 3 {
			t.Errorf("logged %d failed sends, want 3:\n%s", n, log.String())
		}
		if strings.Contains(log.String(), hook.srv.URL) {
			t.Errorf("the log shows HOOKD_ALERT_URL, a secret:\n%s", log.String())
		}
	})

	t.Run("AHangingEndpointNeverHoldsUpChecks", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		hook := newIncomingWebhook(t)
		hook.hang = make(chan struct{})
		cfg := alerterConfig(hook.srv.URL)
		cfg.QueueSize = 1
		a := maintenance.NewAlerter(bundle.store, discardLogger, cfg)
		startEveryCondition(t, bundle.store, bundle.pool)
		runAlerter(t, a)
		// Run's first check is over once its first alert reaches the
		// endpoint, which holds it.
		queuetest.WaitFor(t, 10*time.Second, "the first alert to reach the endpoint", func() bool {
			hook.mu.Lock()
			defer hook.mu.Unlock()
			return hook.arrived > 0
		})
		// The endpoint answers nothing while the conditions clear, start
		// and clear again: twelve more alerts for a queue of one. Every
		// check still returns.
		for i := range 2 {
			if i > 0 {
				startEveryCondition(t, bundle.store, bundle.pool)
				check(t, a)
			}
			clearEveryCondition(t, bundle.store, bundle.pool)
			exec(t, bundle.pool, `DELETE FROM webhook_events`)
			check(t, a)
		}
		states := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM alert_conditions WHERE active`)
		if states != 0 {
			t.Errorf("%d conditions still active after clearing, want 0", states)
		}
		close(hook.hang)
		// The alert being sent when the endpoint hung and the one queued
		// behind it arrive; the others were dropped, and logged.
		hook.waitTexts(t, 2)
	})
}

// TestAlerter_CircuitBreaker: the breaker's opening is alerted once, with
// the failure that opened it, and its closing once.
func TestAlerter_CircuitBreaker(t *testing.T) {
	t.Parallel()
	bundle := setup(t)
	hook := newIncomingWebhook(t)
	cfg := alerterConfig(hook.srv.URL)
	cfg.BreakerFailures = 7
	a := maintenance.NewAlerter(bundle.store, discardLogger, cfg)
	exec(t, bundle.pool, `UPDATE delivery_control SET breaker_failures = 7, breaker_opened_at = now(),
		breaker_error = 'no answer from downstream: connection refused', probe_due_at = now() + interval '30 seconds'`)
	// Run checks at once and sends; the test's own checks follow.
	runAlerter(t, a)
	texts := hook.waitTexts(t, 1)
	check(t, a)
	wantContains(t, texts[0], "circuit breaker is open", "7 deliveries in a row", "connection refused",
		"no attempt spent", "https://hooks.example.com/")

	exec(t, bundle.pool, `UPDATE delivery_control SET breaker_failures = 0, breaker_opened_at = NULL, breaker_error = NULL, probe_due_at = NULL`)
	check(t, a)
	check(t, a)
	texts = hook.waitTexts(t, 2)
	if len(texts) != 2 {
		t.Fatalf("got %d alerts, want 2: %q", len(texts), texts)
	}
	wantContains(t, texts[1], "cleared", "circuit breaker closed")
}

// An alert of the caller's own (the emergency admin's sign-in) is posted
// as it is, outside the conditions, once.
func TestAlerter_Announce(t *testing.T) {
	t.Parallel()
	bundle := setup(t)
	hook := newIncomingWebhook(t)
	a := maintenance.NewAlerter(bundle.store, discardLogger, alerterConfig(hook.srv.URL))
	runAlerter(t, a)
	a.Announce(t.Context(), "The emergency admin break-glass@example.com signed in with a password")
	texts := hook.waitTexts(t, 1)
	if len(texts) != 1 || texts[0] != "The emergency admin break-glass@example.com signed in with a password" {
		t.Errorf("alerts %q, want the announcement alone", texts)
	}
}

// With several destinations the dead and pending-age alerts name the
// destinations concerned, and link to their deliveries; the one app's
// alerts name none.
func TestAlerter_NamesTheDestinations(t *testing.T) {
	t.Parallel()
	bundle := setup(t)
	hook := newIncomingWebhook(t)
	a := maintenance.NewAlerter(bundle.store, discardLogger, alerterConfig(hook.srv.URL))
	pool := bundle.pool
	queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_old_billing", Destination: "billing",
		Status: queue.StatusRetrying, Attempts: 2, Age: 3 * time.Hour, DueIn: time.Hour})
	queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_old_crm", Destination: "crm",
		Status: queue.StatusFailed, Attempts: 1, Age: 2 * time.Hour, DueIn: time.Hour})
	queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_new_crm", Destination: "crm",
		Status: queue.StatusFailed, Attempts: 1, DueIn: time.Hour})
	queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: "evt_young", Destination: "analytics",
		Status: queue.StatusFailed, Attempts: 1, DueIn: time.Hour})
	for i, dest := range []string{"billing", "billing", "crm"} {
		queuetest.InsertEvent(t, pool, queuetest.EventOpts{EventID: fmt.Sprintf("evt_dead_%d", i), Destination: dest,
			Status: queue.StatusDead, Attempts: 5})
	}
	if err := bundle.store.RecordRetrierTick(t.Context()); err != nil {
		t.Fatal(err)
	}
	runAlerter(t, a)
	texts := hook.waitTexts(t, 2)
	if len(texts) != 2 {
		t.Fatalf("got %d alerts, want 2: %q", len(texts), texts)
	}
	wantContains(t, texts[0], "3 events went dead", "Destinations: billing ×2, crm ×1.",
		"https://hooks.example.com/events?status=dead")
	wantContains(t, texts[1], "evt_old_billing (invoice.paid, to billing)", "4 events are pending",
		"Behind: billing (1 pending, oldest 3 h), crm (2 pending, oldest 2 h).")
	if strings.Contains(texts[1], "analytics") {
		t.Errorf("the pending-age alert names analytics, whose one pending delivery is young: %q", texts[1])
	}

	// One destination concerned: the alerts link to its deliveries.
	hook2 := newIncomingWebhook(t)
	other := setup(t)
	queuetest.InsertEvent(t, other.pool, queuetest.EventOpts{EventID: "evt_dead_crm", Destination: "crm",
		Status: queue.StatusDead, Attempts: 5})
	if err := other.store.RecordRetrierTick(t.Context()); err != nil {
		t.Fatal(err)
	}
	runAlerter(t, maintenance.NewAlerter(other.store, discardLogger, alerterConfig(hook2.srv.URL)))
	texts = hook2.waitTexts(t, 1)
	wantContains(t, texts[0], "Destinations: crm ×1.", "https://hooks.example.com/events?destination=crm&status=dead")
}
