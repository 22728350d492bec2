package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/hookd/hookd/queue/queuetest"
)

// TestDestinations: hookd delivers to two apps from a destinations file,
// the CRM's failing. The destinations page shows both and says the file is
// the truth; an operator pauses billing and resumes it (the page and the
// audit log say so); retries the CRM's delivery of an event from the
// event's page, billing's delivery of it untouched; then, with a third
// destination added to the file and hookd sent SIGHUP, replays the event
// to that destination alone: the backfill reaches its app.
func TestDestinations(t *testing.T) {
	t.Parallel()
	billing, crm, analytics := newDownstream(t), newDownstream(t), newDownstream(t)
	crm.setFailing(true)
	file := filepath.Join(t.TempDir(), "destinations.yaml")
	write := func(t *testing.T, names ...string) {
		t.Helper()
		urls := map[string]string{"billing": billing.srv.URL, "crm": crm.srv.URL, "analytics": analytics.srv.URL}
		yaml := "destinations:\n"
		for _, n := range names {
			yaml += fmt.Sprintf("  - name: %s\n    url: %s\n", n, urls[n])
		}
		if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(t, "billing", "crm")
	h := startHookd(t, "HOOKD_FORWARD_URL=", "HOOKD_DESTINATIONS_FILE="+file)
	page := h.newPage(t)
	h.signIn(t, page)
	row := func(name string) playwright.Locator {
		return page.Locator(fmt.Sprintf(`tr[data-testid="destination"][data-destination="%s"]`, name))
	}

	step(t, "TheDestinationsPageShowsBoth", func(t *testing.T) {
		click(t, page.GetByRole("link", playwright.PageGetByRoleOptions{Name: "Destinations", Exact: playwright.Bool(true)}), "Destinations in the nav")
		must(t, expect.Locator(page.GetByTestId("destination")).ToHaveCount(2), "two destinations")
		must(t, expect.Locator(row("billing").GetByTestId("destination-state")).ToHaveText("delivering"), "billing delivering")
		must(t, expect.Locator(row("crm").GetByTestId("destination-state")).ToHaveText("delivering"), "crm delivering")
		must(t, expect.Locator(page.GetByTestId("destinations-from-file")).ToContainText("edit the file and send SIGHUP"), "the file's notice")
	})

	step(t, "PauseAndResumeBilling", func(t *testing.T) {
		must(t, row("billing").GetByLabel("Reason to pause billing").Fill("billing deploy"), "fill the reason")
		click(t, pageButton(page, "Pause billing"), "Pause billing")
		must(t, expect.Locator(page.GetByTestId("flash")).ToContainText("Destination billing paused"), "flash after pausing")
		must(t, expect.Locator(row("billing").GetByTestId("destination-state")).ToHaveText("paused"), "billing paused")
		must(t, expect.Locator(row("billing").GetByTestId("destination-paused")).ToContainText("billing deploy"), "why")
		must(t, expect.Locator(row("crm").GetByTestId("destination-state")).ToHaveText("delivering"), "crm still delivering")
		click(t, pageButton(page, "Resume billing"), "Resume billing")
		must(t, expect.Locator(page.GetByTestId("flash")).ToContainText("Destination billing resumed"), "flash after resuming")
		must(t, expect.Locator(row("billing").GetByTestId("destination-state")).ToHaveText("delivering"), "billing delivering again")
		visit(t, page, "/audit")
		must(t, expect.Locator(page.GetByTestId("audit-row").Filter(playwright.LocatorFilterOptions{HasText: "destination paused"})).
			ToContainText("billing: billing deploy"), "the pause in the audit log")
		must(t, expect.Locator(page.GetByTestId("audit-row").Filter(playwright.LocatorFilterOptions{HasText: "destination resumed"})).
			ToHaveCount(1), "the resume in the audit log")
	})

	var id string
	step(t, "RetryTheCRMsDeliveryFromTheEventsPage", func(t *testing.T) {
		id, _ = h.sendEvent(t, "invoice.paid", `{"id":"in_dest","object":"invoice"}`)
		queuetest.WaitFor(t, 15*time.Second, "billing got "+id, func() bool { _, ok := billing.deliveredBody(id); return ok })
		queuetest.WaitFor(t, 15*time.Second, "the CRM's delivery of "+id+" queued", func() bool {
			return h.count(t, `SELECT count(*) FROM webhook_events WHERE event_id = $1 AND destination = 'crm'`, id) == 1
		})
		crm.setFailing(false)
		visit(t, page, "/events/"+id)
		crmDelivery := page.Locator(`[data-testid="delivery"][data-destination="crm"]`)
		must(t, expect.Locator(page.Locator(`[data-testid="delivery"][data-destination="billing"] [data-testid="delivery-state"]`)).
			ToHaveText("delivered"), "billing's delivery shown delivered")
		click(t, rowButton(crmDelivery, "Retry now"), "Retry now on the CRM's delivery")
		queuetest.WaitFor(t, 15*time.Second, "the CRM got "+id, func() bool { _, ok := crm.deliveredBody(id); return ok })
		queuetest.WaitFor(t, 15*time.Second, id+" processed", func() bool {
			return h.count(t, `SELECT count(*) FROM webhook_events WHERE event_id = $1`, id) == 0
		})
		if n := h.count(t, `SELECT count(*) FROM webhook_attempts WHERE event_id = $1 AND destination = 'billing'`, id); n != 1 {
			t.Errorf("billing has %d attempts of %s, want its one: the CRM's retry must leave it alone", n, id)
		}
	})

	step(t, "ReplayToANewDestination", func(t *testing.T) {
		write(t, "billing", "crm", "analytics")
		must(t, syscall.Kill(h.pid, syscall.SIGHUP), "send hookd SIGHUP")
		queuetest.WaitFor(t, 15*time.Second, "analytics applied", func() bool {
			return h.count(t, `SELECT count(*) FROM destinations WHERE name = 'analytics'`) == 1
		})
		visit(t, page, "/replays")
		_, err := page.GetByLabel("Deliver to").SelectOption(playwright.SelectOptionValues{Values: playwright.StringSlice("analytics")})
		must(t, err, "choose analytics")
		click(t, pageButton(page, "Preview"), "Preview")
		must(t, expect.Locator(page.GetByTestId("replay-count")).ToHaveText("Replay 1 event matching"), "the count")
		must(t, page.GetByLabel("Name").Fill("backfill analytics"), "fill Name")
		click(t, pageButton(page, "Start the replay"), "Start the replay")
		must(t, expect.Locator(page.GetByTestId("replay-destination")).ToContainText("analytics alone"), "the replay's destination")
		must(t, expect.Locator(page.GetByTestId("replay-state")).ToHaveText("done", playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(30_000)}), "the replay done")
		if got := analytics.replays(id); !slices.Equal(got, []string{"backfill analytics"}) {
			t.Errorf("analytics got %s from replays %q, want once from the backfill", id, got)
		}
		if got := billing.replays(id); len(got) != 0 {
			t.Errorf("billing got %s from replays %q, want none: the replay was to analytics alone", id, got)
		}
	})
}
