package web_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/internal/stripeapi/stripetest"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web"
)

func TestShowItInStripeNow(t *testing.T) {
	t.Parallel()
	api := stripetest.NewServer(t)
	client := stripeapi.New(stripeapi.Config{Key: api.Key(), URL: api.URL, PagePause: -1})
	b := setupWith(t, web.Options{Stripe: client}, httptest.NewServer)
	viewer := b.client(t)
	viewer.signIn(accounts.RoleViewer)

	t.Run("ASnapshotEventShowsWhatChanged", func(t *testing.T) {
		snapshot := `{"id":"in_now1","object":"invoice","status":"open","amount_paid":0,"customer":"cus_1"}`
		payload := stripeevent.Event{ID: "evt_1Snapshot", Type: "invoice.finalized", Created: time.Now(), Object: []byte(snapshot)}.JSON()
		e := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_1Snapshot", Payload: string(payload), Status: queue.StatusDead})
		api.PutObject("", map[string]any{"id": "in_now1", "object": "invoice", "status": "paid", "amount_paid": 2000, "customer": "cus_1"})

		page := viewer.get("/events/" + e.ID.String())
		form := page.doc.Find(`form[action="/events/` + e.ID.String() + `/stripe"]`)
		if form.Length() != 1 || !strings.Contains(form.Text(), "invoice in_now1") {
			t.Fatalf("no Show it in Stripe now for the invoice:\n%s", page.body)
		}
		before := api.TotalRequests()
		r := viewer.post("/events/"+e.ID.String()+"/stripe", formValues(form))
		wantStatus(t, r, http.StatusOK)
		if n := api.TotalRequests() - before; n != 1 || api.Requests("/v1/invoices/in_now1") != 1 {
			t.Errorf("requests to Stripe: %d, want the one GET /v1/invoices/in_now1", n)
		}
		var changed []string
		r.doc.Find(`[data-testid="stripe-now-change"]`).Each(func(_ int, row *goquery.Selection) {
			changed = append(changed, strings.Join(row.Find("td").Map(func(_ int, td *goquery.Selection) string {
				return strings.TrimSpace(td.Text())
			}), " "))
		})
		want := []string{"amount_paid 0 2000", `status "open" "paid"`}
		if strings.Join(changed, "|") != strings.Join(want, "|") {
			t.Errorf("changed fields %q, want %q", changed, want)
		}
		if r.doc.Find(`[data-testid="stripe-now-change"] mark`).Length() != 2 {
			t.Error("the new values are not highlighted")
		}
		if !strings.Contains(testid(r.doc, "stripe-now-snapshot"), `"open"`) || !strings.Contains(testid(r.doc, "stripe-now-current"), `"paid"`) {
			t.Error("the snapshot and the current object are not side by side")
		}
	})

	t.Run("AThinEventShowsItsRelatedObject", func(t *testing.T) {
		id, payload := api.AddThinEvent(stripetest.ThinEvent{Type: "v1.invoice.paid"})
		e := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: id, EventType: "v1.invoice.paid", Payload: string(payload)})
		page := viewer.get("/events/" + e.ID.String())
		form := page.doc.Find(`form[action="/events/` + e.ID.String() + `/stripe"]`)
		r := viewer.post("/events/"+e.ID.String()+"/stripe", formValues(form))
		wantStatus(t, r, http.StatusOK)
		if cur := testid(r.doc, "stripe-now-current"); !strings.Contains(cur, `"object": "invoice"`) {
			t.Errorf("the related object is not shown: %q", cur)
		}
		if r.doc.Find(`[data-testid="stripe-now-snapshot"]`).Length() != 0 {
			t.Error("a thin event shows a snapshot it does not carry")
		}
	})

	t.Run("StripesErrorIsShown", func(t *testing.T) {
		payload := stripeevent.Event{ID: "evt_1Gone", Type: "invoice.paid", Created: time.Now(),
			Object: []byte(`{"id":"in_gone","object":"invoice"}`)}.JSON()
		e := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_1Gone", Payload: string(payload)})
		viewer.get("/events/" + e.ID.String())
		r := viewer.post("/events/"+e.ID.String()+"/stripe", nil)
		wantStatus(t, r, http.StatusBadGateway)
		if msg := testid(r.doc, "stripe-now-error"); !strings.Contains(msg, "Stripe has no /v1/invoices/in_gone") {
			t.Errorf("error: %q", msg)
		}
	})

	t.Run("WithoutTheKeyTheButtonSaysWhatToSet", func(t *testing.T) {
		nb := setup(t)
		v := nb.client(t)
		v.signIn(accounts.RoleViewer)
		payload := stripeevent.Event{ID: "evt_1NoKey", Type: "invoice.paid", Created: time.Now(),
			Object: []byte(`{"id":"in_nokey","object":"invoice"}`)}.JSON()
		e := queuetest.InsertEvent(t, nb.pool, queuetest.EventOpts{EventID: "evt_1NoKey", Payload: string(payload)})
		page := v.get("/events/" + e.ID.String())
		if msg := testid(page.doc, "stripe-now-unconfigured"); !strings.Contains(msg, "set STRIPE_API_KEY") {
			t.Errorf("no word of STRIPE_API_KEY: %q", msg)
		}
		wantStatus(t, v.post("/events/"+e.ID.String()+"/stripe", nil), http.StatusConflict)
	})
}
