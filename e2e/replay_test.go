package e2e

import (
	"slices"
	"testing"

	"github.com/mxschmitt/playwright-go"
)

// TestReplayByFilter: an operator picks the processed invoice.paid events
// of the last day, sees how many a replay would deliver and a sample,
// names the replay and starts it, and watches its page count them through
// to done; the app got each event again with the replay's name.
func TestReplayByFilter(t *testing.T) {
	t.Parallel()
	// A rate slow enough to watch the progress move.
	h := startHookd(t, "HOOKD_FORWARD_RATE=10")
	ids := h.sendEvents(t, 20, "invoice.paid")
	h.sendEvents(t, 2, "customer.created")
	// Past the rate, the receiver queues a delivery for the retry loop to
	// make at the rate: the replay is of the processed ones, so wait for
	// the queue to empty.
	waitFor(t, "every event processed", func() bool {
		return h.count(t, `SELECT count(*) FROM webhook_events`) == 0
	})
	page := h.newPage(t)
	h.signIn(t, page)

	step(t, "PreviewAFilter", func(t *testing.T) {
		click(t, page.GetByRole("link", playwright.PageGetByRoleOptions{Name: "Replays", Exact: playwright.Bool(true)}), "Replays in the nav")
		must(t, page.GetByLabel("Event types").Fill("invoice.paid"), "fill Event types")
		click(t, pageButton(page, "Preview"), "Preview")
		must(t, expect.Locator(page.GetByTestId("replay-count")).ToHaveText("Replay 20 events matching"), "the count")
		must(t, expect.Locator(page.GetByTestId("replay-sample")).ToHaveCount(5), "a sample of five")
	})

	step(t, "NameAndStart", func(t *testing.T) {
		must(t, page.GetByLabel("Name").Fill("app bug #123 fix"), "fill Name")
		click(t, pageButton(page, "Start the replay"), "Start the replay")
		must(t, expect.Locator(page.GetByTestId("flash")).ToContainText("Replay “app bug #123 fix” started"), "flash after starting")
	})

	step(t, "WatchItToTheEnd", func(t *testing.T) {
		// The page refreshes its progress every second until it is done.
		must(t, expect.Locator(page.GetByTestId("replay-state")).ToHaveText("done", playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(30_000)}), "the replay done")
		must(t, expect.Locator(page.GetByTestId("replay-delivered")).ToHaveText("20"), "20 delivered")
		must(t, expect.Locator(page.GetByTestId("replay-remaining")).ToHaveText("0"), "none remaining")
		for _, id := range ids {
			if got := h.downstream.replays(id); !slices.Equal(got, []string{"app bug #123 fix"}) {
				t.Fatalf("the app got %s from replays %q, want once from the named one", id, got)
			}
		}
	})

	step(t, "TheEventsPageListsIt", func(t *testing.T) {
		visit(t, page, "/search?q="+ids[0])
		must(t, expect.Locator(page.GetByTestId("event-replay")).ToContainText("app bug #123 fix: delivered"), "the event's replays")
	})
}
