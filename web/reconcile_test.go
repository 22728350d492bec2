package web_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/internal/stripeapi/stripetest"
	"github.com/hookd/hookd/web"
	"github.com/hookd/hookd/worker"
	"github.com/hookd/hookd/worker/reconcile"
)

// reconcileBundle is a dashboard whose reconciler reads a fake Stripe API
// and hands recovered events to an app that counts them.
type reconcileBundle struct {
	*testBundle
	api *stripetest.Server

	mu      sync.Mutex
	got     map[string]int
	failing bool
}

func (rb *reconcileBundle) Process(_ context.Context, d worker.Delivery) worker.Result {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	rb.got[d.EventID]++
	if rb.failing {
		return worker.Result{Err: errors.New("app answered 503"), HTTPStatus: 503}
	}
	return worker.Result{HTTPStatus: 200}
}

func (rb *reconcileBundle) forwarded() int {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	n := 0
	for _, c := range rb.got {
		n += c
	}
	return n
}

// setupReconcile serves a dashboard that reconciles with a fake Stripe API
// whose endpoint receives invoice.paid; key is the API key hookd uses.
func setupReconcile(t *testing.T, key string) *reconcileBundle {
	t.Helper()
	return setupReconcileOf(t, key, false)
}

// setupReconcileOf is setupReconcile, with a Connect endpoint receiving
// invoice.paid too when connect is set.
func setupReconcileOf(t *testing.T, key string, connect bool) *reconcileBundle {
	t.Helper()
	rb := &reconcileBundle{api: stripetest.NewServer(t), got: map[string]int{}}
	ep := rb.api.AddEndpoint(stripetest.Endpoint{EnabledEvents: []string{"invoice.paid"}})
	eps := []endpoint.Endpoint{{Label: endpoint.DefaultLabel, Kind: endpoint.Snapshot, StripeID: ep.ID, Secrets: []string{"whsec_web"}}}
	if connect {
		cep := rb.api.AddEndpoint(stripetest.Endpoint{EnabledEvents: []string{"invoice.paid"}})
		eps = append(eps, endpoint.Endpoint{Label: "connect", Kind: endpoint.Snapshot, Connect: true, StripeID: cep.ID,
			Secrets: []string{"whsec_web_connect"}})
	}
	if key == "" {
		key = rb.api.Key()
	}
	bundle := setup(t, withoutServer())
	logger := slog.New(slog.DiscardHandler)
	receiver := receiver.New(bundle.store, logger, receiver.Config{Endpoints: eps, Processor: rb})
	r := reconcile.New(bundle.store, receiver, logger, reconcile.Config{
		Client:    stripeapi.New(stripeapi.Config{Key: key, URL: rb.api.URL, PagePause: -1, RateLimitWait: time.Millisecond}),
		Endpoints: eps,
	})
	stores := storesOn(bundle.store, bundle.pool)
	srv := httptest.NewServer(web.NewServer(web.Options{
		Logger: logger, Stores: stores, Receiver: receiver, Gatherer: prometheus.NewRegistry(),
		Sessions: pgxstore.NewWithCleanupInterval(bundle.pool, 0), Reconciler: r}))
	t.Cleanup(srv.Close)
	bundle.srv = srv
	rb.testBundle = bundle
	return rb
}

func (rb *reconcileBundle) tableCounts(t *testing.T) map[string]int64 {
	t.Helper()
	counts := map[string]int64{}
	for _, table := range []string{"processed_webhook_events", "webhook_events", "webhook_attempts", "reconcile_runs", "audit_log"} {
		var n int64
		if err := rb.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		counts[table] = n
	}
	return counts
}

func TestReconcile_PreviewThenRunIsAudited(t *testing.T) {
	t.Parallel()
	rb := setupReconcile(t, "")
	for i := range 3 {
		rb.api.AddEvent(stripetest.Event{Type: "invoice.paid", Created: time.Now().Add(-time.Duration(i+1) * time.Hour)})
	}
	rb.api.AddEvent(stripetest.Event{Type: "charge.refunded", Created: time.Now().Add(-time.Hour)})

	op := rb.client(t)
	op.signIn(accounts.RoleOperator)
	overview := op.get("/")
	if v, _ := overview.doc.Find(`input[name="hours"]`).Attr("value"); v != "72" {
		t.Errorf("hours field: got %q, want the configured window, 72", v)
	}
	if got := testid(overview.doc, "reconcile-last-run"); got != "never" {
		t.Errorf("last reconcile: got %q, want never", got)
	}

	before := rb.tableCounts(t)
	preview := op.post("/reconcile/preview", url.Values{"hours": {"24"}})
	wantStatus(t, preview, http.StatusOK)
	if got := testid(preview.doc, "reconcile-preview"); got != "Would recover 3 of 4 events" {
		t.Errorf("preview: got %q", got)
	}
	if after := rb.tableCounts(t); !maps.Equal(before, after) || rb.forwarded() != 0 {
		t.Errorf("the preview changed something: %v, then %v; %d forwarded", before, after, rb.forwarded())
	}

	form := preview.doc.Find(`form[action="/reconcile"]`)
	done := op.follow(op.post("/reconcile", formValues(form)))
	if flash := testid(done.doc, "flash"); !strings.Contains(flash, "recovered 3,") {
		t.Errorf("flash: got %q, want the run's summary", flash)
	}
	if rb.forwarded() != 3 {
		t.Errorf("forwarded %d events, want 3", rb.forwarded())
	}
	if got := testid(done.doc, "reconcile-recovered"); got != "recovered 3" {
		t.Errorf("overview: got %q, want recovered 3", got)
	}
	if got := testid(done.doc, "reconcile-last-run"); got != "just now" {
		t.Errorf("last reconcile: got %q, want just now", got)
	}
	e := lastAudit(t, rb.testBundle, audit.Reconcile)
	if e.Count != 3 || e.Email != "operator@example.com" || !strings.Contains(e.Target, "last 24 hours: examined 4, recovered 3") {
		t.Errorf("audit: got %+v", e)
	}
}

func TestReconcile_RefusesBadHoursAndReportsStripeErrors(t *testing.T) {
	t.Parallel()
	rb := setupReconcile(t, "rk_test_revoked_key_0000")
	op := rb.client(t)
	op.signIn(accounts.RoleOperator)
	op.get("/")
	for _, hours := range []string{"", "abc", "0", "721"} {
		r := op.post("/reconcile/preview", url.Values{"hours": {hours}})
		wantStatus(t, r, http.StatusUnprocessableEntity)
		if got := r.doc.Find("#hours-error").Text(); !strings.Contains(got, "from 1 to 720") {
			t.Errorf("hours %q: error %q", hours, got)
		}
	}
	before := rb.tableCounts(t)
	for _, path := range []string{"/reconcile/preview", "/reconcile"} {
		r := op.post(path, url.Values{"hours": {"24"}})
		wantStatus(t, r, http.StatusBadGateway)
		if got := r.doc.Find("#hours-error").Text(); !strings.Contains(got, "Nothing was changed: Stripe rejected STRIPE_API_KEY") {
			t.Errorf("%s: error %q", path, got)
		}
	}
	if after := rb.tableCounts(t); !maps.Equal(before, after) {
		t.Errorf("a failed run changed something: %v, then %v", before, after)
	}
}

func TestReconcile_OnlyForOperatorsAndOnlyWhenConfigured(t *testing.T) {
	t.Parallel()
	rb := setupReconcile(t, "")
	viewer := rb.client(t)
	viewer.signIn(accounts.RoleViewer)
	if viewer.get("/").doc.Find(`form[action="/reconcile/preview"]`).Length() != 0 {
		t.Error("a viewer sees the reconcile form")
	}
	for _, path := range []string{"/reconcile/preview", "/reconcile", "/events/pull"} {
		wantStatus(t, viewer.post(path, url.Values{"hours": {"24"}, "event_id": {"evt_1"}}), http.StatusForbidden)
	}

	off := setup(t)
	op := off.client(t)
	op.signIn(accounts.RoleOperator)
	if op.get("/").doc.Find(`form[action="/reconcile/preview"]`).Length() != 0 {
		t.Error("the reconcile form shows without a reconciler")
	}
	for _, path := range []string{"/reconcile/preview", "/reconcile", "/events/pull"} {
		r := op.post(path, url.Values{"hours": {"24"}, "event_id": {"evt_1"}})
		wantStatus(t, r, http.StatusNotFound)
		if !strings.Contains(r.body, "Reconciliation with Stripe is off: it needs STRIPE_API_KEY") {
			t.Errorf("POST %s without a reconciler does not say why: %q", path, r.doc.Find(`[role="alert"]`).Text())
		}
	}
}

func TestPull_FromTheSearchOfAnUnknownEvent(t *testing.T) {
	t.Parallel()
	rb := setupReconcile(t, "")
	id, _ := rb.api.AddEvent(stripetest.Event{Type: "invoice.paid"})
	op := rb.client(t)
	op.signIn(accounts.RoleOperator)

	searchURL := "/search?" + url.Values{"q": {id}}.Encode()
	search := op.get(searchURL)
	form := search.doc.Find(`form[action="/events/pull"]`)
	if form.Length() != 1 || !strings.Contains(form.Text(), "Pull from Stripe") {
		t.Fatalf("no Pull from Stripe button for an event never seen:\n%s", search.body)
	}
	r := op.post("/events/pull", formValues(form))
	if loc := r.header.Get("Location"); loc != searchURL {
		t.Errorf("redirect to %q, want back to %q", loc, searchURL)
	}
	done := op.follow(r)
	if flash := testid(done.doc, "flash"); flash != id+" pulled from Stripe and processed" {
		t.Errorf("flash: got %q", flash)
	}
	if how := testid(done.doc, "search-how"); !strings.Contains(how, "by reconciliation") {
		t.Errorf("search says it was processed %q, want by reconciliation", how)
	}
	if done.doc.Find(`form[action="/events/pull"]`).Length() != 0 {
		t.Error("the button still shows for a processed event")
	}
	if rb.forwarded() != 1 {
		t.Errorf("forwarded %d, want 1", rb.forwarded())
	}
	if e := lastAudit(t, rb.testBundle, audit.Pull); e.Target != id || e.Count != 1 {
		t.Errorf("audit: got %+v", e)
	}

	other, _ := rb.api.AddEvent(stripetest.Event{Type: "invoice.paid"})
	list := op.get("/events?" + url.Values{"status": {"dead"}, "q": {other}}.Encode())
	if list.doc.Find(`form[action="/events/pull"]`).Length() != 1 {
		t.Error("the dead list's search of an unknown id offers no Pull from Stripe")
	}

	r = op.post("/events/pull", url.Values{"event_id": {"in_123"}})
	wantStatus(t, r, http.StatusBadRequest)
	if !strings.Contains(r.body, "evt_") {
		t.Errorf("400 does not say why: %s", r.body)
	}
	missing := op.follow(op.post("/events/pull", url.Values{"event_id": {"evt_gone"}}))
	if flash := testid(missing.doc, "flash"); !strings.Contains(flash, "Nothing was pulled") || !strings.Contains(flash, "30 days") {
		t.Errorf("flash for an unknown event: got %q", flash)
	}
}

// With a Connect endpoint, the pull asks for the connected account an
// event may be of, and reads the event under it.
func TestPull_AConnectedAccountsEventFromTheSearch(t *testing.T) {
	t.Parallel()
	rb := setupReconcileOf(t, "", true)
	id, _ := rb.api.AddEvent(stripetest.Event{Type: "invoice.paid", Account: "acct_1Web"})
	op := rb.client(t)
	op.signIn(accounts.RoleOperator)

	searchURL := "/search?" + url.Values{"q": {id}}.Encode()
	form := op.get(searchURL).doc.Find(`form[action="/events/pull"]`)
	if form.Find(`input[name="account"]`).Length() != 1 {
		t.Fatalf("the pull form has no connected account field with a Connect endpoint")
	}
	// Pulled as the platform's own, Stripe has no such event.
	missing := op.follow(op.post("/events/pull", formValues(form)))
	if flash := testid(missing.doc, "flash"); !strings.Contains(flash, "Nothing was pulled") {
		t.Errorf("flash for the event pulled as the platform's own: got %q", flash)
	}
	values := formValues(form)
	values.Set("account", "acct_1Web")
	done := op.follow(op.post("/events/pull", values))
	if flash := testid(done.doc, "flash"); flash != id+" pulled from Stripe and processed" {
		t.Errorf("flash: got %q", flash)
	}
	if rb.forwarded() != 1 {
		t.Errorf("forwarded %d, want 1", rb.forwarded())
	}
	values.Set("account", "cus_123")
	r := op.post("/events/pull", values)
	wantStatus(t, r, http.StatusBadRequest)
	if !strings.Contains(r.body, "acct_") {
		t.Errorf("400 does not say why: %s", r.body)
	}

	// Without a Connect endpoint the form does not ask.
	plain := setupReconcile(t, "")
	other, _ := plain.api.AddEvent(stripetest.Event{Type: "invoice.paid"})
	c := plain.client(t)
	c.signIn(accounts.RoleOperator)
	if n := c.get("/search?q=" + other).doc.Find(`form[action="/events/pull"] input[name="account"]`).Length(); n != 0 {
		t.Errorf("the pull form asks for a connected account without a Connect endpoint")
	}
}

func TestPull_FailedEventIsQueuedAndSaysItWasRecovered(t *testing.T) {
	t.Parallel()
	rb := setupReconcile(t, "")
	rb.failing = true
	id, _ := rb.api.AddEvent(stripetest.Event{Type: "invoice.paid"})
	op := rb.client(t)
	op.signIn(accounts.RoleOperator)
	op.get("/search?q=" + id)
	r := op.post("/events/pull", url.Values{"event_id": {id}})
	if loc := r.header.Get("Location"); !strings.HasPrefix(loc, "/events/") || strings.Contains(loc, "?") {
		t.Fatalf("redirect to %q, want the event's detail page", loc)
	}
	detail := op.follow(r)
	if note := testid(detail.doc, "recovered-note"); !strings.Contains(note, "Recovered by reconciliation with Stripe") {
		t.Errorf("detail page: recovered note %q", note)
	}
	if got := detail.doc.Find(`[data-testid="attempt-row"]`).Text(); !strings.Contains(got, "Recovered from Stripe") {
		t.Errorf("attempt row: %q", got)
	}
}
