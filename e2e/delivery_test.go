package e2e

import (
	"testing"
	"time"

	"github.com/hookd/hookd/queue/queuetest"
)

// TestPauseAndResumeDelivery: an operator pauses delivery with a reason,
// every page says so, an event arriving meanwhile is answered and waits
// on the queue with no attempt spent, and resuming delivers it.
func TestPauseAndResumeDelivery(t *testing.T) {
	t.Parallel()
	h := startHookd(t)
	page := h.newPage(t)
	h.signIn(t, page)

	step(t, "PauseWithAReason", func(t *testing.T) {
		must(t, page.GetByLabel("Reason").Fill("app deploy #42"), "fill Reason")
		click(t, pageButton(page, "Pause delivery"), "Pause delivery")
		must(t, expect.Locator(page.GetByTestId("flash")).ToContainText("Delivery paused"), "flash after pausing")
		banner := page.GetByTestId("delivery-banner")
		must(t, expect.Locator(banner).ToContainText("Delivery is paused by "+adminEmail), "banner says who")
		must(t, expect.Locator(banner).ToContainText("app deploy #42"), "banner says why")
		must(t, expect.Locator(banner).ToContainText("just now"), "banner says since when")
	})

	var id string
	step(t, "EveryPageShowsTheBannerAndEventsWait", func(t *testing.T) {
		id, _ = h.sendEvent(t, "invoice.paid", `{"id":"in_paused","object":"invoice"}`)
		for _, path := range []string{"/events?status=pending", "/failures", "/audit"} {
			visit(t, page, path)
			must(t, expect.Locator(page.GetByTestId("delivery-banner")).ToContainText("app deploy #42"), "banner on "+path)
		}
		if n := h.count(t, `SELECT count(*) FROM webhook_events WHERE event_id = $1 AND attempts = 0`, id); n != 1 {
			t.Fatalf("the event sent while paused is not on the queue with no attempt spent (%d rows)", n)
		}
		if h.downstream.seen(id) {
			t.Fatal("the app got an event while delivery was paused")
		}
	})

	step(t, "ResumeDelivers", func(t *testing.T) {
		click(t, pageButton(page, "Resume delivery"), "Resume delivery")
		must(t, expect.Locator(page.GetByTestId("flash")).ToContainText("Delivery resumed"), "flash after resuming")
		must(t, expect.Locator(page.GetByTestId("delivery-banner")).ToHaveCount(0), "no banner after resuming")
		queuetest.WaitFor(t, 15*time.Second, id+" delivered after resume", func() bool {
			_, ok := h.downstream.deliveredBody(id)
			return ok
		})
	})
}
