package web_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web"
	"github.com/hookd/hookd/worker"
)

// setupControlled serves the dashboard with a copy of delivery_control,
// as hookd serve does, and returns it with a second replica's copy over
// the same database, both kept fresh until the test ends.
func setupControlled(t *testing.T) (*testBundle, *worker.Control, *worker.Control) {
	t.Helper()
	bundle := setup(t, withoutServer())
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	mine, other := worker.NewControl(bundle.store, logger), worker.NewControl(queue.New(bundle.pool), logger)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	for _, c := range []*worker.Control{mine, other} {
		go func() { _ = c.Run(ctx); done <- struct{}{} }()
	}
	t.Cleanup(func() { cancel(); <-done; <-done })
	stores := storesOn(bundle.store, bundle.pool)
	srv := httptest.NewServer(web.NewServer(web.Options{Stores: stores, Gatherer: prometheus.NewRegistry(),
		Sessions: pgxstore.NewWithCleanupInterval(bundle.pool, 0), Control: mine, Pace: worker.NewPace(25)}))
	t.Cleanup(srv.Close)
	bundle.srv = srv
	return bundle, mine, other
}

func TestDelivery_PauseAndResume(t *testing.T) {
	t.Parallel()
	b, _, other := setupControlled(t)
	pages := []string{"/", "/events?status=dead", "/events?status=pending", "/failures", "/rejections", "/search", "/audit"}

	viewer := b.client(t)
	viewer.signIn(accounts.RoleViewer)
	if viewer.get("/").doc.Find(`form[action="/delivery/pause"]`).Length() != 0 {
		t.Error("a viewer is offered the pause form")
	}
	wantStatus(t, viewer.post("/delivery/pause", url.Values{"reason": {"curious"}}), http.StatusForbidden)

	op := b.client(t)
	op.signIn(accounts.RoleOperator)
	if op.get("/").doc.Find(`form[action="/delivery/pause"]`).Length() != 1 {
		t.Fatal("an operator is not offered the pause form")
	}
	r := op.post("/delivery/pause", url.Values{"reason": {"  "}})
	wantStatus(t, r, http.StatusBadRequest)
	if !strings.Contains(r.body, "Say why delivery is paused") {
		t.Errorf("a pause without a reason says %q", r.body)
	}

	page := op.follow(op.post("/delivery/pause", url.Values{"reason": {"app deploy #42"}}))
	if got := testid(page.doc, "flash"); !strings.Contains(got, "Delivery paused") {
		t.Errorf("flash %q after pausing", got)
	}
	for _, c := range []*client{op, viewer} {
		for _, path := range pages {
			r := c.get(path)
			wantStatus(t, r, http.StatusOK)
			if got := testid(r.doc, "paused-by"); got != "operator@example.com" {
				t.Errorf("%s: banner says paused by %q", path, got)
			}
			if got := testid(r.doc, "paused-reason"); got != "app deploy #42" {
				t.Errorf("%s: banner says why %q", path, got)
			}
		}
	}
	if viewer.get("/").doc.Find(`form[action="/delivery/resume"]`).Length() != 0 {
		t.Error("a viewer is offered the resume button")
	}
	if op.get("/").doc.Find(`form[action="/delivery/pause"]`).Length() != 0 {
		t.Error("the overview offers to pause delivery while it is paused")
	}
	e := lastAudit(t, b, audit.DeliveryPause)
	if e.Email != "operator@example.com" || e.Target != "app deploy #42" {
		t.Errorf("audit entry %+v", e)
	}
	// The other replica holds delivery at its next read of the row, every
	// worker.ControlRefresh (500 ms); polled, not timed, so a loaded
	// machine does not fail it.
	queuetest.WaitFor(t, 10*time.Second, "the other replica to hold delivery", other.Held)

	wantStatus(t, viewer.post("/delivery/resume", nil), http.StatusForbidden)
	page = op.follow(op.post("/delivery/resume", nil))
	if got := testid(page.doc, "delivery-banner"); got != "" {
		t.Errorf("banner %q after resuming", got)
	}
	if got := lastAudit(t, b, audit.DeliveryResume); got.Target != "pause" {
		t.Errorf("resume audited as %+v", got)
	}
	queuetest.WaitFor(t, 10*time.Second, "the other replica to resume delivery", func() bool { return !other.Held() })
}

// TestDelivery_BreakerBannerAndBacklog: the circuit breaker's banner says
// why and offers operators to resume at once; the overview's backlog says
// when it is through at the delivery rate.
func TestDelivery_BreakerBannerAndBacklog(t *testing.T) {
	t.Parallel()
	b, mine, _ := setupControlled(t)
	for range 100 {
		queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusFailed})
	}
	// Deferred while the breaker held delivery: no attempt yet.
	if _, err := b.pool.Exec(context.Background(), `UPDATE webhook_events SET last_attempt_at = NULL`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(context.Background(), `UPDATE delivery_control SET breaker_failures = 20, breaker_opened_at = now(),
		breaker_error = 'downstream answered 503', probe_due_at = now() + interval '30 seconds', probe_wait_seconds = 30`); err != nil {
		t.Fatal(err)
	}
	if err := mine.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	op := b.client(t)
	op.signIn(accounts.RoleOperator)
	r := op.get("/")
	banner := testid(r.doc, "delivery-banner")
	for _, want := range []string{"paused by the circuit breaker", "downstream answered 503", "probes the app with one event"} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner %q does not say %q", banner, want)
		}
	}
	if got := testid(r.doc, "backlog"); got != "100" {
		t.Errorf("backlog %q, want 100", got)
	}
	if r.doc.Find(`form[action="/delivery/pause"]`).Length() != 0 {
		t.Error("the overview offers to pause delivery while the breaker holds it")
	}
	// The 100 events were deferred while delivery was held: none had an
	// attempt, so none failed.
	if got := testid(r.doc, "count-failed"); got != "0" {
		t.Errorf("failed %q, want 0: no deferred event had an attempt", got)
	}
	if got := testid(r.doc, "count-deferred"); got != "100" {
		t.Errorf("waiting %q, want the 100 deferred events", got)
	}
	if got := testid(r.doc, "backlog-eta"); got != "through in about 4 s at 25 a second" {
		t.Errorf("backlog note %q", got)
	}
	op.follow(op.post("/delivery/resume", nil))
	if got := lastAudit(t, b, audit.DeliveryResume); got.Target != "circuit breaker" {
		t.Errorf("resume audited as %+v", got)
	}
	var open bool
	if err := b.pool.QueryRow(context.Background(), `SELECT breaker_opened_at IS NOT NULL FROM delivery_control`).Scan(&open); err != nil || open {
		t.Errorf("breaker open %v after resume (%v)", open, err)
	}
}

// TestDelivery_BannerOnErrorPages: an error page shown to a signed-in
// account carries the banner of a pause like every other page; one shown
// without a session says nothing about delivery.
func TestDelivery_BannerOnErrorPages(t *testing.T) {
	t.Parallel()
	b, _, _ := setupControlled(t)
	op := b.client(t)
	op.signIn(accounts.RoleOperator)
	op.follow(op.post("/delivery/pause", url.Values{"reason": {"app deploy #42"}}))

	r := op.get("/events/" + uuid.NewString())
	wantStatus(t, r, http.StatusNotFound)
	if got := testid(r.doc, "paused-by"); got != "operator@example.com" {
		t.Errorf("404 while paused: banner says paused by %q", got)
	}
	if got := testid(r.doc, "paused-reason"); got != "app deploy #42" {
		t.Errorf("404 while paused: banner says why %q", got)
	}
	if r.doc.Find(`[data-testid="delivery-banner"] form[action="/delivery/resume"]`).Length() != 1 {
		t.Error("404 while paused: the banner offers the operator no resume button")
	}

	anon := b.client(t)
	r = anon.get("/no-such-page")
	wantStatus(t, r, http.StatusNotFound)
	if got := testid(r.doc, "delivery-banner"); got != "" {
		t.Errorf("404 without a session shows the banner %q", got)
	}
}
