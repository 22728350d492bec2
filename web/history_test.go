package web_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/alexedwards/scs/pgxstore"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web"
	"github.com/hookd/hookd/worker"
)

// failSuffix marks the events failingApp fails.
const failSuffix = "_fails"

// failingApp processes every event but those whose id ends in failSuffix.
type failingApp struct{}

func (failingApp) Process(_ context.Context, d worker.Delivery) worker.Result {
	if strings.HasSuffix(d.EventID, failSuffix) {
		return worker.Result{Err: errors.New("downstream answered 500"), HTTPStatus: 500}
	}
	return worker.Result{}
}

// setupHistory serves the receiver and the dashboard on one database.
func setupHistory(t *testing.T) *testBundle {
	t.Helper()
	store, pool := queuetest.NewStore(t)
	stores := storesOn(store, pool)
	rcv := receiver.New(store, discardLogger, receiver.Config{Secrets: []string{testSecret}, Processor: failingApp{}})
	srv := httptest.NewServer(web.NewServer(web.Options{Logger: discardLogger, Stores: stores, Receiver: rcv,
		Gatherer: prometheus.NewRegistry(), MaxBody: 1 << 20, Sessions: pgxstore.NewWithCleanupInterval(pool, 0)}))
	t.Cleanup(srv.Close)
	return &testBundle{srv: srv, store: store, accounts: stores.Accounts, audit: stores.Audit, pool: pool}
}

// invoiceEvent is a signed-ready event about invoice in_Web1 of customer
// cus_Web1, created at created.
func invoiceEvent(id, eventType string, created time.Time) []byte {
	return stripeevent.Event{ID: id, Type: eventType, Created: created, Livemode: true,
		Object: []byte(`{"id":"in_Web1","object":"invoice","customer":"cus_Web1","amount_due":1200}`)}.JSON()
}

// Deliveries through the real receiver each leave an event log row with
// their exact payload and metadata, processed or queued; the search box
// shows an invoice's and a customer's events newest first, flags the one
// that arrived out of order, and lets an admin erase the customer's
// payloads, audited.
func TestHistory_ReceivedEventsBySearchOutOfOrderAndErase(t *testing.T) {
	t.Parallel()
	b := setupHistory(t)
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	bodies := map[string][]byte{}
	for _, e := range []struct {
		id, typ string
		created time.Duration
	}{
		{"evt_Web1a", "invoice.created", 100 * time.Second},
		{"evt_Web1c", "invoice.paid", 300 * time.Second},
		// Created before evt_Web1c, delivered after it: out of order.
		{"evt_Web1b", "invoice.finalized", 200 * time.Second},
		{"evt_Web1d" + failSuffix, "invoice.updated", 400 * time.Second},
	} {
		body := invoiceEvent(e.id, e.typ, t0.Add(e.created))
		bodies[e.id] = body
		if a := post(t, b.srv, body, stripeevent.Sign(body, testSecret, time.Now())); a.status != http.StatusOK {
			t.Fatalf("%s: %d %s", e.id, a.status, a.body)
		}
	}
	other := stripeevent.Event{ID: "evt_Other", Type: "invoice.paid", Created: t0, Livemode: true,
		Object: []byte(`{"id":"in_Other","object":"invoice","customer":"cus_Other"}`)}.JSON()
	if a := post(t, b.srv, other, stripeevent.Sign(other, testSecret, time.Now())); a.status != http.StatusOK {
		t.Fatalf("evt_Other: %d %s", a.status, a.body)
	}

	// Each row: its exact payload, metadata and how it was processed.
	for id, body := range bodies {
		var how, object, customer string
		var processed bool
		var created time.Time
		err := b.pool.QueryRow(t.Context(), `SELECT processed_how, object_id, customer, processed_at IS NOT NULL, stripe_created
			FROM event_log WHERE event_id = $1`, id).Scan(&how, &object, &customer, &processed, &created)
		if err != nil {
			t.Fatalf("%s's event log row: %v", id, err)
		}
		payload, err := b.store.LoggedPayload(t.Context(), id)
		if err != nil {
			t.Fatalf("%s's logged payload: %v", id, err)
		}
		wantHow, wantProcessed := "inline", true
		if strings.HasSuffix(id, failSuffix) {
			wantHow, wantProcessed = "queued", false
		}
		if string(payload) != string(body) || how != wantHow || processed != wantProcessed || object != "in_Web1" || customer != "cus_Web1" {
			t.Errorf("%s's row: payload equal %v, %s, processed %v, %s, %s; want %s, processed %v",
				id, string(payload) == string(body), how, processed, object, customer, wantHow, wantProcessed)
		}
		var want time.Time
		if err := b.pool.QueryRow(t.Context(), `SELECT to_timestamp($1)`, created.Unix()).Scan(&want); err != nil || !created.Equal(want) {
			t.Errorf("%s's created %v", id, created)
		}
	}

	viewer := b.client(t)
	viewer.signIn(accounts.RoleViewer)
	r := viewer.get("/search?q=in_Web1")
	wantStatus(t, r, http.StatusOK)
	var got []string
	r.doc.Find(`[data-testid="history-event"]`).Each(func(_ int, row *goquery.Selection) {
		id, _ := row.Attr("data-event-id")
		got = append(got, id)
	})
	if want := "evt_Web1d_fails evt_Web1b evt_Web1c evt_Web1a"; strings.Join(got, " ") != want {
		t.Errorf("in_Web1's history: %v, want %s", got, want)
	}
	flagged := r.doc.Find(`[data-testid="history-event"]:has([data-testid="history-out-of-order"])`)
	if id, _ := flagged.Attr("data-event-id"); flagged.Length() != 1 || id != "evt_Web1b" {
		t.Errorf("%d events flagged out of order (%s), want evt_Web1b alone", flagged.Length(), id)
	}
	if outcome, _ := r.doc.Find(`[data-event-id="evt_Web1d_fails"]`).Attr("data-outcome"); outcome == "processed" {
		t.Errorf("the failed event's outcome: %q", outcome)
	}
	if n := r.doc.Find(`[data-testid="erase-form"]`).Length(); n != 0 {
		t.Errorf("a viewer is offered erasure")
	}
	if r := viewer.get("/search?q=evt_Web1b"); r.doc.Find(`[data-testid="out-of-order"]`).Length() != 1 {
		t.Errorf("evt_Web1b's page does not say it came out of order")
	}
	if r := viewer.get("/search?q=evt_Web1c"); r.doc.Find(`[data-testid="out-of-order"]`).Length() != 0 {
		t.Errorf("evt_Web1c's page says it came out of order")
	}
	if n := viewer.get("/search?q=cus_Web1").doc.Find(`[data-testid="history-event"]`).Length(); n != 4 {
		t.Errorf("cus_Web1's history shows %d events, want 4", n)
	}

	admin := b.client(t)
	admin.signIn(accounts.RoleAdmin)
	form := admin.get("/search?q=cus_Web1").doc.Find(`[data-testid="erase-form"]`)
	done := admin.follow(admin.submit(form, nil))
	if s := done.doc.Text(); !strings.Contains(s, "Erased the payloads of 3 events about cus_Web1; 1 more about it are still on the retry queue") {
		t.Errorf("after erasure the page says:\n%s", strings.Join(strings.Fields(s), " "))
	}
	if n := done.doc.Find(`[data-testid="history-event"] td:contains("payload erased on")`).Length(); n != 4 {
		t.Errorf("%d rows say their payload was erased, want 4", n)
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM event_log WHERE payload IS NOT NULL`); n != 1 {
		t.Errorf("%d payloads left, want evt_Other's", n)
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_events WHERE payload IS NOT NULL`); n != 1 {
		t.Errorf("%d queue rows with their payload, want the failed event's", n)
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM audit_log
		WHERE action = 'erase' AND target = 'cus_Web1' AND count = 3 AND user_email = 'admin@example.com'`); n != 1 {
		t.Errorf("%d erasures audited, want 1", n)
	}
	if r := admin.post("/erase", map[string][]string{"customer": {"in_Web1"}}); r.status != http.StatusBadRequest {
		t.Errorf("erasing a non-customer: %d, want 400", r.status)
	}
	if r := viewer.post("/erase", map[string][]string{"customer": {"cus_Other"}}); r.status == http.StatusSeeOther {
		t.Errorf("a viewer erased: %d", r.status)
	}
}

// A processed event's answer on Find an event, which is its page, shows
// what the receiver read of it as a queued event's page does: its mode,
// connected account, API version, endpoint, object and customer.
func TestHistory_ProcessedEventShowsWhatTheReceiverRead(t *testing.T) {
	t.Parallel()
	b := setupHistory(t)
	body := stripeevent.Event{ID: "evt_Web2", Type: "invoice.paid", Created: time.Now(), APIVersion: "2024-06-20",
		Account: "acct_1Web2", Livemode: false,
		Object: []byte(`{"id":"in_Web2","object":"invoice","customer":"cus_Web2"}`)}.JSON()
	if a := post(t, b.srv, body, stripeevent.Sign(body, testSecret, time.Now())); a.status != http.StatusOK {
		t.Fatalf("evt_Web2: %d %s", a.status, a.body)
	}

	viewer := b.client(t)
	viewer.signIn(accounts.RoleViewer)
	r := viewer.get("/search?q=evt_Web2")
	wantStatus(t, r, http.StatusOK)
	if answer, _ := r.doc.Find(`[data-testid="search-answer"]`).Attr("data-answer"); answer != "processed" {
		t.Fatalf("evt_Web2's answer: %q, want processed", answer)
	}
	facts := r.doc.Find(`[data-testid="event-facts"]`)
	for _, want := range []struct{ testid, text string }{
		{"mode-badge", "test"},
		{"account-badge", "acct_1Web2"},
		{"api-version", "2024-06-20"},
		{"endpoint-badge", "default"},
		{"object", "in_Web2 (invoice)"},
		{"customer", "cus_Web2"},
	} {
		got := strings.Join(strings.Fields(facts.Find(`[data-testid="`+want.testid+`"]`).Text()), " ")
		if got != want.text {
			t.Errorf("the processed event's %s: %q, want %q", want.testid, got, want.text)
		}
	}
}

// A queued event's own page flags it out of order as its search answer
// does: it arrived after an event about the same object that Stripe
// created later had been delivered.
func TestHistory_QueuedEventPageSaysOutOfOrder(t *testing.T) {
	t.Parallel()
	b := setupHistory(t)
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	for _, e := range []struct {
		id      string
		created time.Duration
	}{
		{"evt_Web3c", 300 * time.Second},
		// Created before evt_Web3c, delivered after it: out of order.
		{"evt_Web3b" + failSuffix, 200 * time.Second},
		{"evt_Web3d" + failSuffix, 400 * time.Second},
	} {
		body := invoiceEvent(e.id, "invoice.updated", t0.Add(e.created))
		if a := post(t, b.srv, body, stripeevent.Sign(body, testSecret, time.Now())); a.status != http.StatusOK {
			t.Fatalf("%s: %d %s", e.id, a.status, a.body)
		}
	}

	viewer := b.client(t)
	viewer.signIn(accounts.RoleViewer)
	for id, want := range map[string]int{"evt_Web3b" + failSuffix: 1, "evt_Web3d" + failSuffix: 0} {
		e, err := b.store.EventByEventID(t.Context(), id)
		if err != nil {
			t.Fatalf("%s's queue row: %v", id, err)
		}
		r := viewer.get("/events/" + e.ID.String())
		wantStatus(t, r, http.StatusOK)
		note := r.doc.Find(`[data-testid="out-of-order"]`)
		if note.Length() != want {
			t.Errorf("%s's page has %d out-of-order notes, want %d", id, note.Length(), want)
		}
		if want == 1 && !strings.HasPrefix(strings.TrimSpace(note.Text()), "Out of order:") {
			t.Errorf("%s's out-of-order note says %q", id, note.Text())
		}
		if got := viewer.get("/search?q=" + id).doc.Find(`[data-testid="out-of-order"]`).Length(); got != want {
			t.Errorf("%s's search answer has %d out-of-order notes, want %d", id, got, want)
		}
	}
}
