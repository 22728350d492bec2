package e2e

import (
	"regexp"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/hookd/hookd/queue/queuetest"
)

// searchFor types id into the search box every page has and submits it.
func searchFor(t *testing.T, page playwright.Page, id string) {
	t.Helper()
	box := page.GetByRole("banner").GetByLabel("Find an event by its Stripe id")
	must(t, box.Fill(id), "type "+id+" into the search box")
	must(t, box.Press("Enter"), "submit the search")
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/search\?q=`+regexp.QuoteMeta(id)+`(&|$)`)), "on the answer for "+id)
}

func TestSupportFindsAnEventByIDFromTheOverview(t *testing.T) {
	t.Parallel()
	h := startHookd(t)
	processed := h.sendEvents(t, 1, "invoice.paid")[0]
	h.downstream.setFailing(true)
	queued := h.sendEvents(t, 1, "invoice.payment_failed")[0]

	page := h.newPage(t)
	h.signIn(t, page)
	answer := page.GetByTestId("search-answer")

	step(t, "ProcessedEvent", func(t *testing.T) {
		searchFor(t, page, processed)
		must(t, expect.Locator(answer.GetByRole("heading")).ToHaveText("Processed"), "answer: processed")
		must(t, expect.Locator(page.GetByTestId("search-how")).ToHaveText("on its first delivery, while Stripe waited"),
			"says how it was processed")
	})

	step(t, "QueuedEventLinksToItsDetail", func(t *testing.T) {
		searchFor(t, page, queued)
		must(t, expect.Locator(answer.GetByRole("heading")).ToHaveText("On the queue: waiting to retry, first retry next"), "answer: on the queue")
		must(t, expect.Locator(answer).ToContainText(downstreamRefusal), "shows the last error")
		click(t, page.GetByRole("link", playwright.PageGetByRoleOptions{Name: "Open its detail"}), "Open its detail")
		must(t, expect.Page(page).ToHaveURL(h.url("/events/"+h.queueID(t, queued))), "on the event's detail page")
		must(t, expect.Locator(page.GetByRole("heading", playwright.PageGetByRoleOptions{Level: playwright.Int(1)})).ToHaveText(queued),
			"the detail page is the event's")
	})

	step(t, "UnknownEvent", func(t *testing.T) {
		searchFor(t, page, "evt_neverSentToHookd")
		must(t, expect.Locator(answer.GetByRole("heading")).ToHaveText("Never seen"), "answer: never seen")
	})
}

func TestOperatorRetriesAFailureGroup(t *testing.T) {
	t.Parallel()
	h := startHookd(t)
	h.downstream.setFailing(true)
	group := h.sendEvents(t, 3, "invoice.payment_failed")
	other := h.sendEvents(t, 1, "customer.created")[0]
	// The group's fifth failed attempt makes it dead; the other event
	// waits an hour, out of the test's way.
	h.exec(t, `UPDATE webhook_events SET attempts = 4, next_retry_at = now() WHERE event_id = ANY($1)`, group)
	h.exec(t, `UPDATE webhook_events SET next_retry_at = now() + interval '1 hour' WHERE event_id = $1`, other)
	queuetest.WaitFor(t, 15*time.Second, "the group's three events dead", func() bool {
		return h.count(t, `SELECT count(*) FROM webhook_events WHERE status = 'dead' AND event_id = ANY($1)`, group) == 3
	})
	h.downstream.setFailing(false)

	page := h.newPage(t)
	h.signIn(t, page)
	click(t, page.GetByRole("link", playwright.PageGetByRoleOptions{Name: "Failures", Exact: playwright.Bool(true)}), "Failures")
	groups := page.Locator(`tr[data-testid="failure-group"]`)
	must(t, expect.Locator(groups).ToHaveCount(1), "one failure group: one cause, whatever types it hit")
	types := groups.GetByTestId("failure-type")
	must(t, expect.Locator(types).ToHaveCount(2), "the group lists the two types it hit")
	must(t, expect.Locator(types.First()).ToContainText("invoice.payment_failed 3"), "the type hit most first, with its count")
	must(t, expect.Locator(types.Nth(1)).ToContainText("customer.created 1"), "then the other type, with its count")

	// The type filter narrows the group to invoice.payment_failed.
	must(t, page.GetByLabel("Event type").Fill("invoice.payment_failed"), "type the filter")
	click(t, pageButton(page, "Filter"), "Filter")
	row := page.Locator(`tr[data-testid="failure-group"]`)
	must(t, expect.Locator(row).ToHaveCount(1), "one group of that type")
	must(t, expect.Locator(row.GetByTestId("failure-dead")).ToHaveText("3"), "the group has three dead events")
	must(t, expect.Locator(row.GetByTestId("failure-error")).ToContainText("downstream answered 500"), "the group's error")

	click(t, rowButton(row, "Retry group"), "Retry group")
	must(t, expect.Locator(page.GetByRole("heading", playwright.PageGetByRoleOptions{Level: playwright.Int(1)})).
		ToHaveText("Retry 3 events of this failure group?"), "the confirmation names the count")
	click(t, pageButton(page, "Confirm retry group"), "Confirm retry group")
	must(t, expect.Locator(page.GetByTestId("flash")).ToHaveText("3 events queued for retry"), "flash says how many")

	queuetest.WaitFor(t, 15*time.Second, "the group's events delivered and off the queue", func() bool {
		for _, id := range group {
			if _, ok := h.downstream.deliveredBody(id); !ok {
				return false
			}
		}
		return h.count(t, `SELECT count(*) FROM webhook_events WHERE event_id = ANY($1)`, group) == 0
	})
	visit(t, page, "/failures")
	must(t, expect.Locator(groups).ToHaveCount(1), "the other type's event is still in its group")
	must(t, expect.Locator(groups.GetByTestId("failure-type")).ToHaveText([]string{"customer.created 1"}), "only the other type is left")
	if _, ok := h.downstream.deliveredBody(other); ok {
		t.Errorf("%s (customer.created) was delivered; Retry group was for invoice.payment_failed", other)
	}

	click(t, page.GetByRole("link", playwright.PageGetByRoleOptions{Name: "Audit log", Exact: playwright.Bool(true)}), "Audit log")
	entry := page.Locator(`tr[data-testid="audit-row"]`).Filter(playwright.LocatorFilterOptions{HasText: "retry group"})
	must(t, expect.Locator(entry).ToHaveCount(1), "one audit row for the group retry")
	must(t, expect.Locator(entry).ToContainText("invoice.payment_failed"), "the audit row names the group")
}
