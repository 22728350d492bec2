package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/hookd/hookd/internal/stripeapi/stripetest"
	"github.com/hookd/hookd/internal/stripeevent"
)

// postSigned posts payload to the receiver, signed with the tests' secret
// as Stripe signs it, and fails t unless hookd answers 200.
func (h *hookd) postSigned(t *testing.T, payload []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url(stripeevent.ReceiverPath), bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Stripe-Signature", stripeevent.Sign(payload, webhookSecret, time.Now()))
	resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("post to the receiver: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("post to the receiver: got %d %q, want 200", resp.StatusCode, body)
	}
}

// TestThinEventShowsItsObjectInStripeNow: a thin event carries no object,
// only a reference to it; its page names the object, and "Show it in
// Stripe now" fetches it from Stripe's API and shows it.
func TestThinEventShowsItsObjectInStripeNow(t *testing.T) {
	t.Parallel()
	api, env := stripeEnv(t, "0")
	h := startHookd(t, env...)
	h.downstream.setFailing(true) // so the event stays on the queue, with a page of its own

	id, payload := api.AddThinEvent(stripetest.ThinEvent{Type: "v1.invoice.paid", Created: time.Now()})
	h.postSigned(t, payload)
	ref := relatedObject(t, payload)
	api.PutObject("", map[string]any{"id": ref, "object": "invoice", "status": "paid", "amount_paid": 4200,
		"currency": "eur", "hosted_invoice_url": "https://invoice.stripe.com/i/e2e"})

	page := h.newPage(t)
	h.signIn(t, page)
	visit(t, page, "/events/"+h.queueID(t, id))
	panel := page.GetByTestId("stripe-now")
	must(t, expect.Locator(panel).ToContainText("Fetches invoice "+ref), "the page names the related object")
	must(t, expect.Locator(page.GetByTestId("payload")).ToContainText(`"related_object"`), "the thin payload as received")

	before := api.Requests("/v1/invoices/" + ref)
	click(t, page.GetByRole("button", playwright.PageGetByRoleOptions{Name: "Show it in Stripe now"}), "Show it in Stripe now")
	current := page.GetByTestId("stripe-now-current")
	must(t, expect.Locator(current).ToContainText(`"amount_paid": 4200`), "the object as Stripe holds it now")
	must(t, expect.Locator(current).ToContainText(`"id": "`+ref+`"`), "the related object's id")
	must(t, expect.Locator(page.GetByTestId("stripe-now-snapshot")).ToHaveCount(0), "no snapshot: a thin event carries none")
	if n := api.Requests("/v1/invoices/"+ref) - before; n != 1 {
		t.Errorf("GET /v1/invoices/%s: %d requests, want 1", ref, n)
	}
}

// relatedObject returns the id of a thin event's related object.
func relatedObject(t *testing.T, payload []byte) string {
	t.Helper()
	var e struct {
		RelatedObject struct {
			ID string `json:"id"`
		} `json:"related_object"`
	}
	if err := json.Unmarshal(payload, &e); err != nil || e.RelatedObject.ID == "" {
		t.Fatalf("no related_object in %s: %v", payload, err)
	}
	return e.RelatedObject.ID
}
