package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/stripeapi/stripetest"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// setCustomer makes the queue rows of events about customer.
func setCustomer(t *testing.T, b *testBundle, customer string, events ...queue.Event) {
	t.Helper()
	for _, e := range events {
		if _, err := b.pool.Exec(context.Background(), `UPDATE webhook_events SET customer = $2 WHERE id = $1`, e.ID, customer); err != nil {
			t.Fatal(err)
		}
	}
}

// eraseAsAdmin erases customer's payloads from the dashboard and returns
// the flash.
func eraseAsAdmin(t *testing.T, b *testBundle, customer string) string {
	t.Helper()
	admin := b.client(t)
	admin.signIn(accounts.RoleAdmin)
	form := admin.get("/search?q=" + customer).doc.Find(`[data-testid="erase-form"]`)
	if form.Length() != 1 {
		t.Fatalf("no erase form on %s's history", customer)
	}
	return testid(admin.follow(admin.submit(form, nil)).doc, "flash")
}

// A dead event whose payload was erased keeps its page, which says so and
// offers no retry; a retry posted anyway is refused with the reason, and
// Pull from Stripe puts Stripe's copy in place and queues it for retry.
func TestErasedDeadEvent_PageSaysSoRetryIsRefusedAndPullQueuesStripesCopy(t *testing.T) {
	t.Parallel()
	rb := setupReconcile(t, "")
	id, _ := rb.api.AddEvent(stripetest.Event{Type: "invoice.paid"})
	dead := queuetest.InsertEvent(t, rb.pool, queuetest.EventOpts{EventID: id, Status: queue.StatusDead, Attempts: queue.MaxAttempts,
		Payload: `{"id":"` + id + `","object":"event","type":"invoice.paid","secret":"the customer's address"}`})
	setCustomer(t, rb.testBundle, "cus_Dead1", dead)

	if flash := eraseAsAdmin(t, rb.testBundle, "cus_Dead1"); !strings.Contains(flash,
		"Erased the payloads of 1 events about cus_Dead1 (1 of them dead on the retry queue, which can no longer be retried)") {
		t.Errorf("erasure flash %q", flash)
	}

	op := rb.client(t)
	op.signIn(accounts.RoleOperator)
	page := op.get("/events/" + dead.ID.String())
	wantStatus(t, page, http.StatusOK)
	note := strings.Join(strings.Fields(testid(page.doc, "payload-erased-note")), " ")
	for _, want := range []string{"Payload erased on ", " by admin@example.com", "can no longer be retried",
		"Pull from Stripe fetches the event again from Stripe's Events API, which keeps events for 30 days"} {
		if !strings.Contains(note, want) {
			t.Errorf("the erased event's note %q does not say %q", note, want)
		}
	}
	if got := testid(page.doc, "payload-erased"); !strings.HasPrefix(got, "Erased on ") {
		t.Errorf("the payload panel says %q", got)
	}
	if strings.Contains(page.body, "the customer's address") || page.doc.Find(`[data-testid="payload"]`).Length() != 0 {
		t.Error("the page still shows a payload")
	}
	if page.doc.Find(`form:has(button:contains("Retry"))`).Length() != 0 {
		t.Error("the page offers a retry of an erased event")
	}

	r := op.post("/events/"+dead.ID.String()+"/retry", url.Values{})
	wantStatus(t, r, http.StatusSeeOther)
	refused := testid(op.follow(r).doc, "flash")
	if !strings.HasPrefix(refused, id+" was not retried: its payload was erased on ") || !strings.Contains(refused, "nothing was changed") {
		t.Errorf("flash of the refused retry %q", refused)
	}
	if got := eventNow(t, rb.testBundle, dead); got.Status != queue.StatusDead || got.ManualRetry || got.Payload != "" {
		t.Errorf("after the refused retry: %s, manual %v, payload %q; want dead, untouched, empty", got.Status, got.ManualRetry, got.Payload)
	}
	for _, a := range auditEntries(t, rb.testBundle) {
		if a.Action == audit.Retry {
			t.Errorf("a refused retry was audited: %+v", a)
		}
	}

	form := page.doc.Find(`[data-testid="pull-erased"]`)
	if form.Length() != 1 {
		t.Fatal("no Pull from Stripe on the erased event's page")
	}
	pulled := testid(op.follow(op.submit(form, nil)).doc, "flash")
	if pulled != id+" pulled from Stripe: Stripe's copy takes the place of its erased payload, and it is queued for retry. "+
		"Its payload is erased again once it is delivered." {
		t.Errorf("flash of the pull %q", pulled)
	}
	got := eventNow(t, rb.testBundle, dead)
	if got.Status != queue.StatusFailed || !got.ManualRetry || !strings.Contains(got.Payload, `"id":"`+id+`"`) ||
		strings.Contains(got.Payload, "the customer's address") || got.PayloadErasedAt == nil {
		t.Errorf("after the pull: %s, manual %v, payload %q, erased at %v; want failed, manual, Stripe's copy, still marked",
			got.Status, got.ManualRetry, got.Payload, got.PayloadErasedAt)
	}
	if rb.forwarded() != 0 {
		t.Errorf("the pull delivered %d events itself, want 0: the retry loop does", rb.forwarded())
	}
	if a := lastAudit(t, rb.testBundle, audit.Pull); a.Target != id || a.Count != 1 {
		t.Errorf("audit of the pull %+v", a)
	}
	if later := testid(op.get("/events/"+dead.ID.String()).doc, "payload-erased-later"); !strings.Contains(later,
		"hookd keeps this one only until the event is delivered") {
		t.Errorf("the pulled event's page says %q", later)
	}
}

// Retry all and a failure group's retry leave dead events whose payloads
// were erased where they are, and say how many they skipped; a pending
// event about the customer keeps its payload, and its page says until when.
func TestErasedDeadEvents_BulkRetriesSkipThemAndSaySo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	erased := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5, LastError: "timeout after 10s"})
	pending := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 2, DueIn: time.Hour,
		LastError: "timeout after 11s"})
	other := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5, LastError: "timeout after 12s"})
	setCustomer(t, b, "cus_Bulk1", erased, pending)
	if flash := eraseAsAdmin(t, b, "cus_Bulk1"); !strings.Contains(flash, "; 1 more about it are still on the retry queue") {
		t.Errorf("erasure flash %q", flash)
	}

	op := b.client(t)
	op.signIn(accounts.RoleOperator)
	list := op.get("/events?status=dead")
	if got := list.doc.Find(`tr[data-event-id="` + erased.EventID + `"] [data-testid="retry-erased"]`).Text(); got != "payload erased: cannot be retried" {
		t.Errorf("the erased event's row says %q", got)
	}
	p := op.get("/events/" + pending.ID.String())
	if later := strings.Join(strings.Fields(testid(p.doc, "payload-erased-later")), " "); !strings.Contains(later,
		"hookd keeps this one only until the event is delivered, or erases it at once should the event die") {
		t.Errorf("the pending event's page says %q", later)
	}
	if p.doc.Find(`[data-testid="payload"]`).Length() != 1 {
		t.Error("the pending event's page does not show the payload it still has")
	}

	form := list.doc.Find(`form:has(button:contains("Retry all"))`)
	action, _ := form.Attr("action")
	confirm := op.post(action, formValues(form))
	form = confirm.doc.Find(`form:has(button:contains("Confirm retry all"))`)
	action, _ = form.Attr("action")
	flash := testid(op.follow(op.post(action, formValues(form))).doc, "flash")
	if want := "1 event queued for retry; 1 dead event was skipped, as its payload was erased and hookd has nothing left to deliver"; flash != want {
		t.Errorf("retry all: flash %q, want %q", flash, want)
	}
	if got := eventNow(t, b, erased); got.Status != queue.StatusDead || got.ManualRetry {
		t.Errorf("the erased event after retry all: %s, manual %v", got.Status, got.ManualRetry)
	}
	if got := eventNow(t, b, other); got.Status != queue.StatusFailed {
		t.Errorf("the other dead event after retry all: %s, want failed", got.Status)
	}
	if a := lastAudit(t, b, audit.RetryAll); a.Count != 1 {
		t.Errorf("retry all audited %d events, want 1", a.Count)
	}

	// The group: the pending event is hastened, the erased one skipped.
	group := op.get("/failures").doc.Find(`[data-testid="failure-group"]`).First().Find("form")
	action, _ = group.Attr("action")
	confirm = op.post(action, formValues(group))
	form = confirm.doc.Find(`form:has(button:contains("Confirm retry group"))`)
	action, _ = form.Attr("action")
	flash = testid(op.follow(op.post(action, formValues(form))).doc, "flash")
	if want := "2 events queued for retry; 1 dead event was skipped, as its payload was erased and hookd has nothing left to deliver"; flash != want {
		t.Errorf("retry group: flash %q, want %q", flash, want)
	}
	if got := eventNow(t, b, erased); got.Status != queue.StatusDead || got.ManualRetry {
		t.Errorf("the erased event after the group's retry: %s, manual %v", got.Status, got.ManualRetry)
	}
}
