package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/store/reconcileruns"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/internal/stripeapi/stripetest"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
	"github.com/hookd/hookd/worker/reconcile"
)

const testSecret = "whsec_reconcile_test"

var discardLogger = slog.New(slog.DiscardHandler)

// app stands for the user's app: it records every event it is handed, and
// fails them while failing is set.
type app struct {
	mu      sync.Mutex
	got     map[string]int
	order   []string
	payload map[string]string
	failing bool
}

func newApp() *app { return &app{got: map[string]int{}, payload: map[string]string{}} }

func (a *app) Process(_ context.Context, d worker.Delivery) worker.Result {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got[d.EventID]++
	a.order = append(a.order, d.EventID)
	a.payload[d.EventID] = string(d.Payload)
	if a.failing {
		return worker.Result{Err: errors.New("app answered 500: down for maintenance"), HTTPStatus: 500}
	}
	return worker.Result{HTTPStatus: 200}
}

func (a *app) times(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.got[id]
}

func (a *app) total() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, c := range a.got {
		n += c
	}
	return n
}

type bundle struct {
	store    *queue.Store
	pool     *pgxpool.Pool
	api      *stripetest.Server
	endpoint stripetest.Endpoint
	app      *app
	receiver *receiver.Receiver
	r        *reconcile.Reconciler
	// key is the API key the reconcilers made from now on use.
	key string
}

// setup gives a test a database, a fake Stripe API with an endpoint
// receiving enabled (nil: every type), and a reconciler between them.
func setup(t *testing.T, enabled []string, cfg reconcile.Config) *bundle {
	t.Helper()
	store, pool := queuetest.NewStore(t)
	b := &bundle{store: store, pool: pool, api: stripetest.NewServer(t), app: newApp()}
	b.endpoint = b.api.AddEndpoint(stripetest.Endpoint{EnabledEvents: enabled})
	b.key = b.api.Key()
	b.receiver = receiver.New(store, discardLogger, receiver.Config{
		Secrets: []string{testSecret}, Processor: b.app})
	b.r = b.reconciler(store, cfg)
	return b
}

func (b *bundle) reconciler(store *queue.Store, cfg reconcile.Config) *reconcile.Reconciler {
	cfg.Client = stripeapi.New(stripeapi.Config{Key: b.key, URL: b.api.URL, PagePause: -1, RateLimitWait: time.Millisecond})
	cfg.Endpoints = []endpoint.Endpoint{{Label: endpoint.DefaultLabel, Kind: endpoint.Snapshot, StripeID: b.endpoint.ID}}
	return reconcile.New(store, receiver.New(store, discardLogger, receiver.Config{
		Secrets: []string{testSecret}, Processor: b.app}), discardLogger, cfg)
}

// addEvents adds n events of eventType created age ago (and one second
// apart going back), and returns their ids, newest first.
func (b *bundle) addEvents(n int, eventType string, age time.Duration) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i], _ = b.api.AddEvent(stripetest.Event{Type: eventType, Created: time.Now().Add(-age - time.Duration(i)*time.Second)})
	}
	return ids
}

// tableCounts counts the rows of every table, to show a run changed nothing.
func tableCounts(t *testing.T, pool *pgxpool.Pool) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	for _, name := range tables {
		var n int64
		if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %q`, name)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		counts[name] = n
	}
	return counts
}

func TestRunOnce(t *testing.T) {
	t.Parallel()

	t.Run("RecoversMissingEventsOnceAndSkipsTheRest", func(t *testing.T) {
		t.Parallel()
		b := setup(t, []string{"invoice.paid", "customer.created"}, reconcile.Config{Concurrency: 1})
		ctx := t.Context()

		processed := b.addEvents(3, "invoice.paid", time.Hour)
		for _, id := range processed {
			if err := queuetest.NewSeed(b.store).MarkProcessed(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		queuedID, _ := b.api.AddEvent(stripetest.Event{Type: "customer.created", Created: time.Now().Add(-2 * time.Hour)})
		queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: queuedID, EventType: "customer.created"})
		missing := append(b.addEvents(2, "invoice.paid", 3*time.Hour), b.addEvents(2, "customer.created", 4*time.Hour)...)
		otherType := b.addEvents(2, "charge.succeeded", time.Hour)
		young := b.addEvents(1, "invoice.paid", time.Minute)
		tooOld := b.addEvents(1, "invoice.paid", 100*time.Hour)

		res, err := b.r.RunOnce(ctx, reconcile.Options{Trigger: reconcileruns.TriggerCommand})
		if err != nil {
			t.Fatal(err)
		}
		want := reconcileruns.Counts{Examined: 11, AlreadyProcessed: 3, AlreadyQueued: 1, Recovered: 4,
			SkippedType: 2, SkippedYoung: 1}
		if res.Counts != want {
			t.Errorf("counts: got %+v, want %+v", res.Counts, want)
		}
		for _, id := range missing {
			if got := b.app.times(id); got != 1 {
				t.Errorf("%s reached the app %d times, want 1", id, got)
			}
		}
		for _, id := range append(append(append(processed, queuedID), otherType...), append(young, tooOld...)...) {
			if got := b.app.times(id); got != 0 {
				t.Errorf("%s reached the app %d times, want 0", id, got)
			}
		}
		// Oldest first: the two customer.created events are the oldest.
		wantOrder := []string{missing[3], missing[2], missing[1], missing[0]}
		if fmt.Sprint(b.app.order) != fmt.Sprint(wantOrder) {
			t.Errorf("order: got %v, want oldest first %v", b.app.order, wantOrder)
		}
		if got := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_attempts WHERE path = 'reconcile' AND outcome = 'succeeded'`); got != 4 {
			t.Errorf("reconcile attempts: got %d, want 4", got)
		}
		if got := queuetest.Count(t, b.pool, `SELECT count(*) FROM processed_webhook_events WHERE event_id = ANY($1)`, missing); got != 4 {
			t.Errorf("markers of the recovered events: got %d, want 4", got)
		}
		if got := queuetest.Count(t, b.pool, `SELECT count(*) FROM reconcile_runs WHERE trigger = 'command' AND recovered = 4 AND error IS NULL`); got != 1 {
			t.Errorf("recorded runs: got %d, want 1", got)
		}
		if want := "reconciled 72h: examined 11, already processed 3, already queued 1, recovered 4, queued 0, " +
			"in flight 0, skipped by type 2, skipped as too young 1"; res.Summary() != want {
			t.Errorf("summary:\n got %s\nwant %s", res.Summary(), want)
		}

		again, err := b.r.RunOnce(ctx, reconcile.Options{Trigger: reconcileruns.TriggerCommand})
		if err != nil {
			t.Fatal(err)
		}
		if again.Recovered != 0 || again.AlreadyProcessed != 7 {
			t.Errorf("second run: got %+v, want recovered 0 and already processed 7", again.Counts)
		}
		if got := b.app.total(); got != 4 {
			t.Errorf("events handed to the app over both runs: got %d, want 4", got)
		}
	})

	t.Run("ForwardsTheExactBytesOfTheAPI", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, reconcile.Config{})
		id, raw := b.api.AddEvent(stripetest.Event{Type: "invoice.payment_failed", APIVersion: "2024-06-20"})
		if _, err := b.r.RunOnce(t.Context(), reconcile.Options{}); err != nil {
			t.Fatal(err)
		}
		b.app.mu.Lock()
		got := b.app.payload[id]
		b.app.mu.Unlock()
		if got != string(raw) {
			t.Errorf("payload:\n got %s\nwant %s", got, raw)
		}
	})

	t.Run("PagesThroughEveryEventInTheWindow", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, reconcile.Config{})
		ids := b.addEvents(250, "invoice.paid", time.Hour)
		res, err := b.r.RunOnce(t.Context(), reconcile.Options{Window: 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if res.Examined != 250 || res.Recovered != 250 || res.Pages != 3 {
			t.Errorf("got examined %d, recovered %d over %d pages; want 250, 250 over 3", res.Examined, res.Recovered, res.Pages)
		}
		for _, id := range ids {
			if got := b.app.times(id); got != 1 {
				t.Fatalf("%s reached the app %d times, want 1", id, got)
			}
		}
		queries := b.api.ListQueries()
		if len(queries) != 3 {
			t.Fatalf("list requests: got %d, want 3", len(queries))
		}
		since := strconv.FormatInt(res.Since.Unix(), 10)
		for i, q := range queries {
			if q.Get("created[gte]") != since || q.Get("limit") != "100" {
				t.Errorf("request %d: got created[gte]=%s limit=%s, want %s and 100", i, q.Get("created[gte]"), q.Get("limit"), since)
			}
		}
		if got := queries[0].Get("starting_after"); got != "" {
			t.Errorf("first page: starting_after %q, want none", got)
		}
		if got := queries[1].Get("starting_after"); got != ids[99] {
			t.Errorf("second page: starting_after %q, want the first page's last event %s", got, ids[99])
		}
		if got := queries[2].Get("starting_after"); got != ids[199] {
			t.Errorf("third page: starting_after %q, want %s", got, ids[199])
		}
	})

	t.Run("FailedProcessingQueuesTheEvent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, reconcile.Config{})
		b.app.failing = true
		ids := b.addEvents(3, "invoice.paid", time.Hour)
		res, err := b.r.RunOnce(t.Context(), reconcile.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Queued != 3 || res.Recovered != 0 {
			t.Errorf("got %+v, want 3 queued", res.Counts)
		}
		if got := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_events WHERE event_id = ANY($1) AND status = 'failed' AND signature IS NULL`, ids); got != 3 {
			t.Errorf("queue rows: got %d, want 3", got)
		}
		if got := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_attempts WHERE path = 'reconcile' AND outcome = 'failed'`); got != 3 {
			t.Errorf("failed reconcile attempts: got %d, want 3", got)
		}
		again, err := b.r.RunOnce(t.Context(), reconcile.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if again.AlreadyQueued != 3 || again.Queued != 0 || b.app.total() != 3 {
			t.Errorf("second run: got %+v and %d app calls, want 3 already queued and 3 calls", again.Counts, b.app.total())
		}
	})

	t.Run("DryRunChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, []string{"invoice.paid"}, reconcile.Config{})
		b.addEvents(5, "invoice.paid", time.Hour)
		b.addEvents(2, "charge.refunded", time.Hour)
		done := b.addEvents(1, "invoice.paid", time.Hour)
		if err := queuetest.NewSeed(b.store).MarkProcessed(t.Context(), done[0]); err != nil {
			t.Fatal(err)
		}
		before := tableCounts(t, b.pool)
		res, err := b.r.RunOnce(t.Context(), reconcile.Options{DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if after := tableCounts(t, b.pool); !maps.Equal(before, after) {
			t.Errorf("table counts changed:\nbefore %v\n after %v", before, after)
		}
		if res.Recovered != 5 || res.Examined != 8 || res.AlreadyProcessed != 1 || b.app.total() != 0 {
			t.Errorf("got %+v and %d app calls; want would recover 5 of 8, 1 processed, no calls", res.Counts, b.app.total())
		}
		if want := "dry run over 72h: examined 8, already processed 1, already queued 0, would recover 5, " +
			"skipped by type 2, skipped as too young 0"; res.Summary() != want {
			t.Errorf("summary:\n got %s\nwant %s", res.Summary(), want)
		}
	})

	for _, tc := range []struct {
		name, want string
		status     int
		break_     func(b *bundle)
	}{
		{"UnauthorizedChangesNothing", "Stripe rejected STRIPE_API_KEY", 401, func(b *bundle) { b.key = "rk_test_another_key_entirely" }},
		{"MissingPermissionChangesNothing", "Read access to Events", 403, func(b *bundle) { b.api.Deny("/v1/events") }},
		{"WrongEndpointChangesNothing", "check STRIPE_WEBHOOK_ENDPOINT_ID", 404, func(b *bundle) { b.endpoint.ID = "we_notthere" }},
		// The list fails on its second page, after it found events to
		// recover on the first: the run still recovers, records and
		// says nothing.
		{"ErrorPartWayChangesNothing", "Read access to Events", 403, func(b *bundle) {
			b.addEvents(147, "invoice.paid", time.Hour)
			b.api.DenyAfter("/v1/events", 1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil, reconcile.Config{})
			b.addEvents(3, "invoice.paid", time.Hour)
			tc.break_(b)
			r := b.reconciler(b.store, reconcile.Config{})
			before := tableCounts(t, b.pool)
			_, err := r.RunOnce(t.Context(), reconcile.Options{Trigger: reconcileruns.TriggerCommand})
			var ae *stripeapi.APIError
			if !errors.As(err, &ae) || ae.Status != tc.status || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a %d saying %q", err, tc.status, tc.want)
			}
			if after := tableCounts(t, b.pool); !maps.Equal(before, after) {
				t.Errorf("table counts changed:\nbefore %v\n after %v", before, after)
			}
			if b.app.total() != 0 {
				t.Errorf("the app got %d events, want 0", b.app.total())
			}
		})
	}

	t.Run("RateLimitedThenCompletes", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, reconcile.Config{})
		ids := b.addEvents(150, "invoice.paid", time.Hour)
		b.api.RateLimitNext(2)                                        // Stripe's rate limiter: hookd backs off
		b.api.FailNext(1, http.StatusTooManyRequests, "lock_timeout", // stripe-go's own retry
			"This object cannot be accessed right now because another API request or Stripe process is currently accessing it.")
		res, err := b.r.RunOnce(t.Context(), reconcile.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Recovered != 150 {
			t.Errorf("recovered %d, want 150", res.Recovered)
		}
		for _, id := range ids {
			if got := b.app.times(id); got != 1 {
				t.Fatalf("%s reached the app %d times, want 1", id, got)
			}
		}
		if got := b.api.Requests("/v1/webhook_endpoints/" + b.endpoint.ID); got != 4 {
			t.Errorf("endpoint requests: got %d, want 4 (three refused, then answered)", got)
		}
	})

	t.Run("WindowLongerThanTheMarkersIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, reconcile.Config{MaxWindow: 96 * time.Hour})
		_, err := b.r.RunOnce(t.Context(), reconcile.Options{Window: 97 * time.Hour})
		if !errors.Is(err, reconcile.ErrWindowTooLong) {
			t.Errorf("got %v, want ErrWindowTooLong", err)
		}
	})
}

// TestRaceWithLiveDelivery: Stripe's own delivery of an event arrives while
// a reconcile run and pulls recover it; the app gets each event once.
func TestRaceWithLiveDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, reconcile.Config{Concurrency: 8})
	const events, deliveries = 20, 3
	ids := b.addEvents(events, "invoice.paid", 10*time.Minute)
	bodies := map[string][]byte{}
	for _, id := range ids {
		bodies[id] = stripeevent.Minimal(id, "invoice.paid")
	}

	start := make(chan struct{})
	var wg sync.WaitGroup
	var runErr error
	wg.Go(func() {
		<-start
		_, runErr = b.r.RunOnce(context.Background(), reconcile.Options{})
	})
	for _, id := range ids {
		for range deliveries {
			wg.Go(func() {
				<-start
				body := bodies[id]
				_, err := b.receiver.Receive(context.Background(), body, stripeevent.Sign(body, testSecret, time.Now()))
				if err != nil && !errors.Is(err, queue.ErrEventLocked) {
					t.Errorf("delivery of %s: %v", id, err)
				}
			})
		}
		wg.Go(func() {
			<-start
			if _, err := b.r.Pull(context.Background(), id, ""); err != nil && !errors.Is(err, queue.ErrEventLocked) {
				t.Errorf("pull of %s: %v", id, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if runErr != nil {
		t.Fatal(runErr)
	}
	for _, id := range ids {
		if got := b.app.times(id); got != 1 {
			t.Errorf("%s reached the app %d times, want 1", id, got)
		}
	}
	if got := queuetest.Markers(t, b.pool); got != events {
		t.Errorf("markers: got %d, want %d", got, events)
	}
}

// TestTwoReplicas: two replicas, each with its own pool, reconcile the same
// window at once, by hand and on their schedules; each event reaches the
// app once and the schedule runs once.
func TestTwoReplicas(t *testing.T) {
	t.Parallel()

	newReplica := func(t *testing.T, url string) *queue.Store {
		pool, err := pgxpool.New(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return queue.New(pool)
	}

	t.Run("RunningAtOnceRecoverEachEventOnce", func(t *testing.T) {
		t.Parallel()
		url := queuetest.NewDatabaseURL(t)
		b := setup(t, nil, reconcile.Config{})
		ids := b.addEvents(120, "invoice.paid", time.Hour)
		replicas := []*reconcile.Reconciler{
			b.reconciler(newReplica(t, url), reconcile.Config{}),
			b.reconciler(newReplica(t, url), reconcile.Config{}),
		}
		start := make(chan struct{})
		results := make([]reconcile.Result, len(replicas))
		errs := make([]error, len(replicas))
		var wg sync.WaitGroup
		for i, r := range replicas {
			wg.Go(func() {
				<-start
				results[i], errs[i] = r.RunOnce(context.Background(), reconcile.Options{Trigger: reconcileruns.TriggerCommand})
			})
		}
		close(start)
		wg.Wait()
		var recovered int64
		for i, err := range errs {
			if err != nil && !errors.Is(err, reconcileruns.ErrRunning) {
				t.Fatalf("replica %d: %v", i, err)
			}
			recovered += results[i].Recovered
		}
		if recovered != 120 {
			t.Errorf("recovered by both: got %d, want 120", recovered)
		}
		for _, id := range ids {
			if got := b.app.times(id); got != 1 {
				t.Fatalf("%s reached the app %d times, want 1", id, got)
			}
		}
	})

	t.Run("SchedulesRunOncePerInterval", func(t *testing.T) {
		t.Parallel()
		url := queuetest.NewDatabaseURL(t)
		b := setup(t, nil, reconcile.Config{})
		ids := b.addEvents(30, "invoice.paid", time.Hour)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range 2 {
			store := newReplica(t, url)
			r := b.reconciler(store, reconcile.Config{Interval: time.Hour})
			wg.Go(func() {
				if err := r.Run(ctx); err != nil {
					t.Errorf("Run: %v", err)
				}
			})
		}
		check, err := pgxpool.New(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer check.Close()
		queuetest.WaitFor(t, 10*time.Second, "a scheduled run", func() bool {
			return queuetest.Count(t, check, `SELECT count(*) FROM reconcile_runs`) > 0
		})
		cancel()
		wg.Wait()
		if got := queuetest.Count(t, check, `SELECT count(*) FROM reconcile_runs WHERE trigger = 'schedule' AND recovered = 30`); got != 1 {
			t.Errorf("scheduled runs: got %d, want 1", got)
		}
		for _, id := range ids {
			if got := b.app.times(id); got != 1 {
				t.Fatalf("%s reached the app %d times, want 1", id, got)
			}
		}
	})
}

func TestScheduledFailureIsRecorded(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, reconcile.Config{})
	b.key = "rk_test_rolled_key_not_hookds"
	r := b.reconciler(b.store, reconcile.Config{Interval: time.Hour})
	_, err := r.RunOnce(t.Context(), reconcile.Options{Trigger: reconcileruns.TriggerSchedule})
	if err == nil {
		t.Fatal("got no error, want Stripe's 401")
	}
	last, err := reconcileruns.New(b.store.DB()).Last(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if last.Error == nil || !strings.Contains(*last.Error, "401") {
		t.Errorf("recorded error: got %v, want the 401", last.Error)
	}
}

func TestPull(t *testing.T) {
	t.Parallel()

	t.Run("RecoversOneEvent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, reconcile.Config{})
		id, _ := b.api.AddEvent(stripetest.Event{Created: time.Now().Add(-time.Minute)}) // a pull ignores age
		p, err := b.r.Pull(t.Context(), id, "")
		if err != nil || p.Outcome != receiver.Processed {
			t.Fatalf("got %v, %v; want processed", p.Outcome, err)
		}
		if p, err = b.r.Pull(t.Context(), id, ""); err != nil || p.Outcome != receiver.Duplicate {
			t.Fatalf("second pull: got %v, %v; want duplicate", p.Outcome, err)
		}
		if b.app.times(id) != 1 {
			t.Errorf("app calls: got %d, want 1", b.app.times(id))
		}
		if got := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_attempts WHERE event_id = $1 AND path = 'reconcile'`, id); got != 1 {
			t.Errorf("reconcile attempts: got %d, want 1", got)
		}
	})

	t.Run("UnknownEventSaysSo", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, reconcile.Config{})
		_, err := b.r.Pull(t.Context(), "evt_nothere", "")
		if !errors.Is(err, stripeapi.ErrNotFound) || !strings.Contains(err.Error(), "30 days") {
			t.Errorf("got %v, want ErrNotFound mentioning the 30 days", err)
		}
	})

	t.Run("TypeTheEndpointDoesNotReceiveIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, []string{"invoice.paid"}, reconcile.Config{})
		id, _ := b.api.AddEvent(stripetest.Event{Type: "charge.succeeded"})
		if _, err := b.r.Pull(t.Context(), id, ""); !errors.Is(err, reconcile.ErrNotReceived) {
			t.Errorf("got %v, want ErrNotReceived", err)
		}
		if b.app.total() != 0 {
			t.Errorf("app calls: got %d, want 0", b.app.total())
		}
	})
}
