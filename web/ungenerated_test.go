package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/ungenerated"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/internal/stripehealth"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web"
	"github.com/hookd/hookd/worker"
)

// An event-generation-failure notice is Stripe telling hookd about Stripe:
// answered 200 once kept, never handed to the app, however often Stripe
// delivers it, and listed on /failures.
func TestFailures_ListsTheEventsStripeCouldNotGenerate(t *testing.T) {
	t.Parallel()
	bundle := setup(t, withoutServer())
	var appCalls atomic.Int64
	app := worker.ProcessorFunc(func(context.Context, worker.Delivery) worker.Result {
		appCalls.Add(1)
		return worker.Result{}
	})
	rcv := receiver.New(bundle.store, discardLogger, receiver.Config{Secrets: []string{testSecret},
		Processor: stripehealth.Processor(app, ungenerated.New(bundle.pool))})
	stores := storesOn(bundle.store, bundle.pool)
	srv := httptest.NewServer(web.NewServer(web.Options{Logger: discardLogger, Stores: stores, Receiver: rcv,
		Sessions: pgxstore.NewWithCleanupInterval(bundle.pool, 0), Gatherer: prometheus.NewRegistry()}))
	t.Cleanup(srv.Close)
	bundle.srv = srv
	b := bundle

	id := stripeevent.NewID("evt")
	notice := stripeevent.GenerationFailure(id)
	for range 2 {
		if a := post(t, srv, notice, stripeevent.Sign(notice, testSecret, time.Now())); a.status != http.StatusOK {
			t.Fatalf("notice answered %d %q, want 200", a.status, a.body)
		}
	}
	invoice, _ := stripeevent.SampleThin("invoice.paid", "", time.Now())
	if a := post(t, srv, invoice, stripeevent.Sign(invoice, testSecret, time.Now())); a.status != http.StatusOK {
		t.Fatalf("thin event answered %d %q", a.status, a.body)
	}
	if n := appCalls.Load(); n != 1 {
		t.Errorf("the app got %d events, want 1: the thin invoice event, never the notice", n)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM stripe_generation_failures`); n != 1 {
		t.Errorf("%d notices kept, want 1", n)
	}

	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	r := c.get("/failures")
	wantStatus(t, r, http.StatusOK)
	section := r.doc.Find(`[data-testid="ungenerated"]`)
	if !strings.Contains(section.Find("h2").Text(), "Stripe could not generate these events") {
		t.Errorf("/failures lacks the section of the events Stripe could not generate:\n%s", r.body)
	}
	rows := section.Find(`[data-testid="ungenerated-event"]`)
	if rows.Length() != 1 || !strings.Contains(rows.Text(), id) {
		t.Errorf("rows %q, want the one notice %s", rows.Text(), id)
	}
}
